package esm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shopstream/shopstream/infra/local/keyhash"
)

// Tests of the behaviours docs/pipeline.md lists, each against the fake
// stream of fakestream_test.go.

func keysOf(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func idleWithin(t *testing.T, p *Poller) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Idle(ctx); err != nil {
		t.Fatal(err)
	}
}

// reportFailed answers a partial batch response naming the record keyed bad,
// for as many invocations as times (every invocation when times < 0).
func reportFailed(bad string, times int) func([]string, []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
	var n atomic.Int32
	return func(keys []string, recs []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
		for i, k := range keys {
			if k == bad && (times < 0 || int(n.Add(1)) <= times) {
				return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: recs[i].Change.SequenceNumber}}}, nil
			}
		}
		return events.DynamoDBEventResponse{}, nil
	}
}

// TestPartialResponseWithBisectRetriesTheRemainder: with both
// BisectBatchOnFunctionError and ReportBatchItemFailures, a partial batch
// response splits the batch at the returned record and the remaining records
// are retried as they are, each time spending a retry; when the retries run
// out, the destination receives the remaining records' range.
func TestPartialResponseWithBisectRetriesTheRemainder(t *testing.T) {
	tests := []struct {
		name        string
		times       int
		wantBatches string
		wantFailure bool
	}{
		{"always failing", -1, "[[r1 r2 r3 r4 r5 r6 r7 r8 r9 r10] [r6 r7 r8 r9 r10] [r6 r7 r8 r9 r10]]", true},
		{"failing once", 1, "[[r1 r2 r3 r4 r5 r6 r7 r8 r9 r10] [r6 r7 r8 r9 r10]]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFakeStream()
			sh := fs.shard("shard-1", "")
			fs.put(sh, keysOf("r", 1, 10)...)
			m := fakeMapping("partial-bisect")
			m.BatchSize, m.RetryAttempts, m.BisectOnError, m.ReportBatchItemFailures = 10, 2, true, true
			f := &fn{fail: reportFailed("r6", tt.times)}
			p := startFake(t, fs, m, f, Config{})
			idleWithin(t, p)
			f.mu.Lock()
			got := fmt.Sprint(f.batches)
			f.mu.Unlock()
			if got != tt.wantBatches {
				t.Errorf("invocations: got %s, want %s", got, tt.wantBatches)
			}
			fails := p.Failures(m.Name)
			if !tt.wantFailure {
				if len(fails) != 0 {
					t.Errorf("failures: got %+v, want none", fails)
				}
				return
			}
			seq := func(i int) string { return aws.ToString(sh.recs[i-1].Dynamodb.SequenceNumber) }
			if len(fails) != 1 {
				t.Fatalf("failures: got %d (%+v), want 1", len(fails), fails)
			}
			f0 := fails[0]
			if f0.Batch.StartSequenceNumber != seq(6) || f0.Batch.EndSequenceNumber != seq(10) || f0.Batch.BatchSize != 5 ||
				f0.RequestContext.Condition != ConditionRetriesExhausted || f0.RequestContext.ApproximateInvokeCount != 3 {
				t.Errorf("failure: got %+v %+v, want records 6..10 (%s..%s), 5 of them, after 3 invocations", f0.Batch, f0.RequestContext, seq(6), seq(10))
			}
		})
	}
}

// TestNewIteratorStartsAfterTheLastRecordRead: when an iterator expires (or
// is answered as trimmed) while records wait in the buffer, the new iterator
// starts after the last record read, so nothing is read, or delivered, twice.
func TestNewIteratorStartsAfterTheLastRecordRead(t *testing.T) {
	for _, e := range []error{
		&streamtypes.ExpiredIteratorException{Message: aws.String("Iterator expired")},
		&streamtypes.TrimmedDataAccessException{Message: aws.String("trimmed")},
	} {
		t.Run(fmt.Sprintf("%T", e), func(t *testing.T) {
			fs := newFakeStream()
			sh := fs.shard("shard-1", "")
			fs.put(sh, keysOf("r", 1, 5)...)
			var failed atomic.Bool
			fs.getRecordsErr = func(_ string, pos int) error {
				if pos == 5 && !failed.Swap(true) {
					return e
				}
				return nil
			}
			m := fakeMapping("iterator")
			m.BatchSize, m.BatchingWindow = 3, time.Second // capped at four poll intervals
			f := &fn{}
			p := startFake(t, fs, m, f, Config{})
			waitFor(t, "the iterator error", failed.Load)
			idleWithin(t, p)
			got := f.delivered()
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, b := range f.batches {
				if len(b) > m.BatchSize {
					t.Errorf("batch %v: more than %d records", b, m.BatchSize)
				}
			}
			for _, k := range keysOf("r", 1, 5) {
				if got[k] != 1 {
					t.Errorf("%s delivered %d times, want once (batches %v)", k, got[k], f.batches)
				}
			}
		})
	}
}

// logBuffer collects a poller's JSON logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged objects whose msg is msg.
func (b *logBuffer) lines(msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(b.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(b, nil)) }

// TestOneShardsErrorsDoNotHoldUpAnother: a shard whose every read fails is
// retried on its own; its sibling's records are delivered meanwhile.
func TestOneShardsErrorsDoNotHoldUpAnother(t *testing.T) {
	fs := newFakeStream()
	bad := fs.shard("shard-a", "")
	good := fs.shard("shard-b", "")
	fs.put(bad, "a1", "a2")
	fs.put(good, "b1", "b2", "b3")
	var failing atomic.Bool
	failing.Store(true)
	fs.iteratorErr = func(id string) error {
		if id == bad.id && failing.Load() {
			return &streamtypes.InternalServerError{Message: aws.String("internal error")}
		}
		return nil
	}
	f := &fn{}
	logs := &logBuffer{}
	p := startFake(t, fs, fakeMapping("siblings"), f, Config{Logger: logs.logger()})
	waitFor(t, "the healthy shard's records", func() bool {
		got := f.delivered()
		return got["b1"] == 1 && got["b2"] == 1 && got["b3"] == 1
	})
	if got := f.delivered(); got["a1"] != 0 {
		t.Fatalf("failing shard delivered: %v", got)
	}
	waitFor(t, "the failing shard's errors logged", func() bool { return len(logs.lines("read shard")) > 0 })
	failing.Store(false)
	idleWithin(t, p)
	if got := f.delivered(); got["a1"] != 1 || got["a2"] != 1 {
		t.Errorf("after the errors stopped: got %v, want a1 and a2 once", got)
	}
}

// TestChildWaitsForItsParentUnlessTheParentLeaves: a child shard is read
// after its parent is read to its end; a parent that leaves the stream
// (trimmed, deleted) before that no longer holds its children back.
func TestChildWaitsForItsParentUnlessTheParentLeaves(t *testing.T) {
	fs := newFakeStream()
	parent := fs.shard("shard-p", "")
	child := fs.shard("shard-c", "shard-p")
	fs.put(parent, "p1", "p2")
	fs.put(child, "c1", "c2")
	f := &fn{}
	logs := &logBuffer{}
	p := startFake(t, fs, fakeMapping("lineage"), f, Config{Logger: logs.logger()})
	waitFor(t, "the parent's records", func() bool { return f.delivered()["p2"] == 1 })
	idleWithin(t, p)
	if got := f.delivered(); got["c1"] != 0 {
		t.Fatalf("child read while its parent is open: %v", got)
	}
	// The parent leaves the stream before it was read to its end.
	fs.set(func() {
		parent.unlisted, parent.deleted = true, true
	})
	fs.put(parent, "p3") // never readable
	waitFor(t, "the child's records", func() bool { return f.delivered()["c2"] == 1 })
	idleWithin(t, p)
	got := f.delivered()
	if got["p1"] != 1 || got["p2"] != 1 || got["c1"] != 1 || got["c2"] != 1 || got["p3"] != 0 {
		t.Errorf("deliveries: got %v, want p1 p2 c1 c2 once each", got)
	}
	if len(logs.lines("shard left the stream before it was read to its end")) != 1 {
		t.Errorf("the parent's departure was not logged once")
	}

	// A closed parent is drained before its child starts.
	fs2 := newFakeStream()
	closed := fs2.shard("shard-p", "")
	kid := fs2.shard("shard-c", "shard-p")
	fs2.put(closed, keysOf("p", 1, 7)...)
	fs2.put(kid, keysOf("c", 1, 3)...)
	closed.closed = true
	f2 := &fn{}
	p2 := startFake(t, fs2, fakeMapping("lineage-closed"), f2, Config{})
	idleWithin(t, p2)
	f2.mu.Lock()
	defer f2.mu.Unlock()
	var order []string
	for _, b := range f2.batches {
		order = append(order, b...)
	}
	if want := append(keysOf("p", 1, 7), keysOf("c", 1, 3)...); fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order: got %v, want the parent's records before the child's: %v", order, want)
	}
}

// TestShardsListedLessOftenThanRead: a mapping reads its open shard on every
// poll but lists the stream's shards every listEvery polls, as Lambda does
// not describe a stream four times a second; a shard read to its end has its
// children found without waiting for the next listing.
func TestShardsListedLessOftenThanRead(t *testing.T) {
	fs := newFakeStream()
	open := fs.shard("shard-1", "")
	fs.put(open, "a1")
	f := &fn{}
	startFake(t, fs, fakeMapping("cadence"), f, Config{})
	waitFor(t, "the first record", func() bool { return f.delivered()["a1"] == 1 })
	var describes, reads int
	waitFor(t, "forty polls", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		describes, reads = fs.describes, fs.reads
		return reads >= 40
	})
	// Lambda's pace: about one listing a second for four reads a second.
	if describes < 2 || describes > reads/4+4 {
		t.Errorf("%d listings for %d reads of the shard; want about one every 4 polls", describes, reads)
	}

	// The open shard closes; its child appears only in later listings.
	fs.set(func() { open.closed = true })
	child := fs.shard("shard-2", "shard-1")
	fs.put(child, "b1")
	waitFor(t, "the child's record", func() bool { return f.delivered()["b1"] == 1 })
}

// TestPositionOlderThanTheStreamResumesAtTheOldest: a saved checkpoint whose
// following records were trimmed resumes at the oldest record left, and the
// log says how many records were lost.
func TestPositionOlderThanTheStreamResumesAtTheOldest(t *testing.T) {
	fs := newFakeStream()
	sh := fs.shard("shard-1", "")
	fs.put(sh, keysOf("r", 1, 6)...)
	m := fakeMapping("trimmed")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "esm"), 0o755); err != nil {
		t.Fatal(err)
	}
	cp, _ := json.Marshal(map[string]string{m.Name + "/" + sh.id: aws.ToString(sh.recs[1].Dynamodb.SequenceNumber)})
	if err := os.WriteFile(filepath.Join(dir, "esm", "checkpoints.json"), cp, 0o644); err != nil {
		t.Fatal(err)
	}
	sh.trimmed = 4 // r1..r4 are gone; r3 and r4 were never read
	f := &fn{}
	logs := &logBuffer{}
	p := startFake(t, fs, m, f, Config{DataDir: dir, Logger: logs.logger()})
	waitFor(t, "the records left", func() bool { return f.delivered()["r6"] == 1 })
	idleWithin(t, p)
	if got := f.delivered(); len(got) != 2 || got["r5"] != 1 {
		t.Errorf("deliveries: got %v, want r5 and r6", got)
	}
	lost := logs.lines("records trimmed before they were read")
	if len(lost) != 1 || lost[0]["records"] != "2" || lost[0]["after"] != aws.ToString(sh.recs[1].Dynamodb.SequenceNumber) ||
		lost[0]["before"] != aws.ToString(sh.recs[4].Dynamodb.SequenceNumber) {
		t.Errorf("log of the lost records: got %v, want one line: 2 records after r2, before r5", lost)
	}
}

// TestShardsAreReadConcurrently: a batch of one shard still in the function
// does not keep another shard's batch from being invoked.
func TestShardsAreReadConcurrently(t *testing.T) {
	fs := newFakeStream()
	a := fs.shard("shard-a", "")
	b := fs.shard("shard-b", "")
	fs.put(a, "a1")
	fs.put(b, "b1")
	var inflight atomic.Int32
	var overlapped atomic.Bool
	both := make(chan struct{})
	var once sync.Once
	fn := InvokerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if inflight.Add(1) >= 2 {
			overlapped.Store(true)
			once.Do(func() { close(both) })
		}
		defer inflight.Add(-1)
		// Each batch waits, a while at most, for the other shard's.
		select {
		case <-both:
		case <-time.After(3 * time.Second):
		}
		return events.DynamoDBEventResponse{}, nil
	})
	p := startFake(t, fs, fakeMapping("concurrent-shards"), fn, Config{})
	idleWithin(t, p)
	if !overlapped.Load() {
		t.Errorf("the two shards' batches never ran at the same time")
	}
}

// TestParallelizationFactor: a shard's records are processed by up to
// ParallelizationFactor concurrent batches, an item's records always in
// stream order, each once; the checkpoint ends at the last record.
func TestParallelizationFactor(t *testing.T) {
	for _, factor := range []int{1, 4} {
		t.Run(fmt.Sprintf("factor %d", factor), func(t *testing.T) {
			fs := newFakeStream()
			sh := fs.shard("shard-1", "")
			for round := 0; round < 5; round++ {
				fs.put(sh, keysOf("u", 0, 7)...) // eight items, five changes each, interleaved
			}
			var mu sync.Mutex
			seqs := map[string][]string{} // item -> sequence numbers in the order processed
			var running peak
			fn := InvokerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				defer running.enter()()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				for _, r := range ev.Records {
					k := r.Change.Keys["userId"].String()
					seqs[k] = append(seqs[k], r.Change.SequenceNumber)
				}
				return events.DynamoDBEventResponse{}, nil
			})
			m := fakeMapping("parallel")
			m.BatchSize, m.ParallelizationFactor = 3, factor
			p := startFake(t, fs, m, fn, Config{})
			idleWithin(t, p)
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keysOf("u", 0, 7) {
				got := seqs[k]
				if len(got) != 5 || !slices.IsSorted(got) {
					t.Errorf("item %s: processed %v, want its five changes once each, in stream order", k, got)
				}
			}
			switch got := int(running.most.Load()); {
			case factor == 1 && got != 1:
				t.Errorf("concurrent batches: got %d, want 1", got)
			case factor > 1 && (got < 2 || got > factor):
				t.Errorf("concurrent batches: got %d, want 2..%d", got, factor)
			}
			last := aws.ToString(sh.recs[len(sh.recs)-1].Dynamodb.SequenceNumber)
			if cp := p.checkpoint(m.Name + "/" + sh.id); cp != last {
				t.Errorf("checkpoint: got %s, want the last record %s", cp, last)
			}
		})
	}
}

// TestPartitionsSplitAShard: with Config.Partitions, one shard read from the
// stream runs as that many shards, one for each partition of the table: the
// records of a partition-key value stay in one of them, in stream order, and
// the shards' batches run side by side, ParallelizationFactor each.
func TestPartitionsSplitAShard(t *testing.T) {
	for _, c := range []struct{ partitions, factor int }{{1, 1}, {4, 1}, {4, 2}} {
		t.Run(fmt.Sprintf("%d partitions, factor %d", c.partitions, c.factor), func(t *testing.T) {
			fs := newFakeStream()
			sh := fs.shard("shard-1", "")
			products := keysOf("p", 0, 11)
			for round := 0; round < 4; round++ {
				for _, p := range products {
					fs.putOf(sh, p, "u1", "u2") // twelve partition-key values, two items each
				}
			}
			var mu sync.Mutex
			byProduct := map[string][]string{} // sequence numbers in the order processed
			byItem := map[string][]string{}
			var running peak
			fn := InvokerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				defer running.enter()()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				for _, r := range ev.Records {
					p := r.Change.Keys["productId"].String()
					item := p + "/" + r.Change.Keys["userId"].String()
					byProduct[p] = append(byProduct[p], r.Change.SequenceNumber)
					byItem[item] = append(byItem[item], r.Change.SequenceNumber)
				}
				return events.DynamoDBEventResponse{}, nil
			})
			m := fakeMapping("partitioned")
			m.BatchSize, m.ParallelizationFactor = 2, c.factor
			p := startFake(t, fs, m, fn, Config{Partitions: c.partitions})
			idleWithin(t, p)
			mu.Lock()
			defer mu.Unlock()
			for item, got := range byItem {
				if len(got) != 4 || !slices.IsSorted(got) {
					t.Errorf("item %s: processed %v, want its four changes once each, in stream order", item, got)
				}
			}
			if len(byItem) != 2*len(products) {
				t.Errorf("items processed: got %d, want %d", len(byItem), 2*len(products))
			}
			if c.factor == 1 {
				// One lane a partition: a partition-key value's records
				// never meet in two batches at once.
				for prod, got := range byProduct {
					if !slices.IsSorted(got) {
						t.Errorf("product %s: processed %v, want stream order", prod, got)
					}
				}
			}
			lanes := c.partitions * c.factor
			switch got := int(running.most.Load()); {
			case lanes == 1 && got != 1:
				t.Errorf("concurrent batches: got %d, want 1", got)
			case lanes > 1 && (got < 2 || got > lanes):
				t.Errorf("concurrent batches: got %d, want 2..%d", got, lanes)
			case c.partitions > 1 && got <= c.factor:
				t.Errorf("concurrent batches: got %d, want more than one partition's %d", got, c.factor)
			}
			last := aws.ToString(sh.recs[len(sh.recs)-1].Dynamodb.SequenceNumber)
			if cp := p.checkpoint(m.Name + "/" + sh.id); cp != last {
				t.Errorf("checkpoint: got %s, want the last record %s", cp, last)
			}
		})
	}
}

// TestStuckPartitionDoesNotStopTheOthers: a partition whose batch keeps
// failing holds back only its own records. The shard read from the stream
// reads on for the other partitions, as AWS polls each shard on its own.
func TestStuckPartitionDoesNotStopTheOthers(t *testing.T) {
	const partitions = 4
	partitionOf := func(product string) int {
		raw, _ := json.Marshal(events.NewStringAttribute(product))
		return int(keyhash.Mix64("partition", raw) % partitions)
	}
	fs := newFakeStream()
	sh := fs.shard("shard-1", "")
	stuckProduct := "p0"
	for range 40 {
		fs.putOf(sh, stuckProduct, "u1")
	}
	var stuck atomic.Bool
	stuck.Store(true)
	var mu sync.Mutex
	done := map[string]int{}
	fn := InvokerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		for _, r := range ev.Records {
			if r.Change.Keys["productId"].String() == stuckProduct && stuck.Load() {
				return events.DynamoDBEventResponse{}, errors.New("stuck")
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			done[r.Change.Keys["productId"].String()]++
		}
		return events.DynamoDBEventResponse{}, nil
	})
	m := fakeMapping("stuck")
	m.BatchSize, m.RetryAttempts, m.BisectOnError = 2, 10000, false
	p := startFake(t, fs, m, fn, Config{Partitions: partitions})
	// The stuck partition's forty records are read and buffered first.
	waitFor(t, "the stuck records read", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.reads >= 2
	})
	var others []string
	for _, prod := range keysOf("p", 1, 12) {
		if partitionOf(prod) != partitionOf(stuckProduct) {
			others = append(others, prod)
			fs.putOf(sh, prod, "u1", "u2")
		}
	}
	if len(others) == 0 {
		t.Fatal("every product hashes to the stuck partition")
	}
	waitFor(t, "the other partitions' records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, prod := range others {
			if done[prod] != 2 {
				return false
			}
		}
		return true
	})
	if done[stuckProduct] != 0 {
		t.Errorf("stuck product: %d records done while its batch failed", done[stuckProduct])
	}
	stuck.Store(false)
	idleWithin(t, p)
	mu.Lock()
	defer mu.Unlock()
	if done[stuckProduct] != 40 {
		t.Errorf("stuck product once released: %d records done, want 40", done[stuckProduct])
	}
}

// peak tracks how many invocations run at once, and the most seen.
type peak struct{ now, most atomic.Int32 }

// enter counts an invocation in; the function it returns counts it out.
func (p *peak) enter() func() {
	n := p.now.Add(1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	return func() { p.now.Add(-1) }
}
