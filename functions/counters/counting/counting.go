// Package counting keeps the denormalized counters of users and products exact
// from the orders and reviews streams: each record's effect is applied to each
// counter item exactly once however often Lambda delivers it, and each counter
// item gets one write per batch (see docs/counters.md).
package counting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/batchmetrics"
)

// Tables are the physical table names the handler reads and writes.
type Tables struct {
	Orders, Reviews, Users, Products, CounterEvents string
}

type transactor interface {
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Deps are the handler's collaborators.
type Deps struct {
	DB       transactor
	Tables   Tables
	Logger   *slog.Logger
	Reporter *batchmetrics.Reporter
	// MarkerTTL is how long an applied-event marker is kept: longer than a
	// stream record lives (24 h). Default 25 h.
	MarkerTTL time.Duration
	Now       func() time.Time
}

// Handler is the counters Lambda.
type Handler struct {
	deps Deps
}

// New returns the handler.
func New(d Deps) *Handler {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.MarkerTTL == 0 {
		d.MarkerTTL = 25 * time.Hour
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Handler{deps: d}
}

// maxMarkers keeps a transaction within DynamoDB's 100 actions: one update
// and up to 99 markers.
const maxMarkers = 99

// counterKey names one counter item.
type counterKey struct {
	table string // physical table: users or products
	key   string // its partition key value
}

// contribution is one record's delta on one counter item.
type contribution struct {
	record int // index in the batch
	marker string
	delta  map[string]int64
}

// Handle applies a batch and reports the records it could not apply. A
// record the batch holds twice (same eventID) is applied once.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := time.Now()
	failed := map[int]bool{}
	first := map[string]int{} // eventID → index of its first record in the batch
	copies := map[int][]int{} // index of a first record → its later copies
	work := map[counterKey][]contribution{}
	for i, rec := range ev.Records {
		if rec.EventID == "" {
			h.deps.Logger.WarnContext(ctx, "malformed record", "sequenceNumber", rec.Change.SequenceNumber, "err", "no eventID")
			failed[i] = true
			continue
		}
		if j, seen := first[rec.EventID]; seen {
			copies[j] = append(copies[j], i)
			continue
		}
		first[rec.EventID] = i
		deltas, err := h.effects(rec)
		if err != nil {
			h.deps.Logger.WarnContext(ctx, "malformed record", "eventId", rec.EventID, "err", err.Error())
			failed[i] = true
			continue
		}
		for _, d := range deltas {
			work[d.item] = append(work[d.item], contribution{record: i, marker: d.item.table + "#" + d.item.key + "#" + rec.EventID, delta: d.delta})
		}
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	writes := 0
	for item, cs := range work {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := h.apply(ctx, item, cs)
			mu.Lock()
			defer mu.Unlock()
			writes += n
			if err != nil {
				h.deps.Logger.ErrorContext(ctx, "apply counters", "table", item.table, "key", item.key, "count", len(cs), "err", err.Error())
				for _, c := range cs {
					failed[c.record] = true
				}
			}
		}()
	}
	wg.Wait()
	for i := range copies {
		if failed[i] {
			for _, j := range copies[i] {
				failed[j] = true
			}
		}
	}

	var resp events.DynamoDBEventResponse
	idx := make([]int, 0, len(failed))
	for i := range failed {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[i].Change.SequenceNumber})
	}
	if h.deps.Reporter != nil {
		h.deps.Reporter.Batch(ctx, ev, len(idx), time.Since(start), "counterItems", len(work), "writes", writes)
	}
	return resp, nil
}

// apply adds the contributions to one counter item, in transactions of one
// coalesced update plus one conditional marker per contributing record. A
// marker that already exists means that record was applied before: its
// contribution is dropped and the rest retried. It returns how many
// transactions were committed.
func (h *Handler) apply(ctx context.Context, item counterKey, cs []contribution) (int, error) {
	writes := 0
	for len(cs) > 0 {
		n := min(len(cs), maxMarkers)
		chunk := cs[:n]
		done, err := h.applyChunk(ctx, item, chunk)
		writes += done
		if err != nil {
			return writes, err
		}
		cs = cs[n:]
	}
	return writes, nil
}

// maxContended bounds the attempts of one chunk that only contention (another
// batch on the same item, throttling) cancels; the records then fail and come
// again.
const maxContended = 8

func (h *Handler) applyChunk(ctx context.Context, item counterKey, cs []contribution) (int, error) {
	contended := 0
	for len(cs) > 0 {
		in, err := h.transaction(item, cs)
		if err != nil {
			return 0, err
		}
		_, err = h.deps.DB.TransactWriteItems(ctx, in)
		if err == nil {
			return 1, nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			return 0, fmt.Errorf("counters on %s %s: %w", item.table, item.key, err)
		}
		reasons := canceled.CancellationReasons
		if code(reasonAt(reasons, 0)) == "ConditionalCheckFailed" {
			// The counter item does not exist (a deleted product, a user
			// removed by hand): there is nothing to count on, and creating
			// the item would make a phantom.
			h.deps.Logger.WarnContext(ctx, "counter item missing", "table", item.table, "key", item.key, "count", len(cs))
			return 0, nil
		}
		var keep []contribution
		retry := retryable(code(reasonAt(reasons, 0)))
		for i, c := range cs {
			switch r := code(reasonAt(reasons, i+1)); {
			case r == "ConditionalCheckFailed":
				// Applied before: a redelivery. Drop its contribution.
			case retryable(r):
				retry = true
				keep = append(keep, c)
			default:
				keep = append(keep, c)
			}
		}
		switch {
		case len(keep) < len(cs):
			// Some records were applied before: try again at once with the rest.
		case !retry:
			return 0, fmt.Errorf("counters on %s %s: %w", item.table, item.key, err)
		case contended >= maxContended:
			return 0, fmt.Errorf("counters on %s %s: still contended after %d attempts: %w", item.table, item.key, contended+1, err)
		default:
			d := time.Duration(rand.Int64N(int64(10*time.Millisecond<<min(contended, 5)))) + time.Millisecond
			contended++
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("counters on %s %s: %w", item.table, item.key, ctx.Err())
			case <-time.After(d):
			}
		}
		cs = keep
	}
	return 0, nil
}

// retryable reports whether a cancellation reason is contention rather than
// an answer: another transaction on the item, or throttling.
func retryable(code string) bool {
	switch code {
	case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
		return true
	}
	return false
}

func code(r types.CancellationReason) string { return aws.ToString(r.Code) }

func reasonAt(rs []types.CancellationReason, i int) types.CancellationReason {
	if i < len(rs) {
		return rs[i]
	}
	return types.CancellationReason{}
}

// transaction builds the coalesced update and the markers. Deltas that sum to
// zero still write: the markers must record that the records were applied.
func (h *Handler) transaction(item counterKey, cs []contribution) (*dynamodb.TransactWriteItemsInput, error) {
	sum := map[string]int64{}
	for _, c := range cs {
		for k, v := range c.delta {
			sum[k] += v
		}
	}
	names := make([]string, 0, len(sum))
	for k := range sum {
		names = append(names, k)
	}
	sort.Strings(names)
	update := expression.Add(expression.Name("version"), expression.Value(1))
	for _, k := range names {
		update = update.Add(expression.Name(k), expression.Value(sum[k]))
	}
	keyName := "userId"
	if item.table == h.deps.Tables.Products {
		keyName = "productId"
	}
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(expression.AttributeExists(expression.Name(keyName))).Build()
	if err != nil {
		return nil, fmt.Errorf("build counter update: %w", err)
	}
	actions := []types.TransactWriteItem{{Update: &types.Update{
		TableName:                 aws.String(item.table),
		Key:                       map[string]types.AttributeValue{keyName: &types.AttributeValueMemberS{Value: item.key}},
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("eventKey"))).Build()
	if err != nil {
		return nil, fmt.Errorf("build marker condition: %w", err)
	}
	expires := strconv.FormatInt(h.deps.Now().Add(h.deps.MarkerTTL).Unix(), 10)
	for _, c := range cs {
		actions = append(actions, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(h.deps.Tables.CounterEvents),
			Item: map[string]types.AttributeValue{
				"eventKey":  &types.AttributeValueMemberS{Value: c.marker},
				"expiresAt": &types.AttributeValueMemberN{Value: expires},
			},
			ConditionExpression:      cond.Condition(),
			ExpressionAttributeNames: cond.Names(),
		}})
	}
	return &dynamodb.TransactWriteItemsInput{TransactItems: actions}, nil
}
