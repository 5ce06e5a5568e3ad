// Package counting keeps the denormalized counters of users and products exact
// from the orders and reviews streams. Each record carries business facts (an
// order placed or cancelled, a review version counted in or taken out); each
// fact is applied to all its counter items at once, and exactly once however
// often Lambda delivers its record and whoever else folds it in (the audit's
// repair), in transactions that group a batch's facts so that a counter item
// is written once per group, not once per fact (see docs/counters.md).
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
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/shapes"
	"github.com/shopstream/shopstream/shared/tables"
)

type transactor interface {
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Deps are the handler's collaborators.
type Deps struct {
	DB       transactor
	Tables   tables.Names
	Logger   *slog.Logger
	Reporter *batchmetrics.Reporter
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

// work is one fact with what it adds to each counter item it touches (each
// item once), and the records of the batch that carry it.
type work struct {
	records []int
	fact    facts.Fact
	deltas  []delta
	// done: its marker and effects committed, by this call or before it.
	done bool
	// applied: committed by this call.
	applied bool
}

// Handle applies a batch and reports the records it could not apply. A fact
// the batch carries twice (the same record twice, or a review's version in
// two records) is applied once.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := time.Now()
	failed := map[int]bool{}
	byKey := map[string]*work{}
	var todo []*work
	for i, rec := range ev.Records {
		if rec.EventID == "" {
			h.deps.Logger.WarnContext(ctx, "malformed record", "sequenceNumber", rec.Change.SequenceNumber, "err", "no eventID")
			failed[i] = true
			continue
		}
		fs, err := h.factsOf(rec)
		if err != nil {
			h.deps.Logger.WarnContext(ctx, "malformed record", "eventId", rec.EventID, "err", err.Error())
			failed[i] = true
			continue
		}
		for _, f := range fs {
			if w := byKey[f.Key]; w != nil {
				w.records = append(w.records, i)
				continue
			}
			w := &work{records: []int{i}, fact: f, deltas: h.deltas(f)}
			byKey[f.Key] = w
			todo = append(todo, w)
		}
	}
	res := h.run(ctx, todo)
	for _, w := range todo {
		if !w.done {
			for _, i := range w.records {
				failed[i] = true
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
		h.deps.Reporter.Batch(ctx, ev, len(idx), time.Since(start), "counterItems", res.items, "transactions", res.transactions, "writeUnits", res.units)
	}
	return resp, nil
}

// FoldResult is what Fold did.
type FoldResult struct {
	// Applied facts were folded in by this call; the others were applied
	// before (their marker was there), or touch only items that are gone.
	Applied []string
	// Failed facts could not be written (contention that outlasted the
	// retries, or another error): they are still missing.
	Failed []string
}

// Fold applies facts the way a record's are applied: their effects and their
// markers in one conditional transaction, so that a fact already applied (by
// the processor, a replay or an earlier fold) is dropped on its marker, and a
// record of the fact that comes later is dropped on the marker this writes.
// It is how the audit repairs a missing fact (docs/counters.md).
func (h *Handler) Fold(ctx context.Context, fs []facts.Fact) FoldResult {
	byKey := map[string]*work{}
	var todo []*work
	for _, f := range fs {
		if byKey[f.Key] != nil {
			continue
		}
		w := &work{fact: f, deltas: h.deltas(f)}
		byKey[f.Key] = w
		todo = append(todo, w)
	}
	h.run(ctx, todo)
	var out FoldResult
	for _, w := range todo {
		switch {
		case w.applied:
			out.Applied = append(out.Applied, w.fact.Key)
		case !w.done:
			out.Failed = append(out.Failed, w.fact.Key)
		}
	}
	return out
}

// run groups the facts into transactions and applies them, marking each
// work done when its marker and effects are committed.
func (h *Handler) run(ctx context.Context, todo []*work) applied {
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
	res.items = len(locks)
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
				// The group's facts not done stay missing: their records fail.
				h.deps.Logger.ErrorContext(ctx, "apply counters", "facts", len(g), "items", len(items), "err", err.Error())
			}
		}()
	}
	wg.Wait()
	return res
}

// narrower reports a group of several facts whose halves each touch fewer
// counter items than the whole.
func narrower(g txGroup) bool {
	if len(g) < 2 {
		return false
	}
	n, mid := len(g.items()), len(g)/2
	return len(g[:mid].items()) < n && len(g[mid:].items()) < n
}

// txGroup is a set of facts applied in one transaction: one update per
// counter item they touch and one marker per fact.
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
	items        int // distinct counter items
	transactions int
	units        float64 // consumed write units, as DynamoDB reports them
}

// maxContended bounds the attempts of one group that only contention (another
// batch on the same item, throttling) cancels; the facts then fail and their
// records come again. A transaction holds its items for its two phases (AWS's
// TransactionConflict), so concurrent batches on one popular item take
// turns: 60 attempts with backoff up to 160 ms (about 5 s) outlast a score
// of them. The ceiling is low for fairness: with full jitter a group that has
// waited long retries less often than a newer one, and at 640 ms one batch in
// a 24-client order load (BenchmarkOrderLoad) ran out of its 30 attempts.
// An invocation stops retrying a second before its deadline.
const maxContended = 60

// splitAfter is the contended attempts after which a group of several facts
// is applied in halves, when each half touches fewer items (narrower). A batch's coalesced group can hold 30 facts on 20
// to 30 items, and in a 24-client order load such groups ran out of their
// attempts while smaller ones went through (BenchmarkOrderLoad).
const splitAfter = 3

// apply adds the group's facts to their counter items in one transaction,
// with one conditional marker per fact. A marker that already exists means
// that fact was applied before, to all its items: it is dropped and the rest
// retried at once. An item that does not exist (a deleted product) is dropped
// from the group, and its facts are applied to their other items.
func (h *Handler) apply(ctx context.Context, g txGroup) (applied, error) {
	var res applied
	missing := map[counterKey]bool{}
	contended := 0
	for len(g) > 0 {
		in, items, err := h.transaction(g, missing)
		if err != nil {
			return res, err
		}
		if gone(g, missing) {
			// Every item the facts change is gone: nothing to count, and
			// nothing a redelivery could count twice.
			for _, w := range g {
				w.done = true
			}
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
			for _, w := range g {
				w.done, w.applied = true, true
			}
			return res, nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			return res, fmt.Errorf("counters of %d facts: %w", len(g), err)
		}
		reasons := canceled.CancellationReasons
		retry, answered := false, false
		for i, k := range items {
			switch r := code(reasonAt(reasons, i)); {
			case r == "ConditionalCheckFailed":
				// The item does not exist: a deleted product, or a user
				// removed by hand. Creating it would make a phantom.
				h.deps.Logger.WarnContext(ctx, "counter item missing", "table", k.table, "key", k.key)
				missing[k] = true
				answered = true
			case retryable(r):
				retry = true
			}
		}
		var keep txGroup
		for i, w := range g {
			switch r := code(reasonAt(reasons, len(items)+i)); {
			case r == "ConditionalCheckFailed":
				// Applied before, to every item: a redelivery, or a fact
				// folded in by a repair. Drop it.
				w.done = true
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
			// Some facts were applied before or some items are gone: try
			// again at once with what is left.
		case !retry:
			return res, fmt.Errorf("counters of %d facts: %w", len(g), err)
		case contended >= maxContended || nearDeadline(ctx):
			return res, fmt.Errorf("counters of %d facts: still contended after %d attempts: %w", len(g), contended+1, err)
		case contended >= splitAfter && narrower(keep):
			// Any one of a large group's items busy elsewhere cancels it
			// whole: its halves, each on fewer items, go one after the
			// other, each with its own attempts (each fact's marker stays
			// in the transaction of its effects, so a split counts nothing
			// twice). Halves on the same items would only queue more
			// transactions on them.
			mid := len(keep) / 2
			r1, err1 := h.apply(ctx, keep[:mid])
			r2, err2 := h.apply(ctx, keep[mid:])
			res.transactions += r1.transactions + r2.transactions
			res.units += r1.units + r2.units
			return res, errors.Join(err1, err2)
		default:
			d := time.Duration(rand.Int64N(int64(10*time.Millisecond<<min(contended, 4)))) + time.Millisecond
			contended++
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("counters of %d facts: %w", len(g), ctx.Err())
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

// gone reports whether every fact of the group changes only items that are
// missing: there is nothing to count, and nothing a redelivery could count
// twice. It is decided fact by fact, never on the group's sums: two facts
// whose deltas cancel on an item that exists (a review counted in, another
// taken out, by one user) are not gone, and their markers are written with
// the item's version, or a redelivery of one of them alone would count it.
func gone(g txGroup, missing map[counterKey]bool) bool {
	for _, w := range g {
		changes := false
		for _, d := range w.deltas {
			if nonZero(d.delta) {
				if !missing[d.item] {
					return false
				}
				changes = true
			}
		}
		if !changes {
			return false
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

// transaction builds the group's transaction: first one update per counter
// item that exists as far as we know, adding the sums (none when they are
// zero) and 1 to its version; then one marker per fact, holding the fact's
// effects. It returns the items in action order.
func (h *Handler) transaction(g txGroup, missing map[counterKey]bool) (*dynamodb.TransactWriteItemsInput, []counterKey, error) {
	sums := map[counterKey]map[string]int64{}
	for _, w := range g {
		for _, d := range w.deltas {
			if missing[d.item] {
				continue
			}
			if sums[d.item] == nil {
				sums[d.item] = map[string]int64{}
			}
			for k, v := range d.delta {
				sums[d.item][k] += v
			}
		}
	}
	// Every item the facts touch is updated, its version bumped even when
	// its deltas cancel (a review replaced, by its user; with the same
	// rating, on its product too): the audit judges an item by its version
	// holding still across its reading of the markers, and a scan may read
	// one of this transaction's markers and not another (docs/counters.md).
	var items []counterKey
	for _, k := range g.items() {
		if sums[k] != nil {
			items = append(items, k)
		}
	}
	actions := make([]types.TransactWriteItem, 0, len(items)+len(g))
	for _, k := range items {
		u, err := h.update(k, sums[k])
		if err != nil {
			return nil, nil, err
		}
		actions = append(actions, types.TransactWriteItem{Update: u})
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(facts.KeyAttr))).Build()
	if err != nil {
		return nil, nil, fmt.Errorf("build marker condition: %w", err)
	}
	for _, w := range g {
		actions = append(actions, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(h.deps.Tables.CounterEvents),
			Item: map[string]types.AttributeValue{
				facts.KeyAttr:     &types.AttributeValueMemberS{Value: w.fact.Key},
				facts.EffectsAttr: facts.EncodeEffects(w.fact.Effects),
				shapes.Attr:       &types.AttributeValueMemberN{Value: strconv.Itoa(shapes.CounterMarker)},
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

func (h *Handler) keyOf(item counterKey) (string, map[string]types.AttributeValue) {
	keyName := "userId"
	if item.table == h.deps.Tables.Products {
		keyName = "productId"
	}
	return keyName, map[string]types.AttributeValue{keyName: &types.AttributeValueMemberS{Value: item.key}}
}

// update adds the summed deltas that are not zero to one counter item and 1
// to its version, on the condition that the item exists.
func (h *Handler) update(item counterKey, sum map[string]int64) (*types.Update, error) {
	names := make([]string, 0, len(sum))
	for k, v := range sum {
		if v != 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	update := expression.Add(expression.Name("version"), expression.Value(1))
	for _, k := range names {
		update = update.Add(expression.Name(k), expression.Value(sum[k]))
	}
	keyName, key := h.keyOf(item)
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(expression.AttributeExists(expression.Name(keyName))).Build()
	if err != nil {
		return nil, fmt.Errorf("build counter update of %s: %w", item, err)
	}
	return &types.Update{
		TableName:                 aws.String(item.table),
		Key:                       key,
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, nil
}
