package ddbfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/tables"
)

// Limits are the limits of AWS's DynamoDB that the front enforces and
// DynamoDB Local lacks: transaction conflicts ("Transaction conflict
// handling in DynamoDB", developer guide, transaction-apis) and the
// throughput of one partition key value ("DynamoDB throttling resolution
// guide", key range throughput exceeded). The zero value is AWS's.
type Limits struct {
	// Off passes every request on unchecked, for debugging only.
	Off bool
	// TxWindow is the time a TransactWriteItems holds its items: AWS's
	// two-phase commit holds them for its prepare and commit rounds, which
	// DynamoDB Local's one SQLite thread does not take. A transaction holds
	// its items from its arrival for TxWindow (default DefaultTxWindow), or
	// until its answer if that comes first; another request on a held item
	// conflicts. Its answer comes no sooner than TxWindow after its arrival,
	// and may wait longer for DynamoDB Local behind other requests, which
	// AWS would not make it wait: a write of its item admitted meanwhile is
	// priced by every item it may find, the item before the transaction and
	// after it (possible.go). HoldUntilAnswer holds the items until the
	// answer however late it comes, stricter than AWS and measured slower
	// (docs/decisions.md, "A transaction holds its items for AWS's window").
	// The ClientRequestToken stays in progress until the answer either way.
	TxWindow        time.Duration
	HoldUntilAnswer bool
	// PartitionWCU and PartitionRCU are the write units, or the read units,
	// one partition of a table or index serves per second, or a linear mix
	// of the two (defaults DefaultPartitionWCU and DefaultPartitionRCU).
	PartitionWCU, PartitionRCU float64
	// Partitions is how many partitions each table and each index has:
	// the partition key values that hash to one partition share its units,
	// as on AWS until DynamoDB splits a partition (default
	// DefaultPartitions).
	Partitions int
	// StaleReads is how long an item's eventually consistent reads
	// (GetItem, BatchGetItem) still see it as it was before a write: on
	// AWS such a read "may not reflect the results of a recently completed
	// write operation". 0 means DefaultStaleReads, a negative duration
	// never.
	StaleReads time.Duration
	// Now is the token buckets' clock (default time.Now); tests stop it.
	Now func() time.Time
}

// AWS's figures.
const (
	// DefaultTxWindow is the time AWS's two phases take
	// (docs/decisions.md).
	DefaultTxWindow = 20 * time.Millisecond
	// DefaultPartitionWCU and DefaultPartitionRCU are a partition's
	// ceiling, on demand as provisioned.
	DefaultPartitionWCU = 1000
	DefaultPartitionRCU = 3000
	// DefaultPartitions is the partitions of a new on-demand table: it
	// takes 4,000 write units at once, 1,000 a partition
	// (on-demand-capacity-mode, "Initial throughput").
	DefaultPartitions = 4
	// DefaultStaleReads is how long a write stays unseen by eventually
	// consistent reads of its item (docs/local-stack.md).
	DefaultStaleReads = 20 * time.Millisecond
)

func (l Limits) withDefaults() Limits {
	if l.TxWindow <= 0 {
		l.TxWindow = DefaultTxWindow
	}
	if l.PartitionWCU <= 0 {
		l.PartitionWCU = DefaultPartitionWCU
	}
	if l.PartitionRCU <= 0 {
		l.PartitionRCU = DefaultPartitionRCU
	}
	if l.Partitions <= 0 {
		l.Partitions = DefaultPartitions
	}
	if l.StaleReads == 0 {
		l.StaleReads = DefaultStaleReads
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	return l
}

// LimitStats counts what the limits refused since the front started.
type LimitStats struct {
	// Conflicts are requests refused for a transaction in progress:
	// TransactionConflictException or a cancellation naming
	// TransactionConflict.
	Conflicts int64
	// Throttles are requests refused for a partition's throughput, and
	// keys of batches refused so (each key once).
	Throttles int64
	// Unprocessed are the keys batches answered as unprocessed
	// (UnprocessedItems, UnprocessedKeys) for a partition's throughput.
	Unprocessed int64
	// Holds counts the transactions admitted that held their items;
	// HeldFor is the time they held them in all, from arrival to release
	// (TxWindow on the items the front follows, until the answer on the
	// others and with HoldUntilAnswer), and
	// LongestHold the longest. AnsweredIn is the time from their arrival
	// to their answer in all (at least TxWindow each for those passed on,
	// longer when DynamoDB Local or the queue before it is slower than
	// AWS's two phases). Both count the transactions admitted and then
	// throttled too, which release their items at once.
	Holds                int64
	HeldFor, LongestHold time.Duration
	AnsweredIn           time.Duration
	// Waits counts the writes that waited for the answers of other writes
	// of their item before they could be priced (an item the front does
	// not follow: imagecache.go, awaitPriceable), and WaitedFor is how long
	// they waited in all.
	Waits     int64
	WaitedFor time.Duration
}

// LimitStats returns the counts so far.
func (f *Front) LimitStats() LimitStats {
	if f.limits == nil {
		return LimitStats{}
	}
	f.limits.mu.Lock()
	defer f.limits.mu.Unlock()
	return f.limits.stats
}

// limiter holds the state of the limits: the items of transactions and
// writes in progress, and a token bucket per partition key value.
type limiter struct {
	cfg     Limits
	db      *dynamodb.Client
	now     func() time.Time
	schemas *schemas

	mu      sync.Mutex
	txItems map[string]int // items held by a TransactWriteItems
	// txTokens are the ClientRequestTokens of the transactions admitted
	// and not answered yet.
	txTokens map[string]int
	writes   map[string]int // items under a single-item write
	buckets  map[string]*tokenBucket
	stats    LimitStats
	// imgs, flights, tokens, untracked and epoch are the image cache's
	// (imagecache.go): untracked counts the writes in flight the limits
	// could not name, and epoch moves at each of their starts and ends.
	imgs map[string]imageEntry
	// poss are the possible states of items with writes in flight
	// (possible.go).
	poss map[string]*possible
	// marks are, by item, the sizes it may have had around recent
	// writes (sizemarks.go).
	marks       map[string][]sizeMark
	marksPruned time.Time
	// recent are the writes each item had within StaleReads (stale.go).
	recent       map[string][]staleWrite
	recentPruned time.Time
	lastWrite    time.Time // the latest write kept in recent
	flights      map[string]*flight
	tokens       map[string]time.Time
	untracked    int
	epoch        uint64
	// starts numbers the starts of writes, of all items together; started
	// is, by item, the number of its last write's start, and startedFloor
	// stands for the items started no longer holds (imagecache.go).
	starts       uint64
	started      map[string]uint64
	startedFloor uint64
}

func newLimiter(cfg Limits, db *dynamodb.Client) *limiter {
	if cfg.Off {
		return nil
	}
	cfg = cfg.withDefaults()
	return &limiter{
		cfg: cfg, db: db, now: cfg.Now, schemas: &schemas{db: db, byName: map[string]tables.Table{}},
		txItems: map[string]int{}, txTokens: map[string]int{}, writes: map[string]int{}, buckets: map[string]*tokenBucket{},
	}
}

// ref is one item a request names.
type ref struct {
	table string
	key   map[string]types.AttributeValue
	id    string
	// kind is Put, Update, Delete, ConditionCheck or Get.
	kind string
	// item is a Put's new item.
	item map[string]types.AttributeValue
	// actions are an Update's; actionsErr says why they could not be
	// read (the item after is then read once written).
	actions    []updateAction
	actionsErr error
	// absentIfApplied says a Put applies only where no item is (its
	// condition is attribute_not_exists of a key attribute, or it is a
	// PartiQL INSERT): it is priced without reading the item before.
	absentIfApplied bool
}

// admission is what the limiter let through: released once the answer is
// written, charged for reads by the answer.
type admission struct {
	l       *limiter
	start   time.Time
	op      string
	txIDs   []string
	writeID []string
	// held says some of the transaction's items are still held against
	// others; holdTimer ends that at TxWindow after start for the items
	// followed in their possible states, and freed are those (a dropped
	// chain takes one back: reholdLocked). heldUntil is when the last was
	// freed, and counted says the hold is in the stats.
	held      bool
	holdTimer *time.Timer
	freed     map[string]bool
	heldUntil time.Time
	counted   bool
	// tracks are the written items, for the image cache; committed says
	// DynamoDB Local answered the write 200; token is a transaction's
	// ClientRequestToken, replay that it committed before.
	tracks    []imageTrack
	committed bool
	token     string
	replay    bool
	// answered says DynamoDB Local's answer decided the outcome (200 or
	// a 4xx refusal); untracked that the request writes what the limits
	// could not name.
	answered  bool
	untracked bool
	// ifRefused are the Puts priced as applying where no item is: when
	// their condition fails, AWS charges the item they found.
	ifRefused []settlement
	reads     []readCharge
	// settle are the writes whose item after was not known before the
	// write: charged the rest once DynamoDB Local has answered.
	settle []settlement
	// body is a Query's, Scan's or BatchGetItem's request, read again
	// without its filter or projection to charge what it read.
	body []byte
	// get is a projected GetItem's item, charged whole.
	get *ref
	// stmt is an ExecuteStatement SELECT, charged as the read it is.
	stmt *statement
	cons capacity.Consistency
	// rewrite is a batch cut down to what its partitions admit.
	rewrite *rewrite
	// provisional is what a BatchGetItem took from each partition as it
	// was admitted, deducted from its charge.
	provisional map[bucketKey]float64
	// batchReads are a BatchExecuteStatement's SELECTs.
	batchReads []batchRead
	// txGets are a read transaction's items.
	txGets []ref
}

// settlement is a write charged on its item before alone, to be charged
// what its item after adds: befores are the items it may have found (one,
// unless written beside unanswered writes of its item).
type settlement struct {
	ref           ref
	befores       []map[string]types.AttributeValue
	charged       []charge
	transactional bool
}

// readCharge is one item (or a Query's partition) an admitted read is
// charged for by its answer.
type readCharge struct {
	bucket bucketKey
	c      capacity.Consistency
	table  string
}

// admit checks a request against the limits. A refused request gets the
// body of its error; an admitted one an admission to release.
func (l *limiter) admit(ctx context.Context, op string, body []byte) (*admission, *refusal) {
	if l == nil {
		return nil, nil
	}
	start := time.Now()
	adm, refused := l.admitOp(ctx, op, body)
	if adm != nil && adm.start.IsZero() {
		adm.start = start
	}
	return adm, refused
}

func (l *limiter) admitOp(ctx context.Context, op string, body []byte) (*admission, *refusal) {
	switch op {
	case "TransactWriteItems":
		return l.admitTransactWrite(ctx, body)
	case "PutItem", "UpdateItem", "DeleteItem":
		return l.admitWrite(ctx, op, body)
	case "BatchWriteItem":
		return l.admitBatchWrite(ctx, body)
	case "BatchGetItem":
		return l.admitBatchGet(ctx, body)
	case "TransactGetItems", "GetItem", "Query":
		return l.admitRead(ctx, op, body)
	case "Scan":
		var req struct{ ConsistentRead bool }
		if json.Unmarshal(body, &req) != nil {
			return nil, nil
		}
		return &admission{l: l, op: op, body: body, cons: consistencyOf(req.ConsistentRead)}, nil
	case "ExecuteStatement":
		return l.admitStatement(ctx, body)
	case "ExecuteTransaction":
		return l.admitExecuteTransaction(ctx, body)
	case "BatchExecuteStatement":
		return l.admitBatchStatements(ctx, body)
	}
	return nil, nil
}

// refusal is an error answer.
type refusal struct {
	status int
	body   map[string]any
}

const (
	reasonNone      = "None"
	reasonConflict  = "TransactionConflict"
	reasonThrottled = "ThrottlingError"
)

func cancellationOf(codes []string) *refusal {
	reasons := make([]map[string]string, len(codes))
	for i, c := range codes {
		switch c {
		case reasonConflict:
			reasons[i] = map[string]string{"Code": c, "Message": "Transaction is ongoing for the item"}
		case reasonThrottled:
			reasons[i] = map[string]string{"Code": c, "Message": "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html."}
		default:
			reasons[i] = map[string]string{"Code": reasonNone}
		}
	}
	return &refusal{status: 400, body: map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	}}
}

// inProgressRefusal answers a transaction whose ClientRequestToken is that
// of one still in progress (TransactWriteItems, API reference, errors).
var inProgressRefusal = &refusal{status: 400, body: map[string]any{
	"__type":  "com.amazonaws.dynamodb.v20120810#TransactionInProgressException",
	"message": "The transaction with the given request token is already in progress.",
}}

var conflictRefusal = &refusal{status: 400, body: map[string]any{
	"__type":  "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
	"message": "Transaction is ongoing for the item",
}}

// throttled is the error of a request over a partition's throughput (a
// ProvisionedThroughputExceededException) or its table's or index's maximum
// (a ThrottlingException), whose ThrottlingReasons name the limit and the
// table or index.
func throttled(b bucketKey) *refusal {
	kind, resource := "Table", tableARN(b.table)
	if b.index != "" {
		kind, resource = "Index", resource+"/index/"+b.index
	}
	rw := "Read"
	if b.write {
		rw = "Write"
	}
	code, limit, message := "ProvisionedThroughputExceededException", "KeyRangeThroughputExceeded", "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html."
	if b.pk == tableLevelPK {
		// The table's or index's own maximum ("On-demand maximum
		// throughput exceeded", DynamoDB's throttling guide), the
		// ThrottlingException of the data-plane operations' errors.
		code, limit, message = "ThrottlingException", "MaxOnDemandThroughputExceeded", "Throughput exceeds the maximum OnDemandThroughput configured on table or index"
	}
	// The two exceptions spell their reasons' member differently, as the
	// service's model does.
	reasonsMember := "ThrottlingReasons"
	if code == "ThrottlingException" {
		reasonsMember = "throttlingReasons"
	}
	return &refusal{status: 400, body: map[string]any{
		"__type":  "com.amazonaws.dynamodb.v20120810#" + code,
		"message": message,
		reasonsMember: []map[string]string{{
			"reason": kind + rw + limit, "resource": resource,
		}},
	}}
}

func tableARN(table string) string {
	return "arn:aws:dynamodb:us-east-1:000000000000:table/" + table
}

func (l *limiter) admitTransactWrite(ctx context.Context, body []byte) (*admission, *refusal) {
	var req struct {
		TransactItems      []map[string]rawAction
		ClientRequestToken string
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, nil // DynamoDB Local answers the malformed request
	}
	refs := make([]ref, 0, len(req.TransactItems))
	for _, ti := range req.TransactItems {
		for kind, a := range ti {
			r, err := l.refOf(ctx, kind, a)
			if err != nil {
				return nil, nil
			}
			refs = append(refs, r)
		}
	}
	if len(refs) != len(req.TransactItems) {
		return nil, nil
	}
	return l.admitTransactRefs(ctx, "TransactWriteItems", refs, req.ClientRequestToken)
}

// admitTransactRefs checks a write transaction: cancelled when another
// transaction holds one of its items, or when a partition it writes cannot
// pay twice the write.
func (l *limiter) admitTransactRefs(ctx context.Context, op string, refs []ref, token string) (*admission, *refusal) {
	if len(refs) == 0 {
		return nil, nil // DynamoDB Local refuses an empty transaction
	}
	seen := make(map[string]bool, len(refs))
	for _, r := range refs {
		if seen[r.id] {
			// Two actions on one item: DynamoDB (and DynamoDB Local)
			// refuses the transaction, which writes nothing.
			return nil, nil
		}
		seen[r.id] = true
	}
	l.mu.Lock()
	if token != "" && l.txTokens[token] > 0 {
		// The same transaction again (its client gave up waiting for
		// the first attempt, which is still unanswered): AWS refuses it,
		// and the SDK retries it as a throttle; once the first answered,
		// the token replays its outcome.
		l.mu.Unlock()
		return nil, inProgressRefusal
	}
	codes := make([]string, len(refs))
	conflicted := false
	for i, r := range refs {
		codes[i] = reasonNone
		if l.txItems[r.id] > 0 {
			codes[i], conflicted = reasonConflict, true
		}
	}
	if conflicted {
		l.stats.Conflicts++
		l.mu.Unlock()
		return nil, cancellationOf(codes)
	}
	adm := &admission{l: l, op: op, start: time.Now(), token: token, replay: l.replayed(token, time.Now()), held: true}
	for _, r := range refs {
		l.txItems[r.id]++
		adm.txIDs = append(adm.txIDs, r.id)
	}
	if token != "" {
		l.txTokens[token]++
	}
	if !l.cfg.HoldUntilAnswer {
		adm.holdTimer = time.AfterFunc(l.cfg.TxWindow, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			adm.unholdFollowedLocked(time.Now())
		})
	}
	l.mu.Unlock()

	charges, settle, err := l.writeCharges(urgent(ctx), adm, refs, true)
	if full := (*chainFull)(nil); errors.As(err, &full) {
		adm.releaseNow()
		l.mu.Lock()
		l.stats.Conflicts++
		l.mu.Unlock()
		codes[full.pos] = reasonConflict
		return nil, cancellationOf(codes)
	}
	if err != nil {
		// Passed on unpriced, and untracked: no image or state of its
		// items may outlive it.
		adm.untracked = true
		return adm, nil
	}
	adm.settle = settle
	if i, _, ok := l.take(charges); !ok {
		adm.releaseNow()
		codes[i] = reasonThrottled
		return nil, cancellationOf(codes)
	}
	return adm, nil
}

func (l *limiter) admitWrite(ctx context.Context, op string, body []byte) (*admission, *refusal) {
	var a rawAction
	if json.Unmarshal(body, &a) != nil {
		return nil, nil
	}
	r, err := l.refOf(ctx, strings.TrimSuffix(op, "Item"), a)
	if err != nil {
		return nil, nil
	}
	return l.admitWriteRef(ctx, op, r)
}

// admitWriteRef checks a single-item write: refused while a transaction
// holds its item, or when a partition it writes cannot pay.
func (l *limiter) admitWriteRef(ctx context.Context, op string, r ref) (*admission, *refusal) {
	l.mu.Lock()
	if l.txItems[r.id] > 0 {
		l.stats.Conflicts++
		l.mu.Unlock()
		return nil, conflictRefusal
	}
	l.writes[r.id]++
	l.mu.Unlock()
	adm := &admission{l: l, op: op, writeID: []string{r.id}}
	charges, settle, err := l.writeCharges(ctx, adm, []ref{r}, false)
	if full := (*chainFull)(nil); errors.As(err, &full) {
		adm.releaseNow()
		l.mu.Lock()
		l.stats.Conflicts++
		l.mu.Unlock()
		return nil, conflictRefusal
	}
	if err != nil {
		adm.untracked = true
		return adm, nil
	}
	adm.settle = settle
	if _, b, ok := l.take(charges); !ok {
		adm.releaseNow()
		return nil, throttled(b)
	}
	return adm, nil
}

// admitStatement checks an ExecuteStatement as the operation it stands for:
// a SELECT as a read (charged once read), an INSERT, UPDATE or DELETE as a
// single-item write of its item.
func (l *limiter) admitStatement(ctx context.Context, body []byte) (*admission, *refusal) {
	var req struct {
		Statement      string
		Parameters     []events.DynamoDBAttributeValue
		ConsistentRead bool
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, nil
	}
	st, err := l.statementOf(req.Statement, req.Parameters)
	if err != nil {
		return nil, nil // DynamoDB Local answers what the front cannot read
	}
	if st.kind == "SELECT" {
		if _, err := l.schemas.get(ctx, st.table); err != nil {
			return nil, nil
		}
		return &admission{l: l, op: "ExecuteStatement", stmt: st, cons: consistencyOf(req.ConsistentRead)}, nil
	}
	r, err := l.refOfStatement(ctx, st)
	if err != nil {
		return nil, nil
	}
	return l.admitWriteRef(ctx, "ExecuteStatement", r)
}

// statementOf reads a PartiQL statement with its wire parameters.
func (l *limiter) statementOf(stmt string, raw []events.DynamoDBAttributeValue) (*statement, error) {
	params := make([]types.AttributeValue, len(raw))
	for i, p := range raw {
		v, err := ddbstream.Value(p)
		if err != nil {
			return nil, err
		}
		params[i] = v
	}
	return parseStatement(stmt, params)
}

// release ends the admission once its answer is written.
func (a *admission) release() {
	if a == nil {
		return
	}
	if !a.answered && len(a.tracks) > 0 {
		// Gone upstream with no answer that decides it (DynamoDB Local
		// failed or did not answer, the commit is not known): the
		// write may still land, so its items stay in flight a while.
		l := a.l
		l.mu.Lock()
		tracks := a.tracks
		a.tracks = nil
		l.unfollow(tracks)
		for i := range tracks {
			if fl := l.flights[tracks[i].id]; fl != nil {
				tracks[i].undecided = true
				fl.undecided++
				fl.wake()
			}
		}
		if len(a.txIDs) > 0 {
			l.committedToken(a.token, time.Now())
		}
		l.mu.Unlock()
		time.AfterFunc(undecidedFor, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.endWrites(tracks, false, time.Now())
		})
	}
	a.releaseNow()
}

// hold keeps a transaction's answer until TxWindow after its arrival: it
// holds its items that long, as AWS's two phases do, and its client learns
// the outcome only then.
func (a *admission) hold(ctx context.Context) {
	if a == nil || len(a.txIDs) == 0 {
		return
	}
	t := time.NewTimer(time.Until(a.start.Add(a.l.cfg.TxWindow)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// holds says whether a is a transaction's that holds its items.
func (a *admission) holds() bool { return a != nil && len(a.txIDs) > 0 }

func (a *admission) releaseNow() {
	l := a.l
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.endWrites(a.tracks, a.committed, now)
	if a.committed && len(a.txIDs) > 0 {
		l.committedToken(a.token, now)
	}
	if len(a.txIDs) > 0 {
		l.stats.AnsweredIn += now.Sub(a.start)
	}
	a.tracks = nil
	if a.holdTimer != nil {
		a.holdTimer.Stop()
	}
	a.unholdLocked(now)
	if n, ok := l.txTokens[a.token]; ok && len(a.txIDs) > 0 {
		if n <= 1 {
			delete(l.txTokens, a.token)
		} else {
			l.txTokens[a.token] = n - 1
		}
	}
	for _, id := range a.writeID {
		if l.writes[id]--; l.writes[id] <= 0 {
			delete(l.writes, id)
		}
	}
	a.txIDs, a.writeID = nil, nil
}

// unholdFollowedLocked ends, at TxWindow after the transaction's arrival,
// its hold of the items its writes are followed in (possible.go): a write of
// one admitted before its answer is priced by every item it may find. An
// item not followed stays held until the answer. l.mu is held.
func (a *admission) unholdFollowedLocked(now time.Time) {
	if !a.held {
		return
	}
	l := a.l
	if a.freed == nil {
		a.freed = map[string]bool{}
	}
	all := true
	for i, id := range a.txIDs {
		if a.freed[id] {
			continue
		}
		if !a.followedLocked(i) {
			all = false
			continue
		}
		a.freed[id] = true
		if l.txItems[id]--; l.txItems[id] <= 0 {
			delete(l.txItems, id)
		}
	}
	if all {
		a.held, a.heldUntil = false, now
	}
}

// reholdLocked holds item id again until the answer: its possible states
// are no longer followed. l.mu is held.
func (a *admission) reholdLocked(id string) {
	if !a.freed[id] || len(a.txIDs) == 0 {
		return
	}
	a.freed[id] = false
	a.l.txItems[id]++
	a.held = true
}

// unholdLocked ends a transaction's hold of its items at its answer (those
// freed at the window are free already), and counts how long it held them.
// l.mu is held.
func (a *admission) unholdLocked(now time.Time) {
	l := a.l
	if a.held {
		a.held, a.heldUntil = false, now
		for _, id := range a.txIDs {
			if a.freed[id] {
				continue
			}
			if l.txItems[id]--; l.txItems[id] <= 0 {
				delete(l.txItems, id)
			}
		}
	}
	if a.counted || a.heldUntil.IsZero() {
		return
	}
	a.counted = true
	held := a.heldUntil.Sub(a.start)
	l.stats.Holds++
	l.stats.HeldFor += held
	l.stats.LongestHold = max(l.stats.LongestHold, held)
}

// rawAction is one item action as the wire spells it, in a transaction or
// alone.
type rawAction struct {
	TableName                 string
	Key                       map[string]events.DynamoDBAttributeValue
	Item                      map[string]events.DynamoDBAttributeValue
	UpdateExpression          string
	ConditionExpression       string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]events.DynamoDBAttributeValue
}

// refOf names the item of an action of the given kind.
func (l *limiter) refOf(ctx context.Context, kind string, a rawAction) (ref, error) {
	t, err := l.schemas.get(ctx, a.TableName)
	if err != nil {
		return ref{}, err
	}
	r := ref{table: a.TableName, kind: kind}
	src := a.Key
	if kind == "Put" {
		src = a.Item
		item, err := ddbstream.Image(a.Item)
		if err != nil {
			return ref{}, err
		}
		r.item = item
		r.absentIfApplied = notExistsOfKey(t, a.ConditionExpression, a.ExpressionAttributeNames)
	}
	img, err := ddbstream.Image(src)
	if err != nil {
		return ref{}, err
	}
	if r.key, r.id, err = itemKey(t, a.TableName, img, "key"); err != nil {
		return ref{}, err
	}
	if kind == "Update" {
		values, err := ddbstream.Image(a.ExpressionAttributeValues)
		if err == nil {
			r.actions, err = parseUpdate(a.UpdateExpression, a.ExpressionAttributeNames, values)
		}
		r.actionsErr = err
	}
	return r, nil
}

// itemKey is the key of table t's item in img, and its id in the limiter
// (table, partition key value and sort key value); what names the key is
// for the error.
func itemKey(t tables.Table, table string, img map[string]types.AttributeValue, what string) (map[string]types.AttributeValue, string, error) {
	key := map[string]types.AttributeValue{}
	for _, k := range []*tables.Key{&t.PartitionKey, t.SortKey} {
		if k == nil {
			continue
		}
		v, ok := img[k.Name]
		if !ok {
			return nil, "", fmt.Errorf("no %s in the %s", k.Name, what)
		}
		key[k.Name] = v
	}
	id := table + "\x00" + valueText(key[t.PartitionKey.Name])
	if t.SortKey != nil {
		id += "\x00" + valueText(key[t.SortKey.Name])
	}
	return key, id, nil
}

// refOfStatement names the item a PartiQL INSERT, UPDATE or DELETE
// writes: an INSERT's item's key, the others' key equalities.
func (l *limiter) refOfStatement(ctx context.Context, st *statement) (ref, error) {
	t, err := l.schemas.get(ctx, st.table)
	if err != nil {
		return ref{}, err
	}
	r := ref{table: st.table}
	src := st.equal
	switch st.kind {
	case "INSERT":
		// An INSERT of an existing key fails ("PartiQL insert statements
		// for DynamoDB").
		r.kind, r.item, src, r.absentIfApplied = "Put", st.item, st.item, true
	case "UPDATE":
		r.kind, r.actions, r.actionsErr = "Update", st.actions, st.actionsErr
	case "DELETE":
		r.kind = "Delete"
	default:
		return ref{}, fmt.Errorf("%s names no item to write", st.kind)
	}
	if r.key, r.id, err = itemKey(t, st.table, src, "statement's key"); err != nil {
		return ref{}, err
	}
	return r, nil
}

// valueText is a key value as text that tells types apart.
func valueText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		return "N:" + canonicalNumber(v.Value)
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B:%x", v.Value)
	}
	return fmt.Sprintf("%T", v)
}

// canonicalNumber spells a DynamoDB number one way whatever the client
// wrote ("1.0", "1e0" and "1" are one key value, as DynamoDB prints them
// "1"); a text that is not a number is kept as it is.
func canonicalNumber(n string) string {
	var r big.Rat
	if _, ok := r.SetString(n); !ok {
		return n
	}
	return r.RatString()
}

// charge is one partition's part of a request.
type charge struct {
	pos    int
	bucket bucketKey
	units  float64
}

// bucketKey names one partition key value's token bucket: a table's or an
// index's, for reads or writes.
type bucketKey struct {
	table, index string
	pk           string
	write        bool
}

// tableLevelPK is the pk of a table's or index's own bucket, which every
// partition of it also pays into when it has a maximum on-demand throughput.
// No partition key value is this (a value's text never starts with NUL).
const tableLevelPK = "\x00table"

// tableLevel is the bucket of b's table or index as a whole.
func (b bucketKey) tableLevel() bucketKey {
	return bucketKey{table: b.table, index: b.index, pk: tableLevelPK, write: b.write}
}

// writeCharges prices the writes of refs by AWS's rules: the larger of the
// item before (read from DynamoDB Local) and after (a Put's item, an
// Update's expression applied to the item before), doubled in a
// transaction, charged to the item's partition; each index the write
// changes takes its entry's writes, a global index's in the index's
// partitions (the old key's for the entry deleted, the new key's for the
// entry put), a local index's in the item's own. An Update whose item after
// cannot be computed is charged on its item before and settled once written
// (settle).
func (l *limiter) writeCharges(ctx context.Context, adm *admission, refs []ref, transactional bool) ([]charge, []settlement, error) {
	tabs := make([]tables.Table, len(refs))
	for i, r := range refs {
		t, err := l.schemas.get(ctx, r.table)
		if err != nil {
			return nil, nil, err
		}
		tabs[i] = t
	}
	l.mu.Lock()
	if waited := l.awaitPriceable(refs); waited > 0 {
		l.stats.Waits++
		l.stats.WaitedFor += waited
	}
	started := l.startWrites(refs, time.Now(), followingFor(adm, tabs, transactional))
	adm.tracks = started.tracks
	if adm.holdTimer != nil && started.refused < 0 && time.Since(adm.start) >= l.cfg.TxWindow {
		// The window passed while the transaction waited to be priced:
		// its timer found no write followed yet, so the items now
		// followed are freed here.
		adm.unholdFollowedLocked(time.Now())
	}
	l.mu.Unlock()
	if started.refused >= 0 {
		return nil, nil, &chainFull{pos: started.refused}
	}
	for _, d := range started.debts {
		l.charge(d.bucket, d.units)
	}
	have := make(map[string]imageEntry, len(started.priors))
	for id, ps := range started.priors {
		if !started.reread[id] {
			have[id] = imageEntry{item: ps[0]}
		}
	}
	// The write goes on when its client leaves (front.go), so its price
	// does too.
	read, err := l.imagesOf(context.WithoutCancel(ctx), refs, have)
	if err != nil {
		return nil, nil, err
	}
	var out []charge
	var settle []settlement
	for i, r := range refs {
		tr := &adm.tracks[i]
		tr.write = r.kind != "ConditionCheck" && !adm.replay
		if tr.w != nil {
			// Followed: priced as it joined its item's states.
			tr.size = largestAround(r, started.priors[r.id])
			if r.kind == "Put" && r.absentIfApplied {
				adm.ifRefused = append(adm.ifRefused, settlement{ref: r, charged: tr.priced, transactional: transactional})
			}
			out = append(out, tr.priced...)
			continue
		}
		olds, ok := started.priors[r.id]
		switch {
		case !ok:
			olds = []map[string]types.AttributeValue{read[r.id]}
			tr.before = read[r.id]
		case started.reread[r.id]:
			olds = append(olds, read[r.id])
		}
		// The most any item the write may find costs, partition by
		// partition (possible.go).
		most := map[bucketKey]float64{}
		var order []bucketKey
		var after map[string]types.AttributeValue
		known := true
		for _, o := range olds {
			a, ok := afterOf(r, o)
			if !ok {
				a, known = o, false
			}
			after = a
			for _, c := range chargesOf(tabs[i], i, r, o, a, transactional) {
				if u, seen := most[c.bucket]; !seen {
					order = append(order, c.bucket)
					most[c.bucket] = c.units
				} else if c.units > u {
					most[c.bucket] = c.units
				}
			}
		}
		cs := make([]charge, len(order))
		for j, b := range order {
			cs[j] = charge{pos: i, bucket: b, units: most[b]}
		}
		tr.size = largestAround(r, olds)
		tr.after, tr.known = after, known && !adm.replay && len(olds) == 1
		if r.kind == "Put" && r.absentIfApplied {
			adm.ifRefused = append(adm.ifRefused, settlement{ref: r, charged: cs, transactional: transactional})
		}
		if !known {
			settle = append(settle, settlement{ref: r, befores: olds, charged: cs, transactional: transactional})
		}
		out = append(out, cs...)
	}
	l.mu.Lock()
	now := time.Now()
	for _, tr := range adm.tracks {
		l.markSize(tr.id, tr.size, now)
	}
	l.mu.Unlock()
	return out, settle, nil
}

// largestAround is the largest size the item of a write of r may have
// around it: each item it may find, and what it makes of each (sizemarks.go).
func largestAround(r ref, olds []map[string]types.AttributeValue) int {
	largest := 0
	for _, o := range olds {
		largest = max(largest, capacity.ItemSize(o))
		if a, ok := afterOf(r, o); ok {
			largest = max(largest, capacity.ItemSize(a))
		}
	}
	return largest
}

// followingFor says how the writes of adm meet their items' possible states
// (possible.go). Not followed after joining them: a batch's items, which
// succeed or stay unprocessed one by one; a BatchExecuteStatement's
// statements, which may fail inside a 200 the front does not read; a
// transaction sent again with its token, applied or not as its first
// attempt was, which the front may not know. Only a batch's items are
// never refused: a BatchWriteItem answers no conflict.
func followingFor(adm *admission, tabs []tables.Table, transactional bool) following {
	f := following{tables: tabs, transactional: transactional, refusable: adm.op != "BatchWriteItem",
		follow: adm.op != "BatchWriteItem" && adm.op != "BatchExecuteStatement" && !adm.replay}
	if transactional {
		f.adm = adm
	}
	return f
}

// chainFull is writeCharges' error for a write that cannot join its item's
// possible states while a transaction freed at its window is among them:
// refused as a conflict, at refs[pos].
type chainFull struct{ pos int }

func (e *chainFull) Error() string { return "the item's possible states cannot take this write" }

// chargesOf prices one write that turns old into after.
func chargesOf(t tables.Table, pos int, r ref, old, after map[string]types.AttributeValue, transactional bool) []charge {
	pk := valueText(r.key[t.PartitionKey.Name])
	table := charge{pos: pos, bucket: bucketKey{table: r.table, pk: pk, write: true}}
	if r.kind == "ConditionCheck" {
		table.units = capacity.CheckUnits(old)
		return []charge{table}
	}
	table.units = capacity.WriteUnits(max(capacity.ItemSize(old), capacity.ItemSize(after)), transactional)
	for _, ix := range t.LocalIndexes {
		table.units += capacity.IndexWriteUnits(t, ix, old, after)
	}
	out := []charge{table}
	for _, ix := range t.GlobalIndexes {
		u := capacity.IndexWriteUnits(t, ix, old, after)
		if u == 0 {
			continue
		}
		was, is := capacity.IndexEntry(t, ix, old), capacity.IndexEntry(t, ix, after)
		at := func(entry map[string]types.AttributeValue, units float64) charge {
			return charge{pos: pos, bucket: bucketKey{table: r.table, index: ix.Name, pk: valueText(entry[ix.PartitionKey.Name]), write: true}, units: units}
		}
		if was != nil && is != nil && valueText(was[ix.PartitionKey.Name]) != valueText(is[ix.PartitionKey.Name]) {
			// A delete in the old key's partition, a put in the new one's.
			out = append(out, at(was, capacity.WriteUnits(capacity.ItemSize(was), false)), at(is, capacity.WriteUnits(capacity.ItemSize(is), false)))
			continue
		}
		entry := was
		if entry == nil {
			entry = is
		}
		out = append(out, at(entry, u))
	}
	return out
}

// settleWrites charges the writes whose item after was not known what
// their items, read now, add to what they were charged.
func (a *admission) settleWrites(ctx context.Context) {
	if a == nil {
		return
	}
	a.l.settleNow(ctx, a.settle, true, func(s settlement, now map[string]types.AttributeValue) (befores []map[string]types.AttributeValue, after map[string]types.AttributeValue, ok bool) {
		return s.befores, now, true
	})
	a.settle = nil
}

// settleRefused charges the Puts priced as applying where no item is, now
// that the write was refused, what AWS charges a failed condition: the
// item it found ("the size of the existing item (or a minimum of 1)",
// "Conditional writes", developer guide), where that is more than they paid.
func (a *admission) settleRefused(ctx context.Context) {
	a.l.settleNow(ctx, a.ifRefused, false, func(_ settlement, now map[string]types.AttributeValue) (befores []map[string]types.AttributeValue, after map[string]types.AttributeValue, ok bool) {
		return []map[string]types.AttributeValue{now}, now, now != nil
	})
	a.ifRefused = nil
}

// settleNow reads the items of ss as they are now and charges each
// settlement what pricing it by priced's items (the items it may have found
// before, the most any of them costs, and the item after, from the item now;
// ok false: nothing owed) adds to what it was charged; less than was charged
// is given back only when refund.
func (l *limiter) settleNow(ctx context.Context, ss []settlement, refund bool, priced func(s settlement, now map[string]types.AttributeValue) (befores []map[string]types.AttributeValue, after map[string]types.AttributeValue, ok bool)) {
	if len(ss) == 0 {
		return
	}
	refs := make([]ref, len(ss))
	for i, s := range ss {
		refs[i] = s.ref
		refs[i].kind = "Get"
	}
	now, err := l.images(ctx, refs)
	if err != nil {
		return
	}
	for _, s := range ss {
		befores, after, ok := priced(s, now[s.ref.id])
		if !ok {
			continue
		}
		if refund {
			// A write priced after its answer: the item it made.
			l.mu.Lock()
			l.markSize(s.ref.id, capacity.ItemSize(after), time.Now())
			l.mu.Unlock()
		}
		t, err := l.schemas.get(ctx, s.ref.table)
		if err != nil {
			continue
		}
		paid := map[bucketKey]float64{}
		for _, c := range s.charged {
			paid[c.bucket] += c.units
		}
		owed := map[bucketKey]float64{}
		for _, before := range befores {
			one := map[bucketKey]float64{}
			for _, c := range chargesOf(t, 0, s.ref, before, after, s.transactional) {
				one[c.bucket] += c.units
			}
			for b, u := range one {
				owed[b] = max(owed[b], u)
			}
		}
		for b, u := range owed {
			if d := u - paid[b]; d > 0 || refund {
				l.charge(b, d)
			}
		}
	}
}

// notExistsOfKey says whether cond is attribute_not_exists of one of t's
// key attributes, which holds only where no item is.
func notExistsOfKey(t tables.Table, cond string, names map[string]string) bool {
	c := strings.Join(strings.Fields(cond), "")
	inner, ok := strings.CutPrefix(c, "attribute_not_exists(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return false
	}
	name := strings.TrimSuffix(inner, ")")
	if strings.HasPrefix(name, "#") {
		if name, ok = names[name]; !ok {
			return false
		}
	}
	return name == t.PartitionKey.Name || (t.SortKey != nil && name == t.SortKey.Name)
}

// images reads the items refs name as they are now, except those of Puts
// that apply only where no item is; the image cache gives those it holds
// (cachedImages).
func (l *limiter) images(ctx context.Context, refs []ref) (map[string]map[string]types.AttributeValue, error) {
	now := time.Now()
	mark := l.markRead(refs)
	have := l.cachedImages(refs, now)
	out, err := l.imagesOf(ctx, refs, have)
	if err == nil {
		l.keepRead(mark, refs, have, out, now)
	}
	return out, err
}

// imagesOf is images with the items the image cache holds taken from have.
func (l *limiter) imagesOf(ctx context.Context, refs []ref, have map[string]imageEntry) (map[string]map[string]types.AttributeValue, error) {
	out := map[string]map[string]types.AttributeValue{}
	req := map[string]types.KeysAndAttributes{}
	seen := map[string]bool{}
	for _, r := range refs {
		if e, ok := have[r.id]; ok {
			if e.item != nil {
				out[r.id] = e.item
			}
			continue
		}
		if (r.kind == "Put" && r.absentIfApplied) || seen[r.id] {
			continue
		}
		seen[r.id] = true
		ka := req[r.table]
		ka.Keys = append(ka.Keys, r.key)
		ka.ConsistentRead = aws.Bool(true)
		req[r.table] = ka
	}
	for len(req) > 0 {
		res, err := l.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("read items before a write: %w", err)
		}
		for table, items := range res.Responses {
			t, err := l.schemas.get(ctx, table)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				id := table + "\x00" + valueText(it[t.PartitionKey.Name])
				if t.SortKey != nil {
					id += "\x00" + valueText(it[t.SortKey.Name])
				}
				out[id] = it
			}
		}
		req = res.UnprocessedKeys
	}
	return out, nil
}

// schemas caches the tables' key schemas and indexes, as DescribeTable
// gives them.
type schemas struct {
	db     *dynamodb.Client
	mu     sync.Mutex
	byName map[string]tables.Table
	// caps are the on-demand maximums (OnDemandThroughput) of the tables
	// and global indexes described, by tableLevel bucket name.
	caps map[string]float64
}

// capOf is the maximum on-demand throughput of b's table or index in b's
// direction, as last described; 0 for none.
func (s *schemas) capOf(b bucketKey) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps[bucketName(b.tableLevel())]
}

// setCaps records a table's or index's OnDemandThroughput.
func (s *schemas) setCaps(table, index string, odt *types.OnDemandThroughput) {
	for _, write := range []bool{false, true} {
		name := bucketName(bucketKey{table: table, index: index, pk: tableLevelPK, write: write})
		var n int64
		if odt != nil {
			if write {
				n = aws.ToInt64(odt.MaxWriteRequestUnits)
			} else {
				n = aws.ToInt64(odt.MaxReadRequestUnits)
			}
		}
		if n > 0 {
			s.caps[name] = float64(n)
		} else {
			delete(s.caps, name)
		}
	}
}

func (s *schemas) get(ctx context.Context, name string) (tables.Table, error) {
	s.mu.Lock()
	t, ok := s.byName[name]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return tables.Table{}, fmt.Errorf("describe %s: %w", name, err)
	}
	d := out.Table
	t = tables.Table{Name: name}
	t.PartitionKey, t.SortKey = keysOf(d.KeySchema)
	s.mu.Lock()
	if s.caps == nil {
		s.caps = map[string]float64{}
	}
	s.setCaps(name, "", d.OnDemandThroughput)
	for _, g := range d.GlobalSecondaryIndexes {
		s.setCaps(name, aws.ToString(g.IndexName), g.OnDemandThroughput)
	}
	s.mu.Unlock()
	for _, g := range d.GlobalSecondaryIndexes {
		pk, sk := keysOf(g.KeySchema)
		t.GlobalIndexes = append(t.GlobalIndexes, tables.Index{Name: aws.ToString(g.IndexName), PartitionKey: pk, SortKey: sk, Projection: projectionOf(g.Projection)})
	}
	for _, li := range d.LocalSecondaryIndexes {
		pk, sk := keysOf(li.KeySchema)
		t.LocalIndexes = append(t.LocalIndexes, tables.Index{Name: aws.ToString(li.IndexName), PartitionKey: pk, SortKey: sk, Projection: projectionOf(li.Projection)})
	}
	s.mu.Lock()
	s.byName[name] = t
	s.mu.Unlock()
	return t, nil
}

func (s *schemas) forget(name string) {
	s.mu.Lock()
	delete(s.byName, name)
	s.mu.Unlock()
}

func keysOf(ks []types.KeySchemaElement) (pk tables.Key, sk *tables.Key) {
	for _, k := range ks {
		key := tables.Key{Name: aws.ToString(k.AttributeName)}
		if k.KeyType == types.KeyTypeHash {
			pk = key
		} else {
			sk = &key
		}
	}
	return pk, sk
}

func projectionOf(p *types.Projection) tables.Projection {
	if p == nil {
		return tables.Projection{Type: tables.ProjectAll}
	}
	return tables.Projection{Type: string(p.ProjectionType), NonKey: p.NonKeyAttributes}
}
