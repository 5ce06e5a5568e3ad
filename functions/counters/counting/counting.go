// Package counting keeps the denormalized counters of users and products exact
// from the orders and reviews streams: each record is applied to all its counter
// items at once, and exactly once however often Lambda delivers it, in
// transactions that group a batch's records so that a counter item is written
// once per group, not once per record (see docs/counters.md).
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
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/failures"
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
	// MarkerTTL is how long an applied-record marker is kept: as long as a
	// record can come again, from the stream or from a replay of the failure
	// bucket. Default DefaultMarkerTTL.
	MarkerTTL time.Duration
	Now       func() time.Time
}

// DefaultMarkerTTL outlives every way a record can come again: a failed batch
// is replayed from the failure bucket up to failures.ReplayHorizon after it
// failed, and its records were then at most 24 h old (the mapping's maximum
// record age); the extra hour covers clock skew.
const DefaultMarkerTTL = failures.ReplayHorizon + 25*time.Hour

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
		d.MarkerTTL = DefaultMarkerTTL
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Handler{deps: d}
}

// maxActions is DynamoDB's limit of actions in one TransactWriteItems.
const maxActions = 100

// counterKey names one counter item.
type counterKey struct {
	table string // physical table: users or products
	key   string // its partition key value
}

func (k counterKey) String() string { return k.table + "#" + k.key }

// work is one record of the batch with what it adds to each counter item it
// touches (each item once).
type work struct {
	record int // index in the batch
	marker string
	// at is the record's ApproximateCreationDateTime (Unix seconds): the
	// time its change was made, which a counter item's watermark is held to.
	at     int64
	deltas []delta
}

// Watermark is the counter item attribute a repair sets (Unix seconds, the
// audit's clock): the item's counters already hold every change made before
// it. A record created before an item's watermark is not added to that item,
// or a repair followed by a replay of the same record would count it twice;
// its marker is still written, and its other items still count it
// (docs/counters.md, "Repairs and the watermark").
const Watermark = "countedThrough"

// Handle applies a batch and reports the records it could not apply. A
// record the batch holds twice (same eventID) is applied once.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := time.Now()
	failed := map[int]bool{}
	first := map[string]int{} // eventID → index of its first record in the batch
	copies := map[int][]int{} // index of a first record → its later copies
	var todo []*work
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
		if err == nil && len(deltas) >= maxActions {
			err = fmt.Errorf("%d counter items: more than one transaction holds with the record's marker", len(deltas))
		}
		if err == nil && len(deltas) > 0 && rec.Change.ApproximateCreationDateTime.IsZero() {
			err = errors.New("no ApproximateCreationDateTime: the record cannot be held to a repaired item's watermark")
		}
		if err != nil {
			h.deps.Logger.WarnContext(ctx, "malformed record", "eventId", rec.EventID, "err", err.Error())
			failed[i] = true
			continue
		}
		if len(deltas) > 0 {
			todo = append(todo, &work{record: i, marker: ddbstream.TableName(rec) + "#" + rec.EventID,
				at: rec.Change.ApproximateCreationDateTime.Unix(), deltas: deltas})
		}
	}

	groups := group(todo)
	// Groups that share a counter item run one after the other: at once they
	// would only cancel each other's transactions.
	locks := map[counterKey]*sync.Mutex{}
	for _, g := range groups {
		for _, k := range g.items() {
			if locks[k] == nil {
				locks[k] = &sync.Mutex{}
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var res applied
	for _, g := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			items := g.items()
			for _, k := range items {
				locks[k].Lock()
			}
			r, err := h.apply(ctx, g)
			for _, k := range items {
				locks[k].Unlock()
			}
			mu.Lock()
			defer mu.Unlock()
			res.transactions += r.transactions
			res.units += r.units
			if err != nil {
				h.deps.Logger.ErrorContext(ctx, "apply counters", "count", len(g), "items", len(items), "err", err.Error())
				for _, w := range g {
					failed[w.record] = true
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
		h.deps.Reporter.Batch(ctx, ev, len(idx), time.Since(start), "counterItems", len(locks), "transactions", res.transactions, "writeUnits", res.units)
	}
	return resp, nil
}

// txGroup is a set of records applied in one transaction: one update per
// counter item they touch and one marker per record.
type txGroup []*work

// items returns the group's distinct counter items, sorted.
func (g txGroup) items() []counterKey {
	seen := map[counterKey]bool{}
	var out []counterKey
	for _, w := range g {
		for _, d := range w.deltas {
			if !seen[d.item] {
				seen[d.item] = true
				out = append(out, d.item)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// group splits a batch's records into transactions of at most maxActions
// actions: a record's marker and an update of each distinct counter item of
// its group. Records that share items are placed next to each other first
// (ordered by their items, the batch's most touched items first), so that an
// item is updated in as few groups as possible; then each group takes records
// in that order while they fit. The records' order in the batch does not
// matter: their deltas are sums.
func group(todo []*work) []txGroup {
	freq := map[counterKey]int{}
	for _, w := range todo {
		for _, d := range w.deltas {
			freq[d.item]++
		}
	}
	sig := map[*work][]counterKey{}
	for _, w := range todo {
		ks := make([]counterKey, 0, len(w.deltas))
		for _, d := range w.deltas {
			ks = append(ks, d.item)
		}
		sort.Slice(ks, func(i, j int) bool {
			if freq[ks[i]] != freq[ks[j]] {
				return freq[ks[i]] > freq[ks[j]]
			}
			return ks[i].String() < ks[j].String()
		})
		sig[w] = ks
	}
	ordered := append([]*work(nil), todo...)
	sort.SliceStable(ordered, func(i, j int) bool {
		a, b := sig[ordered[i]], sig[ordered[j]]
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				if freq[a[k]] != freq[b[k]] {
					return freq[a[k]] > freq[b[k]]
				}
				return a[k].String() < b[k].String()
			}
		}
		return len(a) < len(b)
	})

	var out []txGroup
	var cur txGroup
	items := map[counterKey]bool{}
	for _, w := range ordered {
		added := 0
		for _, d := range w.deltas {
			if !items[d.item] {
				added++
			}
		}
		if len(cur)+1+len(items)+added > maxActions {
			out = append(out, cur)
			cur, items = nil, map[counterKey]bool{}
		}
		cur = append(cur, w)
		for _, d := range w.deltas {
			items[d.item] = true
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// applied is what a group's transactions wrote.
type applied struct {
	transactions int
	units        float64 // consumed write units, as DynamoDB reports them
}

// maxContended bounds the attempts of one group that only contention (another
// batch on the same item, throttling) cancels; the records then fail and
// come again. A transaction holds its items for its two phases (AWS's
// TransactionConflict), so concurrent batches on one popular item take
// turns: 30 attempts with backoff up to 640 ms (about 10 s) outlast a score
// of them. An invocation stops retrying a second before its deadline.
const maxContended = 30

// apply adds the group's records to their counter items in one transaction,
// with one conditional marker per record. A marker that already exists means
// that record was applied before, to all its items: it is dropped and the rest
// retried at once. An item that does not exist (a deleted product) is dropped
// from the group, and its records are applied to their other items. An item a
// repair has set a watermark on takes only the records created at or after
// it: the transaction's condition fails when the item holds a watermark newer
// than one of its records, returns the item, and the group is retried at once
// with that watermark known.
func (h *Handler) apply(ctx context.Context, g txGroup) (applied, error) {
	var res applied
	missing := map[counterKey]bool{}
	through := map[counterKey]int64{}
	contended := 0
	for len(g) > 0 {
		in, items, err := h.transaction(g, missing, through)
		if err != nil {
			return res, err
		}
		if len(items) == 0 && gone(g, missing) {
			// Every item the records touch is gone: nothing to count, and
			// nothing a redelivery could count twice.
			return res, nil
		}
		out, err := h.deps.DB.TransactWriteItems(ctx, in)
		if err == nil {
			res.transactions++
			if out != nil {
				for _, cc := range out.ConsumedCapacity {
					res.units += aws.ToFloat64(cc.CapacityUnits)
				}
			}
			return res, nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			return res, fmt.Errorf("counters of %d records: %w", len(g), err)
		}
		reasons := canceled.CancellationReasons
		retry, answered := false, false
		for i, k := range items {
			switch r := code(reasonAt(reasons, i)); {
			case r == "ConditionalCheckFailed":
				item := reasonAt(reasons, i).Item
				if item == nil {
					// The item does not exist: a deleted product, or a user
					// removed by hand. Creating it would make a phantom.
					h.deps.Logger.WarnContext(ctx, "counter item missing", "table", k.table, "key", k.key)
					missing[k] = true
					answered = true
					continue
				}
				// A repair set the item's counters after some of the
				// records were created: they are in it already.
				w, err := watermark(item)
				if err != nil {
					return res, fmt.Errorf("counter item %s: %w", k, err)
				}
				if w <= through[k] {
					return res, fmt.Errorf("counter item %s: condition failed at watermark %d, which was known", k, w)
				}
				h.deps.Logger.InfoContext(ctx, "counter item repaired", "table", k.table, "key", k.key, "countedThrough", w)
				through[k] = w
				answered = true
			case retryable(r):
				retry = true
			}
		}
		var keep txGroup
		for i, w := range g {
			switch r := code(reasonAt(reasons, len(items)+i)); {
			case r == "ConditionalCheckFailed":
				// Applied before, to every item: a redelivery. Drop it.
				answered = true
			case retryable(r):
				retry = true
				keep = append(keep, w)
			default:
				keep = append(keep, w)
			}
		}
		switch {
		case answered:
			// Some records were applied before or some items are gone: try
			// again at once with what is left.
		case !retry:
			return res, fmt.Errorf("counters of %d records: %w", len(g), err)
		case contended >= maxContended || nearDeadline(ctx):
			return res, fmt.Errorf("counters of %d records: still contended after %d attempts: %w", len(g), contended+1, err)
		default:
			d := time.Duration(rand.Int64N(int64(10*time.Millisecond<<min(contended, 6)))) + time.Millisecond
			contended++
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("counters of %d records: %w", len(g), ctx.Err())
			case <-time.After(d):
			}
		}
		g = keep
	}
	return res, nil
}

// nearDeadline reports an invocation with a second or less left: its
// records are better failed (and redelivered) than cut off by the timeout.
func nearDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < time.Second
}

// gone reports whether every counter item the group's records touch is
// missing. Records that only repaired items hold (their watermarks are newer)
// still write their markers.
func gone(g txGroup, missing map[counterKey]bool) bool {
	for _, w := range g {
		for _, d := range w.deltas {
			if !missing[d.item] {
				return false
			}
		}
	}
	return true
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

// watermark reads an item's Watermark.
func watermark(item map[string]types.AttributeValue) (int64, error) {
	n, ok := item[Watermark].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("condition failed on an item without a numeric %s", Watermark)
	}
	w, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", Watermark, n.Value, err)
	}
	return w, nil
}

// transaction builds the group's transaction: first one action per counter
// item that exists as far as we know and takes records of the group (those
// created at or after its known watermark, through): an update adding their
// summed deltas, or, where they sum to zero, a condition check that the item
// holds no newer watermark; then one marker per record. It returns the items
// in action order.
func (h *Handler) transaction(g txGroup, missing map[counterKey]bool, through map[counterKey]int64) (*dynamodb.TransactWriteItemsInput, []counterKey, error) {
	sums := map[counterKey]map[string]int64{}
	oldest := map[counterKey]int64{} // the oldest record each item takes
	for _, w := range g {
		for _, d := range w.deltas {
			if missing[d.item] || w.at < through[d.item] {
				continue
			}
			if sums[d.item] == nil {
				sums[d.item] = map[string]int64{}
				oldest[d.item] = w.at
			}
			oldest[d.item] = min(oldest[d.item], w.at)
			for k, v := range d.delta {
				sums[d.item][k] += v
			}
		}
	}
	var items []counterKey
	for _, k := range g.items() {
		if sums[k] != nil {
			items = append(items, k)
		}
	}
	actions := make([]types.TransactWriteItem, 0, len(items)+len(g))
	for _, k := range items {
		if !nonZero(sums[k]) {
			c, err := h.check(k, oldest[k])
			if err != nil {
				return nil, nil, err
			}
			actions = append(actions, types.TransactWriteItem{ConditionCheck: c})
			continue
		}
		u, err := h.update(k, sums[k], oldest[k])
		if err != nil {
			return nil, nil, err
		}
		actions = append(actions, types.TransactWriteItem{Update: u})
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("eventKey"))).Build()
	if err != nil {
		return nil, nil, fmt.Errorf("build marker condition: %w", err)
	}
	expires := strconv.FormatInt(h.deps.Now().Add(h.deps.MarkerTTL).Unix(), 10)
	for _, w := range g {
		actions = append(actions, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(h.deps.Tables.CounterEvents),
			Item: map[string]types.AttributeValue{
				"eventKey":  &types.AttributeValueMemberS{Value: w.marker},
				"expiresAt": &types.AttributeValueMemberN{Value: expires},
			},
			ConditionExpression:      cond.Condition(),
			ExpressionAttributeNames: cond.Names(),
		}})
	}
	return &dynamodb.TransactWriteItemsInput{TransactItems: actions, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}, items, nil
}

func nonZero(sum map[string]int64) bool {
	for _, v := range sum {
		if v != 0 {
			return true
		}
	}
	return false
}

// notRepairedSince is the condition that no repair set the item's counters
// after the oldest record it takes was created.
func notRepairedSince(oldest int64) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(Watermark)).
		Or(expression.Name(Watermark).LessThanEqual(expression.Value(oldest)))
}

func (h *Handler) keyOf(item counterKey) (string, map[string]types.AttributeValue) {
	keyName := "userId"
	if item.table == h.deps.Tables.Products {
		keyName = "productId"
	}
	return keyName, map[string]types.AttributeValue{keyName: &types.AttributeValueMemberS{Value: item.key}}
}

// check holds records whose deltas to one item sum to zero to the item's
// watermark: taking all of them changes nothing, taking only the newer ones
// would. It writes nothing, and an item that is gone passes.
func (h *Handler) check(item counterKey, oldest int64) (*types.ConditionCheck, error) {
	expr, err := expression.NewBuilder().WithCondition(notRepairedSince(oldest)).Build()
	if err != nil {
		return nil, fmt.Errorf("build counter check of %s: %w", item, err)
	}
	_, key := h.keyOf(item)
	return &types.ConditionCheck{
		TableName:                           aws.String(item.table),
		Key:                                 key,
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// update adds the summed deltas to one counter item and 1 to its version, on
// the condition that the item exists and holds no watermark newer than the
// oldest record it takes. When the condition fails DynamoDB returns the item
// (nothing when it is gone), at no extra cost.
func (h *Handler) update(item counterKey, sum map[string]int64, oldest int64) (*types.Update, error) {
	names := make([]string, 0, len(sum))
	for k := range sum {
		names = append(names, k)
	}
	sort.Strings(names)
	update := expression.Add(expression.Name("version"), expression.Value(1))
	for _, k := range names {
		update = update.Add(expression.Name(k), expression.Value(sum[k]))
	}
	keyName, key := h.keyOf(item)
	cond := expression.AttributeExists(expression.Name(keyName)).And(notRepairedSince(oldest))
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("build counter update of %s: %w", item, err)
	}
	return &types.Update{
		TableName:                           aws.String(item.table),
		Key:                                 key,
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}
