package esm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestReservedConcurrencyThrottles: a function whose reserved concurrency is
// smaller than the batches its mappings could run at once (here 2, under
// four partitions of two batches each) is never invoked more than that at
// once: the others are throttled and wait, and every record is still
// processed once, an item's in stream order, none given up. Without the
// reservation the same load runs more at once.
func TestReservedConcurrencyThrottles(t *testing.T) {
	for _, reserved := range []int{0, 2} {
		t.Run(fmt.Sprintf("reserved %d", reserved), func(t *testing.T) {
			fs := newFakeStream()
			sh := fs.shard("shard-1", "")
			for round := 0; round < 3; round++ {
				for _, p := range keysOf("p", 0, 11) {
					fs.putOf(sh, p, "u1", "u2") // twelve partition-key values, two items each
				}
			}
			var mu sync.Mutex
			seqs := map[string][]string{}
			var running peak
			fn := InvokerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				defer running.enter()()
				time.Sleep(30 * time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				for _, r := range ev.Records {
					k := r.Change.Keys["productId"].String() + "/" + r.Change.Keys["userId"].String()
					seqs[k] = append(seqs[k], r.Change.SequenceNumber)
				}
				return events.DynamoDBEventResponse{}, nil
			})
			m := fakeMapping("reserved")
			m.BatchSize, m.ParallelizationFactor = 2, 2
			cfg := Config{Partitions: 4}
			if reserved > 0 {
				cfg.Reserved = map[string]int{m.Function: reserved}
			}
			p := startFake(t, fs, m, fn, cfg)
			idleWithin(t, p)
			mu.Lock()
			defer mu.Unlock()
			if len(seqs) != 24 {
				t.Errorf("items processed: got %d, want 24", len(seqs))
			}
			for k, got := range seqs {
				if len(got) != 3 || !slices.IsSorted(got) {
					t.Errorf("item %s: processed %v, want its three changes once each, in stream order", k, got)
				}
			}
			if n := len(p.Failures(m.Name)); n != 0 {
				t.Errorf("%d batches given up, want none", n)
			}
			most := int(running.most.Load())
			t.Logf("reserved %d: at most %d invocations at once, %d throttled", reserved, most, p.Throttles(m.Function))
			switch {
			case reserved == 0 && most <= 2:
				t.Errorf("without a reservation at most %d ran at once, want more than 2 (the load would not test the cap)", most)
			case reserved > 0 && most > reserved:
				t.Errorf("reserved %d: %d ran at once", reserved, most)
			case reserved > 0 && p.Throttles(m.Function) == 0:
				t.Errorf("reserved %d: no invocation throttled", reserved)
			}
		})
	}
}

func TestThrottleBackoffGrowsToItsCap(t *testing.T) {
	for _, c := range []struct {
		attempt  int
		min, max time.Duration
	}{{1, 100 * time.Millisecond, 200 * time.Millisecond}, {2, 200 * time.Millisecond, 400 * time.Millisecond}, {6, 2500 * time.Millisecond, 5 * time.Second}, {60, 2500 * time.Millisecond, 5 * time.Second}} {
		for range 50 {
			if d := ThrottleBackoff(c.attempt); d < c.min || d > c.max {
				t.Fatalf("attempt %d: waited %s, want %s..%s", c.attempt, d, c.min, c.max)
			}
		}
	}
}
