// Package store holds shopstream's DynamoDB access for the API: users and
// their email claims, products, reviews, carts, orders and idempotency keys.
// Every multi-item change is one TransactWriteItems; every read-modify-write is
// conditional on the version it read. Methods return errcode errors for
// outcomes a caller can act on and document which codes.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/shared/clock"
	"github.com/shopstream/shopstream/shared/ddbcall"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/ulid"
)

// DB is the part of the DynamoDB client the store uses.
type DB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	TransactGetItems(context.Context, *dynamodb.TransactGetItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
}

// Tables are the physical table names the store uses: the API's tables of
// its environment contract (shared/envcontract).
type Tables = tables.Names

// TablesWithPrefix returns the names of the tables created under prefix.
func TablesWithPrefix(prefix string) Tables { return tables.WithPrefix(prefix) }

// Config configures a Store.
type Config struct {
	Tables Tables
	// CartTTL is how long a cart lives after its last touch (default 7 days).
	CartTTL time.Duration
	// OrderRetention is how long a closed order stays before TTL archives it
	// (default 365 days).
	OrderRetention time.Duration
	// IdempotencyTTL is how long an idempotency key is remembered (default 24 h).
	IdempotencyTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewID returns a fresh ULID (default a monotonic generator on Now).
	NewID func() string
	// MaxAttempts bounds retries of a transaction cancelled by contention
	// (default 400; the request's deadline, the API function's timeout,
	// usually ends them first: a request stops a second before it).
	MaxAttempts int
	// CatalogCacheTTL is how long a product page reuses the catalog item of
	// a one-bucket product that an earlier page on this instance read
	// (default DefaultCatalogCacheTTL; negative: never). Within it a page
	// reads only the product's stock bucket.
	CatalogCacheTTL time.Duration
	// PageRepeat is how long, within CatalogCacheTTL, a page whose bucket
	// a read found as cached is answered again with no read (default
	// DefaultPageRepeat; negative: every page reads its bucket).
	PageRepeat time.Duration
	// Logger takes what the store tells an operator (default: discarded).
	Logger *slog.Logger
}

// Store reads and writes shopstream's tables.
type Store struct {
	db  DB
	cfg Config
	t   Tables

	mu  sync.Mutex
	rnd *rand.Rand

	catalogs *catalogCache
	// unreadable limits the logs of counters that hold no integer.
	unreadable logOnce
}

// New returns a Store on db.
func New(db DB, cfg Config) *Store {
	if cfg.CartTTL <= 0 {
		cfg.CartTTL = envcontract.DefaultCartTTL
	}
	if cfg.OrderRetention <= 0 {
		cfg.OrderRetention = envcontract.DefaultOrderRetention
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = ulid.New(cfg.Now).Make
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 400
	}
	if cfg.CatalogCacheTTL == 0 {
		cfg.CatalogCacheTTL = DefaultCatalogCacheTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PageRepeat == 0 {
		cfg.PageRepeat = DefaultPageRepeat
	}
	s := &Store{
		cfg:      cfg,
		t:        cfg.Tables,
		rnd:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed)),
		catalogs: newCatalogCache(cfg.CatalogCacheTTL, cfg.PageRepeat),
	}
	s.db = metered{conflicts{DB: db, s: s}}
	return s
}

func (s *Store) now() time.Time  { return s.cfg.Now().UTC() }
func (s *Store) stamp() string   { return clock.Format(s.now()) }
func (s *Store) nowEpoch() int64 { return s.now().Unix() }

// backoff sleeps before retry attempt (1-based) with full jitter: a random
// time up to min(150ms, 10ms·2^attempt), so contenders spread out and a
// request that lost many rounds still tries several times a second (a
// throttled partition refills within a second). It gives up when the
// sleep would end less than a second before ctx's deadline, so the caller
// still answers in time. A transaction that met only other transactions
// waits less (conflictBackoff).
func (s *Store) backoff(ctx context.Context, attempt int) error {
	return s.retryErr("", s.retries(0).Wait(ctx, attempt))
}

// retries is the store's backoff policy (ddbcall.Backoff): 10 ms doubling
// to 150 ms, full jitter, no wait that would end within a second of the
// request's deadline; maxAttempts bounds the tries (0: the caller does).
//
// The ceiling is low for fairness: with full jitter, a request that has
// waited long retries less often than one that has just started, and under
// a flash sale's throttling a ceiling of 500 ms left 1 to 2 of 336 buyers
// of a sold-out drill without a turn until their deadline (503); at 150 ms,
// none (BenchmarkSoldOut, docs/data-model.md).
func (s *Store) retries(maxAttempts int) ddbcall.Backoff {
	return ddbcall.Backoff{Base: 10 * time.Millisecond, Cap: 150 * time.Millisecond, Margin: time.Second, MaxAttempts: maxAttempts, Rand: s.randN}
}

// conflictBackoff is the wait before retrying a transaction that met
// other transactions only: they hold their items for their two phases,
// some 20-30 ms, so waits up to 40 ms (5 ms doubling, full jitter) find
// the item free again without leaving it idle.
func (s *Store) conflictBackoff(ctx context.Context, attempt int) error {
	return s.retryErr("", s.conflictRetries().Wait(ctx, attempt))
}

// conflictRetries is retries(0) with conflictBackoff's waits. Its quicker
// rounds spend more attempts in the same time, which is why MaxAttempts'
// default leaves the request's deadline to end them (a sold-out drill's
// buyers ran out of 100 attempts in 2-4 s, while stock remained: 503s).
func (s *Store) conflictRetries() ddbcall.Backoff {
	b := s.retries(0)
	b.Base, b.Cap = 5*time.Millisecond, 40*time.Millisecond
	return b
}

func (s *Store) randN(n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rnd.Int64N(n)
}

// retryErr turns a retry's end into the store's codes: retries spent are
// contention in op, a deadline or a cancelled request unavailable.
func (s *Store) retryErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ddbcall.ErrExhausted):
		return contention(op)
	case errors.Is(err, ddbcall.ErrDeadline):
		return unavailable(context.DeadlineExceeded)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return unavailable(err)
	}
	return err
}

// batchGet reads every key of req, asking again for unprocessed keys
// (ddbcall.BatchGet) with the store's backoff, MaxAttempts tries.
func (s *Store) batchGet(ctx context.Context, op string, req map[string]types.KeysAndAttributes, each func(string, map[string]types.AttributeValue) error) error {
	err := ddbcall.BatchGet(ctx, s.db, req, s.retries(s.cfg.MaxAttempts), each)
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s: %w", op, classify(err))
	}
	return s.retryErr(op, err)
}

// contention is returned when retries ran out.
func contention(op string) error {
	return &errcode.Error{Code: errcode.Unavailable, Message: op + ": too much contention, retry later"}
}

func unavailable(err error) error {
	return &errcode.Error{Code: errcode.Unavailable, Message: "the database is busy, retry later", Err: err}
}

// classify turns throttling, service failures and timeouts into
// errcode.Unavailable, and a ValidationException about the size or emptiness
// of a value the request supplied (a key over DynamoDB's 2048/1024-byte
// limits, an empty key, an item over 400 KB) into errcode.Invalid; other
// errors pass as they are (a ValidationException about an expression is a
// bug, and stays an internal error).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "TransactionConflictException", "TransactionInProgressException",
			"InternalServerError", "ServiceUnavailable", "LimitExceededException":
			return unavailable(err)
		case "ValidationException":
			if requestShaped(ae.ErrorMessage()) {
				return &errcode.Error{
					Code: errcode.Invalid, Message: "the request names a value the database cannot hold",
					Fields: []errcode.FieldError{{Field: "", Message: "a value is too large or empty"}}, Err: err,
				}
			}
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return unavailable(err)
	}
	return err
}

// requestShaped reports a ValidationException message about the size or
// emptiness of a value (DynamoDB's wording, as AWS and DynamoDB Local give it).
func requestShaped(msg string) bool {
	for _, m := range []string{
		"primary key values must be under", // key over 2048 (partition) / 1024 (sort) bytes
		"exceeded the maximum size limit",  // the same, as AWS words it
		"cannot contain an empty string",   // empty key value
		"Item size has exceeded",           // item over 400 KB
		"Item size to update has exceeded", // the same, for an update
	} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// isConditionFailed reports a failed ConditionExpression of a single-item write.
func isConditionFailed(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	ok := errors.As(err, &ccf)
	return ccf, ok
}

// Reasons of a cancelled transaction, in action order.
const (
	reasonNone        = "None"
	reasonCondition   = "ConditionalCheckFailed"
	reasonConflict    = "TransactionConflict"
	reasonThrottled   = "ThrottlingError"
	reasonProvisioned = "ProvisionedThroughputExceeded"
)

// cancellation decodes a TransactionCanceledException: the reason code of
// each action, in the order of the request.
type cancellation struct {
	codes []string
	items []map[string]types.AttributeValue
}

func cancelled(err error) (*cancellation, bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	c := &cancellation{}
	for _, r := range tce.CancellationReasons {
		c.codes = append(c.codes, aws.ToString(r.Code))
		c.items = append(c.items, r.Item)
	}
	return c, true
}

// failed reports whether action i failed its condition.
func (c *cancellation) failed(i int) bool {
	return i >= 0 && i < len(c.codes) && c.codes[i] == reasonCondition
}

// anyCondition reports whether some action failed its condition.
func (c *cancellation) anyCondition() bool {
	for _, code := range c.codes {
		if code == reasonCondition {
			return true
		}
	}
	return false
}

// throttled reports a cancellation in which some action was throttled.
func (c *cancellation) throttled() bool {
	for _, code := range c.codes {
		if code == reasonThrottled || code == reasonProvisioned {
			return true
		}
	}
	return false
}

// retryable reports a cancellation by contention or throttling only: worth
// retrying as it is.
func (c *cancellation) retryable() bool {
	any := false
	for _, code := range c.codes {
		switch code {
		case reasonNone, "":
		case reasonConflict, reasonThrottled, reasonProvisioned:
			any = true
		default:
			return false
		}
	}
	return any
}

// Meter counts the DynamoDB calls and consumed capacity of one request.
type Meter struct {
	mu    sync.Mutex
	calls int
	read  float64
	write float64
}

// Usage is what a Meter counted.
type Usage struct {
	Calls int
	// ReadUnits and WriteUnits are the capacity units DynamoDB reported
	// (ReturnConsumedCapacity=TOTAL), tables and indexes together; DynamoDB
	// Local reports too few for a transaction (see metered).
	ReadUnits, WriteUnits float64
}

// Usage returns the counts so far.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Usage{Calls: m.calls, ReadUnits: m.read, WriteUnits: m.write}
}

func (m *Meter) add(write bool, ccs ...types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	for _, cc := range ccs {
		units := aws.ToFloat64(cc.CapacityUnits)
		if write {
			m.write += units
		} else {
			m.read += units
		}
	}
}

type meterKey struct{}

// WithMeter returns a context whose DynamoDB calls are counted by m.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

func meterOf(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// conflicts retries a single-item write that met a transaction in progress
// on its item: DynamoDB refuses it with TransactionConflictException, which
// the SDK does not retry ("Transaction conflict handling in DynamoDB",
// developer guide).
type conflicts struct {
	DB
	s *Store
}

func retryConflicts[In, Out any](ctx context.Context, s *Store, call func(context.Context, In, ...func(*dynamodb.Options)) (Out, error), in In, opts []func(*dynamodb.Options)) (Out, error) {
	for attempt := 1; ; attempt++ {
		out, err := call(ctx, in, opts...)
		var tce *types.TransactionConflictException
		if err == nil || !errors.As(err, &tce) || attempt >= s.cfg.MaxAttempts {
			return out, err
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return out, err
		}
	}
}

func (c conflicts) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return retryConflicts(ctx, c.s, c.DB.PutItem, in, opts)
}

func (c conflicts) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return retryConflicts(ctx, c.s, c.DB.UpdateItem, in, opts)
}

func (c conflicts) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return retryConflicts(ctx, c.s, c.DB.DeleteItem, in, opts)
}
