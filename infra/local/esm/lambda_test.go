package esm

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
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
