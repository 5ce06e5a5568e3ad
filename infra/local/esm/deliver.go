package esm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/wiring"
)

// attempt is a part of a batch on its way to the function: how often it was
// invoked, and how often retried. Splitting a batch in two does not consume
// the retry quota, as on AWS; the halves inherit the count.
type attempt struct {
	recs        []pending
	invocations int
	retries     int
	// duplicate marks a second delivery of records the function has
	// already completed; it is never duplicated again.
	duplicate bool
}

// deliver hands a batch to the function until every record has succeeded or
// gone to the on-failure destination; it returns false when the poller closed
// first.
func (r *runner) deliver(ctx context.Context, s *shard, batch []pending) bool {
	queue := []attempt{{recs: batch}}
	for len(queue) > 0 && ctx.Err() == nil {
		a := queue[0]
		a.recs = r.ageOut(s, a)
		if len(a.recs) == 0 {
			queue = queue[1:]
			continue
		}
		failedAt, out := r.invoke(ctx, a.recs)
		a.invocations++
		if failedAt < 0 {
			queue = queue[1:]
			if !a.duplicate && r.duplicateDue() {
				// At-least-once delivery: the same records again, as a
				// poller that resumes from an older checkpoint sends them,
				// before anything after them on the shard.
				r.log.Info("batch delivered again", "shardId", s.id, "count", len(a.recs),
					"start", a.recs[0].seq, "end", a.recs[len(a.recs)-1].seq)
				r.duplicated.Add(1)
				queue = append([]attempt{{recs: a.recs, invocations: a.invocations, duplicate: true}}, queue...)
			}
			continue
		}
		rest := a.recs[failedAt:]
		// A function error splits the batch in two. A partial batch
		// response splits it at the returned sequence number: the records
		// before it are done and the rest is retried as it is, which spends
		// a retry (AWS: "the batch is bisected at the returned sequence
		// number and Lambda retries only the remaining records").
		if r.m.BisectOnError && !out.partial && len(rest) > 1 {
			half := len(rest) / 2
			queue = append([]attempt{
				{recs: rest[:half], invocations: a.invocations, retries: a.retries, duplicate: a.duplicate},
				{recs: rest[half:], invocations: a.invocations, retries: a.retries, duplicate: a.duplicate},
			}, queue[1:]...)
			continue
		}
		if a.retries >= r.m.RetryAttempts && r.m.RetryAttempts >= 0 {
			r.p.fail(r.m.Name, r.failure(s, rest, ConditionRetriesExhausted, a.invocations, out))
			queue = queue[1:]
			continue
		}
		a.retries++
		a.recs = rest
		queue[0] = a
		select {
		case <-ctx.Done():
		case <-time.After(backoff(a.retries)):
		}
	}
	return ctx.Err() == nil
}

// duplicateDue counts a batch the function completed and reports whether
// this one is to be delivered again (every Config.DuplicateEvery-th).
func (r *runner) duplicateDue() bool {
	n := r.p.cfg.DuplicateEvery
	if n <= 0 {
		return false
	}
	return r.completed.Add(1)%int64(n) == 0
}

// outcome is how an invocation ended, for the on-failure record.
type outcome struct {
	requestID     string
	functionError *string // "Unhandled" when the function returned an error, nil when it answered
	reason        string
	// partial is true when the function answered with a valid partial
	// batch response: the invocation succeeded up to the failed record.
	partial bool
}

// failure builds the on-failure record of the records b, payload included.
func (r *runner) failure(s *shard, b []pending, condition string, invocations int, out outcome) Failure {
	now := r.p.cfg.Now().UTC()
	o := failures.Object{
		Version: failures.Version, Timestamp: now,
		RequestContext: failures.RequestContext{RequestID: out.requestID, FunctionArn: functionArn(r.m.Function),
			Condition: condition, ApproximateInvokeCount: invocations},
		Batch: failures.BatchInfo{ShardID: s.id, StartSequenceNumber: b[0].seq, EndSequenceNumber: b[len(b)-1].seq,
			ApproximateArrivalOfFirstRecord: b[0].rec.Change.ApproximateCreationDateTime.UTC(),
			ApproximateArrivalOfLastRecord:  b[len(b)-1].rec.Change.ApproximateCreationDateTime.UTC(),
			BatchSize:                       len(b), StreamArn: s.arn},
		Payload: events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(b))},
	}
	for i, x := range b {
		o.Payload.Records[i] = x.rec
	}
	if invocations > 0 {
		o.ResponseContext = failures.ResponseContext{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: out.functionError}
	}
	key := failures.NewKey(failures.LocalMappingID(r.m.Name), s.id, now)
	return Failure{Object: o, Key: key.String(), Reason: out.reason}
}

// unhandled is the functionError of an invocation that failed.
var unhandled = "Unhandled"

func functionArn(function string) string {
	return "arn:aws:lambda:us-east-1:000000000000:function:" + function
}

func backoff(retry int) time.Duration {
	return 10 * time.Millisecond << min(retry, 6)
}

// ageOut sends the leading records older than the mapping's maximum age to
// the on-failure destination and returns the rest.
func (r *runner) ageOut(s *shard, a attempt) []pending {
	b := a.recs
	if r.m.MaxRecordAge <= 0 {
		return b
	}
	now := r.p.cfg.Now()
	i := 0
	for i < len(b) && now.Sub(b[i].rec.Change.ApproximateCreationDateTime.Time) > r.m.MaxRecordAge {
		i++
	}
	if i > 0 {
		r.p.fail(r.m.Name, r.failure(s, b[:i], ConditionRecordAge, a.invocations, outcome{reason: "record older than " + r.m.MaxRecordAge.String()}))
	}
	return b[i:]
}

// invoke runs the function on b and returns the index of the first record to
// retry (-1 when all succeeded) and how the invocation ended.
func (r *runner) invoke(ctx context.Context, b []pending) (int, outcome) {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(b))}
	for i, x := range b {
		ev.Records[i] = x.rec
	}
	start := time.Now()
	// The function sees a Lambda context, so its logger carries a request id.
	lc := &lambdacontext.LambdaContext{AwsRequestID: requestID(), InvokedFunctionArn: functionArn(r.m.Function)}
	out := outcome{requestID: lc.AwsRequestID}
	// Throttled while the function's reserved concurrency is taken; the
	// slot is held until Lambda stops waiting for the invocation.
	release, err := r.p.acquire(ctx, r.m.Function, r.log)
	if err != nil {
		out.functionError, out.reason = &unhandled, err.Error() // the poller is closing
		return 0, out
	}
	resp, err := r.handleWithin(lambdacontext.NewContext(ctx, lc), ev)
	release()
	if err != nil {
		r.p.cfg.Logger.Warn("batch failed", "mapping", r.m.Name, "requestId", lc.AwsRequestID, "count", len(b), "err", err.Error(), "ms", time.Since(start).Milliseconds())
		out.functionError, out.reason = &unhandled, err.Error()
		return 0, out
	}
	if !r.m.ReportBatchItemFailures || len(resp.BatchItemFailures) == 0 {
		return -1, out
	}
	first := -1
	for _, f := range resp.BatchItemFailures {
		idx := -1
		for i, x := range b {
			if x.seq == f.ItemIdentifier {
				idx = i
				break
			}
		}
		if idx < 0 {
			// An empty or unknown identifier fails the whole batch, as on AWS.
			out.reason = fmt.Sprintf("unknown item identifier %q", f.ItemIdentifier)
			return 0, out
		}
		if first < 0 || idx < first {
			first = idx
		}
	}
	out.reason, out.partial = "partial batch failure", true
	return first, out
}

// requestID returns a random UUID, the shape of Lambda's request ids.
func requestID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// handleWithin runs the function with the function timeout's deadline. A
// function that overruns it is left to finish on its own; its answer no longer
// counts, as Lambda stops waiting for a timed-out invocation.
func (r *runner) handleWithin(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	timeout := r.p.cfg.FunctionTimeout
	if timeout <= 0 {
		timeout = wiring.Timeout(r.m.Function)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		resp events.DynamoDBEventResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := r.safeHandle(ctx, ev)
		done <- answer{resp, err}
	}()
	select {
	case a := <-done:
		return a.resp, a.err
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return events.DynamoDBEventResponse{}, ctx.Err() // the poller is closing
		}
		// Lambda's own words for it.
		return events.DynamoDBEventResponse{}, fmt.Errorf("Task timed out after %.2f seconds", timeout.Seconds())
	}
}

func (r *runner) safeHandle(ctx context.Context, ev events.DynamoDBEvent) (resp events.DynamoDBEventResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("function panicked: %v", v)
		}
	}()
	return r.fn.Handle(ctx, ev)
}
