// Package wiring holds the one definition of which table's stream feeds which
// function, and how: batch size, batching window, filters, retries, record age,
// bisection, partial-batch responses and the on-failure destination. The local
// stack's event-source-mapping emulation, the tests, the CDK app and
// template.yaml all read it.
package wiring

import (
	"fmt"
	"time"

	"github.com/shopstream/shopstream/shared/tables"
)

// Function names (also the folder under functions/).
const (
	API           = "api"
	Counters      = "counters"
	StreamIndexer = "stream-indexer"
	Archiver      = "archiver"
)

// Functions lists every function, in a stable order.
func Functions() []string { return []string{API, Counters, StreamIndexer, Archiver} }

// Timeout is how long one invocation of fn may run, its Lambda timeout: the
// API's answers must come well inside API Gateway's 30 s integration limit;
// the stream functions get room for a batch's retries of contended writes.
func Timeout(fn string) time.Duration {
	if fn == API {
		return 10 * time.Second
	}
	return 60 * time.Second
}

// ProdReservedConcurrency is the reserved concurrency of the stream
// functions in prod: an API spike cannot take the account's concurrency from
// them and let the streams' iterator age grow, and none of them can take
// more than its share. The CDK app's prod stage reserves it (with the token
// trigger's); the local stack caps its mappings' invocations by it
// (RESERVED_CONCURRENCY), so that a batch waits behind a full reservation
// locally as it would on AWS.
func ProdReservedConcurrency() map[string]int {
	return map[string]int{Counters: 20, StreamIndexer: 10, Archiver: 5}
}

// MaxConsumersPerStream is how many readers one stream shard tolerates before
// DynamoDB Streams throttles them.
const MaxConsumersPerStream = 2

// TTLRemovalFilter is the Lambda filter pattern that lets through only the
// REMOVE records DynamoDB's TTL produced.
const TTLRemovalFilter = `{"eventName":["REMOVE"],"userIdentity":{"type":["Service"],"principalId":["dynamodb.amazonaws.com"]}}`

// AuditDigestPrefix is where `make audit` keeps its digest of the archive,
// in the archive bucket beside the archived tables' prefixes (each
// archived table's name and a slash): the CDK app gives it a lifecycle of
// its own.
const AuditDigestPrefix = "audit/digest/"

// Mapping is one event-source mapping from a table's stream to a function.
type Mapping struct {
	// Name is unique and stable.
	Name     string
	Table    string
	Function string
	// BatchSize is the most records in one invocation.
	BatchSize int
	// BatchingWindow is how long records are gathered before an invocation
	// (MaximumBatchingWindowInSeconds: whole seconds, 0 to 300).
	BatchingWindow time.Duration
	// StartingPosition is TRIM_HORIZON or LATEST.
	StartingPosition string
	// Filters are Lambda filter patterns; a record passes if any matches. None: all pass.
	Filters []string
	// RetryAttempts is how often a failing batch is retried before it goes to
	// the on-failure destination.
	RetryAttempts int
	// MaxRecordAge is the age past which a record is sent to the on-failure
	// destination instead of the function.
	MaxRecordAge time.Duration
	// BisectOnError splits a failing batch in two before retrying.
	BisectOnError bool
	// ReportBatchItemFailures lets the function return the failed records.
	ReportBatchItemFailures bool
	// ParallelizationFactor is the concurrent batches per shard.
	ParallelizationFactor int
}

// MaxRecordAge is the age past which every mapping sends a record to the
// on-failure destination, with its payload, instead of the function: half
// of the stream's 24-hour retention. A mapping that falls that far behind
// (a long outage, a throttled function) hands its oldest records to the
// failure bucket while the stream still holds them, where `make replay`
// takes them; at 24 hours the stream may trim a record first, and Lambda
// then skips it with no failure object and no DroppedEventCount.
const MaxRecordAge = 12 * time.Hour

// Mappings returns every event-source mapping.
func Mappings() []Mapping {
	base := func(name, table, fn string) Mapping {
		return Mapping{
			Name:                    name,
			Table:                   table,
			Function:                fn,
			BatchSize:               100,
			BatchingWindow:          time.Second,
			StartingPosition:        "TRIM_HORIZON",
			RetryAttempts:           10,
			MaxRecordAge:            MaxRecordAge,
			BisectOnError:           true,
			ReportBatchItemFailures: true,
			ParallelizationFactor:   1,
		}
	}
	// What users see follows the counters and the index: no batching
	// window, so an idle stream's record is handled at the next poll. Under
	// load batches fill by themselves while an invocation runs, so the
	// counters still coalesce (docs/decisions.md, "Batching windows").
	ordersCounters := base("orders-counters", tables.Orders, Counters)
	ordersCounters.BatchingWindow = 0
	// Orders are never deleted by users; a REMOVE is archiving, which changes no counter.
	ordersCounters.Filters = []string{`{"eventName":["INSERT","MODIFY"]}`}
	reviewsCounters := base("reviews-counters", tables.Reviews, Counters)
	reviewsCounters.BatchingWindow = 0
	productsIndexer := base("products-indexer", tables.Products, StreamIndexer)
	productsIndexer.BatchingWindow = 0
	// The archivers keep the window: nobody waits for the archive, and one
	// object is written per batch and day.
	ordersArchiver := base("orders-archiver", tables.Orders, Archiver)
	ordersArchiver.Filters = []string{TTLRemovalFilter}
	cartsArchiver := base("carts-archiver", tables.Carts, Archiver)
	cartsArchiver.Filters = []string{TTLRemovalFilter}
	return []Mapping{ordersCounters, reviewsCounters, productsIndexer, ordersArchiver, cartsArchiver}
}

// Validate checks the wiring against the table definitions and AWS's limits.
func Validate(ms []Mapping) error {
	consumers := map[string]int{}
	names := map[string]bool{}
	for _, m := range ms {
		t, err := tables.ByName(m.Table)
		if err != nil {
			return fmt.Errorf("mapping %s: %w", m.Name, err)
		}
		if t.Stream == tables.NoStream {
			return fmt.Errorf("mapping %s: table %s has no stream", m.Name, m.Table)
		}
		if names[m.Name] {
			return fmt.Errorf("mapping %s: duplicate name", m.Name)
		}
		names[m.Name] = true
		consumers[m.Table]++
		if consumers[m.Table] > MaxConsumersPerStream {
			return fmt.Errorf("mapping %s: stream of %s would have %d consumers, at most %d", m.Name, m.Table, consumers[m.Table], MaxConsumersPerStream)
		}
		if m.BatchSize < 1 || m.BatchSize > 10000 {
			return fmt.Errorf("mapping %s: batch size %d out of 1..10000", m.Name, m.BatchSize)
		}
		if m.BatchingWindow < 0 || m.BatchingWindow > 300*time.Second {
			return fmt.Errorf("mapping %s: batching window %v out of 0..300s", m.Name, m.BatchingWindow)
		}
		if m.BatchingWindow%time.Second != 0 {
			// MaximumBatchingWindowInSeconds is a whole number of seconds.
			return fmt.Errorf("mapping %s: batching window %v is not whole seconds", m.Name, m.BatchingWindow)
		}
		if m.RetryAttempts < -1 || m.RetryAttempts > 10000 {
			return fmt.Errorf("mapping %s: retry attempts %d out of -1..10000", m.Name, m.RetryAttempts)
		}
		if m.MaxRecordAge != -1 && (m.MaxRecordAge < time.Minute || m.MaxRecordAge > 7*24*time.Hour) {
			return fmt.Errorf("mapping %s: max record age %v out of 60s..7d", m.Name, m.MaxRecordAge)
		}
		if m.ParallelizationFactor < 1 || m.ParallelizationFactor > 10 {
			return fmt.Errorf("mapping %s: parallelization factor %d out of 1..10", m.Name, m.ParallelizationFactor)
		}
	}
	return nil
}
