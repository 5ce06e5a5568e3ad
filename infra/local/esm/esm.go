// Package esm emulates Lambda's DynamoDB event-source mappings on the local
// stack: it polls each mapped table's stream with the DynamoDB Streams API,
// filters records with Lambda's filter-pattern rules, batches them by size and
// window, invokes the function in-process with a real events.DynamoDBEvent,
// honours partial batch responses, retries, bisects failing batches, ages
// records out, and sends what it gives up on to an on-failure destination.
package esm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Invoker is a stream function.
type Invoker interface {
	Handle(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

// InvokerFunc lets a plain function be an Invoker.
type InvokerFunc func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// Handle calls f.
func (f InvokerFunc) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return f(ctx, ev)
}

// TableDescriber finds a table's latest stream (*dynamodb.Client is one).
type TableDescriber interface {
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// StreamReader reads a stream (*dynamodbstreams.Client is one).
type StreamReader interface {
	DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(context.Context, *dynamodbstreams.GetRecordsInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Config configures the poller.
type Config struct {
	DynamoDB    TableDescriber
	Streams     StreamReader
	TablePrefix string
	Mappings    []wiring.Mapping
	// Functions maps a function name (wiring.Counters, …) to its handler.
	Functions map[string]Invoker
	// PollInterval is how often each stream is polled (default 250ms). Batching
	// windows are capped at four intervals so that local runs stay quick.
	PollInterval time.Duration
	// DataDir keeps checkpoints; "" keeps them in memory.
	DataDir string
	// Destination receives the batches the mappings give up on, as Lambda
	// writes them to an S3 on-failure destination; nil keeps them in memory
	// only (Poller.Failures).
	Destination Destination
	// FunctionTimeout bounds one invocation (default: wiring.Timeout of the
	// mapping's function). The function's context carries the deadline; an
	// invocation still running at it fails as Lambda's "Task timed out" does,
	// and the batch is retried like any failure.
	FunctionTimeout time.Duration
	Logger          *slog.Logger
	Now             func() time.Time
}

// Failure is what a mapping gave up on: the object Lambda writes to an S3
// on-failure destination (shared/failures), where it went, and why.
type Failure struct {
	failures.Object
	// Key is the object's key in the failure bucket.
	Key string
	// Reason is the last error, for the log; AWS keeps it in the function's logs.
	Reason string
}

// Conditions under which records go to the on-failure destination.
const (
	ConditionRetriesExhausted = failures.ConditionRetriesExhausted
	ConditionRecordAge        = failures.ConditionRecordAge
)

// Poller runs every mapping.
type Poller struct {
	cfg    Config
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	failures    map[string][]Failure // by mapping name
	checkpoints map[string]string    // mapping/shard -> last sequence number handled
	idleAt      map[string]time.Time
}

// Start validates the wiring and starts polling.
func Start(ctx context.Context, cfg Config) (*Poller, error) {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := wiring.Validate(cfg.Mappings); err != nil {
		return nil, err
	}
	p := &Poller{cfg: cfg, failures: map[string][]Failure{}, checkpoints: map[string]string{}, idleAt: map[string]time.Time{}}
	if err := p.loadCheckpoints(); err != nil {
		return nil, err
	}
	var runners []*runner
	for _, m := range cfg.Mappings {
		fn, ok := cfg.Functions[m.Function]
		if !ok {
			return nil, fmt.Errorf("mapping %s: no function %q", m.Name, m.Function)
		}
		r := &runner{p: p, m: m, fn: fn, shards: map[string]*shard{}}
		for _, f := range m.Filters {
			pat, err := parsePattern(f)
			if err != nil {
				return nil, fmt.Errorf("mapping %s: %w", m.Name, err)
			}
			r.filters = append(r.filters, pat)
		}
		runners = append(runners, r)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	for _, r := range runners {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			r.loop(runCtx)
		}()
	}
	return p, nil
}

// Close stops polling and waits for batches in flight.
func (p *Poller) Close() error {
	p.cancel()
	p.wg.Wait()
	return nil
}

// Failures returns what the mapping's on-failure destination received.
func (p *Poller) Failures(mapping string) []Failure {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Failure(nil), p.failures[mapping]...)
}

// Idle returns once, for every mapping, a poll cycle that began after the call
// found its stream read to the end with nothing buffered or in flight.
func (p *Poller) Idle(ctx context.Context) error {
	since := time.Now()
	for {
		p.mu.Lock()
		done := true
		for _, m := range p.cfg.Mappings {
			if !p.idleAt[m.Name].After(since) {
				done = false
			}
		}
		p.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for stream processing: %w", ctx.Err())
		case <-time.After(p.cfg.PollInterval / 2):
		}
	}
}

// setIdle records that a poll cycle which began at began found nothing to do.
func (p *Poller) setIdle(mapping string, began time.Time) {
	p.mu.Lock()
	if began.After(p.idleAt[mapping]) {
		p.idleAt[mapping] = began
	}
	p.mu.Unlock()
}

func (p *Poller) fail(mapping string, f Failure) {
	p.mu.Lock()
	p.failures[mapping] = append(p.failures[mapping], f)
	p.mu.Unlock()
	p.cfg.Logger.Warn("on-failure destination", "mapping", mapping, "key", f.Key, "condition", f.RequestContext.Condition,
		"shardId", f.Batch.ShardID, "start", f.Batch.StartSequenceNumber, "end", f.Batch.EndSequenceNumber, "count", f.Batch.BatchSize,
		"invocations", f.RequestContext.ApproximateInvokeCount, "reason", f.Reason)
	p.destine(mapping, f)
}

func (p *Poller) checkpointPath() string {
	return filepath.Join(p.cfg.DataDir, "esm", "checkpoints.json")
}

func (p *Poller) loadCheckpoints() error {
	if p.cfg.DataDir == "" {
		return nil
	}
	b, err := os.ReadFile(p.checkpointPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read checkpoints: %w", err)
	}
	if err := json.Unmarshal(b, &p.checkpoints); err != nil {
		return fmt.Errorf("decode checkpoints: %w", err)
	}
	return nil
}

func (p *Poller) checkpoint(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkpoints[key]
}

func (p *Poller) setCheckpoint(key, seq string) error {
	p.mu.Lock()
	p.checkpoints[key] = seq
	var b []byte
	if p.cfg.DataDir != "" {
		b, _ = json.Marshal(p.checkpoints)
	}
	p.mu.Unlock()
	if b == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p.checkpointPath()), 0o755); err != nil {
		return fmt.Errorf("write checkpoints: %w", err)
	}
	tmp := p.checkpointPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write checkpoints: %w", err)
	}
	return os.Rename(tmp, p.checkpointPath())
}

// runner polls one mapping.
type runner struct {
	p       *Poller
	m       wiring.Mapping
	fn      Invoker
	filters []pattern
	shards  map[string]*shard
	arn     string
	// listed is true once the stream's shards were first listed: shards
	// that appear later are read from their start, whatever the mapping's
	// starting position, as Lambda reads child shards.
	listed bool
}

type shard struct {
	id       string
	position streamtypes.ShardIteratorType
	iterator *string
	closed   bool
	buffer   []pending
	since    time.Time // when the oldest buffered record was read
	// lastRead is the sequence number of the last record read from the
	// stream, delivered or not: a new iterator starts after it, so records
	// already buffered are not read twice.
	lastRead string
}

type pending struct {
	rec  events.DynamoDBEventRecord
	seq  string
	size int // bytes of the record in the invocation payload
}

// MaxPayload is Lambda's limit on a synchronous invocation's payload: a batch
// ends before it, whatever the batch size.
const MaxPayload = 6 << 20

// cut returns how many of the buffered records make the next batch: at most
// the batch size, and no more than fit in MaxPayload (at least one).
func (r *runner) cut(buf []pending) int {
	total := len(`{"Records":[]}`)
	n := 0
	for n < len(buf) && n < r.m.BatchSize {
		if total+buf[n].size+1 > MaxPayload && n > 0 {
			break
		}
		total += buf[n].size + 1
		n++
	}
	return n
}

func (r *runner) loop(ctx context.Context) {
	t := time.NewTicker(r.p.cfg.PollInterval)
	defer t.Stop()
	for {
		if err := r.poll(ctx); err != nil && ctx.Err() == nil {
			r.p.cfg.Logger.Warn("poll stream", "mapping", r.m.Name, "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *runner) window() time.Duration {
	w := r.m.BatchingWindow
	if max := 4 * r.p.cfg.PollInterval; w > max {
		w = max
	}
	return w
}

// poll reads every shard once and delivers what is due; it marks the mapping
// idle when nothing was read and nothing waits.
func (r *runner) poll(ctx context.Context) error {
	began := time.Now()
	table := tables.Physical(r.p.cfg.TablePrefix, r.m.Table)
	desc, err := r.p.cfg.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe %s: %w", table, err)
	}
	arn := aws.ToString(desc.Table.LatestStreamArn)
	if arn == "" {
		return fmt.Errorf("table %s has no stream", table)
	}
	if arn != r.arn {
		r.arn, r.shards, r.listed = arn, map[string]*shard{}, false
	}
	var list []streamtypes.Shard
	var start *string
	for {
		out, err := r.p.cfg.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			return fmt.Errorf("describe stream %s: %w", arn, err)
		}
		list = append(list, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		start = out.StreamDescription.LastEvaluatedShardId
	}
	for _, sh := range list {
		id := aws.ToString(sh.ShardId)
		if r.shards[id] == nil {
			s := &shard{id: id, position: streamtypes.ShardIteratorType(r.m.StartingPosition)}
			if r.listed {
				s.position = streamtypes.ShardIteratorTypeTrimHorizon
			}
			r.shards[id] = s
		}
	}
	r.listed = true
	quiet := true
	for _, sh := range list {
		id := aws.ToString(sh.ShardId)
		if parent := aws.ToString(sh.ParentShardId); parent != "" {
			if ps, ok := r.shards[parent]; ok && (!ps.closed || len(ps.buffer) > 0) {
				continue // a child waits until its parent is drained
			}
		}
		s := r.shards[id]
		read, err := r.read(ctx, s)
		if err != nil {
			return err
		}
		if read > 0 || len(s.buffer) > 0 {
			quiet = false
		}
		for len(s.buffer) > 0 {
			n := r.cut(s.buffer)
			full := n < len(s.buffer) || n >= r.m.BatchSize
			if !full && time.Since(s.since) < r.window() && !s.closed {
				break
			}
			batch := s.buffer[:n]
			r.deliver(ctx, s, batch)
			if ctx.Err() != nil {
				return nil
			}
			if err := r.p.setCheckpoint(r.m.Name+"/"+s.id, batch[n-1].seq); err != nil {
				return err
			}
			s.buffer = s.buffer[n:]
			s.since = time.Now()
		}
	}
	if quiet {
		r.p.setIdle(r.m.Name, began)
	}
	return nil
}

// read fetches new records of one shard into its buffer, filtered; it returns
// how many records the stream gave.
func (r *runner) read(ctx context.Context, s *shard) (int, error) {
	if s.closed {
		return 0, nil
	}
	key := r.m.Name + "/" + s.id
	if s.iterator == nil {
		in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn), ShardId: aws.String(s.id),
			ShardIteratorType: s.position}
		last := s.lastRead
		if last == "" {
			last = r.p.checkpoint(key)
		}
		if last != "" {
			in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(last)
		}
		out, err := r.p.cfg.Streams.GetShardIterator(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("shard iterator %s: %w", s.id, err)
		}
		s.iterator = out.ShardIterator
	}
	total := 0
	for len(s.buffer) < r.m.BatchSize {
		out, err := r.p.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: s.iterator, Limit: aws.Int32(1000)})
		var expired *streamtypes.ExpiredIteratorException
		var trimmed *streamtypes.TrimmedDataAccessException
		if errors.As(err, &expired) || errors.As(err, &trimmed) {
			// DynamoDB Local also answers a TRIM_HORIZON iterator of a shard
			// that has no record yet this way: ask for a new iterator later.
			s.iterator = nil
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("get records %s: %w", s.id, err)
		}
		total += len(out.Records)
		for _, rec := range out.Records {
			ev := toEvent(rec, r.arn)
			s.lastRead = ev.Change.SequenceNumber
			raw, err := json.Marshal(ev)
			if err != nil {
				return total, fmt.Errorf("encode record %s: %w", ev.EventID, err)
			}
			if !r.passes(raw) {
				// Filtered out: never delivered, but the position moves past it.
				if len(s.buffer) == 0 {
					if err := r.p.setCheckpoint(key, ev.Change.SequenceNumber); err != nil {
						return total, err
					}
				}
				continue
			}
			if len(s.buffer) == 0 {
				s.since = time.Now()
			}
			s.buffer = append(s.buffer, pending{rec: ev, seq: ev.Change.SequenceNumber, size: len(raw)})
		}
		s.iterator = out.NextShardIterator
		if s.iterator == nil {
			s.closed = true
			break
		}
		if len(out.Records) == 0 {
			break
		}
	}
	return total, nil
}

// passes applies the filters to a record as Lambda does, to its JSON.
func (r *runner) passes(raw []byte) bool {
	if len(r.filters) == 0 {
		return true
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return false
	}
	for _, f := range r.filters {
		if f.match(doc) {
			return true
		}
	}
	return false
}

// attempt is a part of a batch on its way to the function: how often it was
// invoked, and how often retried. Splitting a batch in two does not consume
// the retry quota, as on AWS; the halves inherit the count.
type attempt struct {
	recs        []pending
	invocations int
	retries     int
}

// deliver hands a batch to the function until every record has succeeded or
// gone to the on-failure destination.
func (r *runner) deliver(ctx context.Context, s *shard, batch []pending) {
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
				{recs: rest[:half], invocations: a.invocations, retries: a.retries},
				{recs: rest[half:], invocations: a.invocations, retries: a.retries},
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
}

// outcome is how an invocation ended, for the on-failure record.
type outcome struct {
	requestID     string
	functionError string // "Unhandled" when the function returned an error
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
			BatchSize:                       len(b), StreamArn: r.arn},
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
	resp, err := r.handleWithin(lambdacontext.NewContext(ctx, lc), ev)
	if err != nil {
		r.p.cfg.Logger.Warn("batch failed", "mapping", r.m.Name, "requestId", lc.AwsRequestID, "count", len(b), "err", err.Error(), "ms", time.Since(start).Milliseconds())
		out.functionError, out.reason = "Unhandled", err.Error()
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
