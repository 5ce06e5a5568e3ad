// Package esm emulates Lambda's DynamoDB event-source mappings on the local
// stack: it reads every shard of each mapped table's stream concurrently with
// the DynamoDB Streams API (parents before children), filters records with
// Lambda's filter-pattern rules, batches them by size and window, runs up to
// ParallelizationFactor batches of a shard at once (in order per item),
// splits each shard into the shards of the table's partitions (Config.Partitions),
// invokes the function in-process with a real events.DynamoDBEvent, honours
// partial batch responses, retries, bisects failing batches, ages records out,
// and sends what it gives up on to an on-failure destination.
package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

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
	// DuplicateEvery delivers every n-th batch a mapping's function
	// completes a second time, right after the first, as Lambda may: "Lambda
	// event source mappings process each event at least once, and duplicate
	// processing of records can occur" (invocation-eventsourcemapping). 0
	// never does.
	DuplicateEvery int
	// Partitions is how many shards each shard read from a stream stands
	// for. AWS gives a table's stream a shard for each partition of the
	// table, and Lambda runs a batch of every shard at once; DynamoDB Local
	// keeps one shard per stream. The poller splits each shard it reads into
	// Partitions shards by the partition-key value of each record, as the
	// table's partitions would split it: the records of one partition-key
	// value stay in one shard, in stream order, and the shards run side by
	// side, ParallelizationFactor batches each. 0 or 1 reads a shard as
	// it is.
	Partitions int
	// Reserved caps each function named in it (wiring.Counters, …) at that
	// many invocations at once, across all its mappings, as a function's
	// reserved concurrency does on AWS; a function not named has no cap.
	// An invocation past the cap is throttled: the batch waits, backing off
	// (ThrottleBackoff), and is invoked once a slot is free. Lambda retries
	// a throttled batch until its records age out, and the retry does not
	// count against MaximumRetryAttempts (services-dynamodb-errors, "Before
	// invocation").
	Reserved map[string]int
	Logger   *slog.Logger
	Now      func() time.Time
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
	cfg     Config
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	runners []*runner

	// invocations counts the batches whose invocation returned: Idle
	// waits for a round in which none did.
	invocations atomic.Int64

	// slots holds a token per invocation running of a function with a
	// reserved concurrency (Config.Reserved); throttles counts the
	// invocations it throttled, by function.
	slots     map[string]chan struct{}
	throttles map[string]*atomic.Int64

	mu          sync.Mutex
	failures    map[string][]Failure // by mapping name
	checkpoints map[string]string    // mapping/shard -> last sequence number done
	// fileMu orders the writes of checkpoints.
	fileMu sync.Mutex
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
	p := &Poller{cfg: cfg, failures: map[string][]Failure{}, checkpoints: map[string]string{},
		slots: map[string]chan struct{}{}, throttles: map[string]*atomic.Int64{}}
	for name, n := range cfg.Reserved {
		if n < 1 {
			return nil, fmt.Errorf("reserved concurrency of %s: %d, want 1 or more (a function of 0 is never invoked)", name, n)
		}
		p.slots[name] = make(chan struct{}, n)
		p.throttles[name] = new(atomic.Int64)
	}
	if err := p.loadCheckpoints(); err != nil {
		return nil, err
	}
	for _, m := range cfg.Mappings {
		fn, ok := cfg.Functions[m.Function]
		if !ok {
			return nil, fmt.Errorf("mapping %s: no function %q", m.Name, m.Function)
		}
		t, err := tables.ByName(m.Table)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", m.Name, err)
		}
		r := &runner{p: p, m: m, fn: fn, partitionKey: t.PartitionKey.Name, shards: map[string]*shard{}, relist: make(chan struct{}, 1), log: cfg.Logger.With("mapping", m.Name)}
		for _, f := range m.Filters {
			pat, err := parsePattern(f)
			if err != nil {
				return nil, fmt.Errorf("mapping %s: %w", m.Name, err)
			}
			r.filters = append(r.filters, pat)
		}
		p.runners = append(p.runners, r)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	for _, r := range p.runners {
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

// Throttles returns how many invocations of function were throttled by its
// reserved concurrency (Config.Reserved).
func (p *Poller) Throttles(function string) int64 {
	if n, ok := p.throttles[function]; ok {
		return n.Load()
	}
	return 0
}

// Reserved returns function's reserved concurrency (Config.Reserved), 0
// when it has none.
func (p *Poller) Reserved(function string) int { return cap(p.slots[function]) }

// ThrottleBackoff is how long a throttled batch waits before its invocation
// is tried again, after attempt throttles (1 the first): from 200 ms,
// doubling, at most 5 s, with jitter, so that the waiting batches do not
// all come back at once. AWS publishes no figure for its pollers; a wait
// at least this long makes no local run finish sooner than on AWS.
func ThrottleBackoff(attempt int) time.Duration {
	d := 200 * time.Millisecond << min(attempt-1, 5)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// acquire takes a slot of function's reserved concurrency, waiting out
// throttles; release gives it back. A function with none is never
// throttled.
func (p *Poller) acquire(ctx context.Context, function string, log *slog.Logger) (release func(), err error) {
	slots, ok := p.slots[function]
	if !ok {
		return func() {}, nil
	}
	for attempt := 1; ; attempt++ {
		select {
		case slots <- struct{}{}:
			return func() { <-slots }, nil
		default:
		}
		p.throttles[function].Add(1)
		wait := ThrottleBackoff(attempt)
		log.Debug("throttled", "function", function, "reservedConcurrency", cap(slots), "attempt", attempt, "waitMs", wait.Milliseconds())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Failures returns what the mapping's on-failure destination received.
func (p *Poller) Failures(mapping string) []Failure {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Failure(nil), p.failures[mapping]...)
}

// Duplicated returns how many batches the mapping delivered a second time
// (Config.DuplicateEvery).
func (p *Poller) Duplicated(mapping string) int64 {
	var n int64
	for _, r := range p.runners {
		if r.m.Name == mapping {
			n += r.duplicated.Load()
		}
	}
	return n
}

// Idle returns once, for every mapping, a listing of the stream and a poll of
// each of its shards that began after a moment found every shard read to the
// end with nothing buffered or in flight, and no invocation returned in
// between: a function's writes (the counters' updates of products, which the
// indexer follows) were read by the mappings that follow them.
func (p *Poller) Idle(ctx context.Context) error {
	for {
		before := p.invocations.Load()
		if err := p.quietSince(ctx, time.Now()); err != nil {
			return err
		}
		if p.invocations.Load() == before {
			return nil
		}
	}
}

// quietSince returns once every mapping's shards were found quiet by polls
// that began after since.
func (p *Poller) quietSince(ctx context.Context, since time.Time) error {
	for {
		done := true
		for _, r := range p.runners {
			if !r.idleSince(since) {
				done = false
			}
		}
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

// fail is where a discarded batch leaves the mapping: it goes to the
// mapping's on-failure destination and the shard moves on.
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
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
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
	if err := os.Rename(tmp, p.checkpointPath()); err != nil {
		return fmt.Errorf("write checkpoints: %w", err)
	}
	return nil
}
