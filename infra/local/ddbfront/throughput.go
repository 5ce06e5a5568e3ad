package ddbfront

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/infra/local/keyhash"
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/tables"
)

// tokenBucket is one partition key value's throughput: it holds at most
// one second of units (no burst beyond it) and refills at the rate.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

// take charges every charge to its bucket, or none: the first charge whose
// bucket cannot pay is refused (its position and bucket returned). A bucket
// pays when it holds the units, or is full (a request larger than one
// second of units runs the bucket into debt rather than never passing).
func (l *limiter) take(charges []charge) (pos int, refused bucketKey, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	// Each charge's payers once: a maximum removed meanwhile must not
	// leave a bucket in need that was never refilled.
	payers := make([][]bucketKey, len(charges))
	need := map[string]float64{} // by bucket: a partition's reads and writes share one
	keys := map[string]bucketKey{}
	for i, c := range charges {
		payers[i] = l.payers(c.bucket)
		for _, k := range payers[i] {
			n := l.bucketName(k)
			need[n] += l.cost(k, c.units)
			keys[n] = k
		}
	}
	for i, c := range charges {
		for _, k := range payers[i] {
			b := l.refill(k, now)
			if b.tokens < need[l.bucketName(k)] && b.tokens < l.rate(k) {
				l.stats.Throttles++
				return c.pos, k, false
			}
		}
	}
	for n, u := range need {
		l.refill(keys[n], now).tokens -= u
	}
	l.prune(now)
	return 0, bucketKey{}, true
}

// payers are the buckets a charge to partition bucket k is paid from: the
// partition's, and its table's or index's as a whole when that has a
// maximum on-demand throughput.
func (l *limiter) payers(k bucketKey) []bucketKey {
	p := l.partition(k)
	if l.schemas.capOf(k) > 0 {
		return []bucketKey{p, k.tableLevel()}
	}
	return []bucketKey{p}
}

// partition is the bucket of the partition that holds partition key value
// k: the values that hash to one partition of its table or index share it.
func (l *limiter) partition(k bucketKey) bucketKey {
	if k.pk == tableLevelPK || strings.HasPrefix(k.pk, partitionPrefix) {
		return k
	}
	x := keyhash.Mix64(k.table, []byte(k.index+"\x00"+k.pk))
	k.pk = partitionPrefix + strconv.FormatUint(x%uint64(l.cfg.Partitions), 10)
	return k
}

// partitionPrefix starts the pk of a partition's bucket; no partition key
// value's text starts with NUL.
const partitionPrefix = "\x00partition "

// inDebt reports the first bucket of keys that has nothing left, or whose
// table or index has nothing left: a read is let through while its
// partition has any units, and charged by its answer.
func (l *limiter) inDebt(keys []bucketKey) (int, bucketKey, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for i, k := range keys {
		for _, p := range l.payers(k) {
			if l.refill(p, now).tokens <= 0 {
				l.stats.Throttles++
				return i, p, true
			}
		}
	}
	return 0, bucketKey{}, false
}

// charge takes units from a bucket and its table's (gives them back when
// negative).
func (l *limiter) charge(k bucketKey, units float64) {
	if units == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, p := range l.payers(k) {
		l.refill(p, now).tokens -= l.cost(p, units)
	}
}

// rate is what bucket k refills a second, and holds at most: a table's or
// index's maximum in its units, or a partition's write units, which its
// reads share ("3,000 read request units or 1,000 write request units, or a
// linear combination of both").
func (l *limiter) rate(k bucketKey) float64 {
	if k.pk == tableLevelPK {
		return l.schemas.capOf(k)
	}
	return l.cfg.PartitionWCU
}

// cost is what units of k's kind take from k's bucket: a read unit from a
// partition's takes the write units it displaces (a third of one at AWS's
// figures).
func (l *limiter) cost(k bucketKey, units float64) float64 {
	if k.pk == tableLevelPK || k.write {
		return units
	}
	return units * l.cfg.PartitionWCU / l.cfg.PartitionRCU
}

// bucketName names k's bucket: a partition has one for its reads and
// writes, a table's or index's maximum one for each.
func (l *limiter) bucketName(k bucketKey) string {
	if k.pk == tableLevelPK {
		return bucketName(k)
	}
	k = l.partition(k)
	return "p\x00" + k.table + "\x00" + k.index + "\x00" + k.pk
}

func bucketName(k bucketKey) string {
	rw := "r"
	if k.write {
		rw = "w"
	}
	return rw + "\x00" + k.table + "\x00" + k.index + "\x00" + k.pk
}

// refill brings a bucket up to now; a new bucket starts full.
func (l *limiter) refill(k bucketKey, now time.Time) *tokenBucket {
	name := l.bucketName(k)
	rate := l.rate(k)
	b, ok := l.buckets[name]
	if !ok {
		b = &tokenBucket{tokens: rate, last: now}
		l.buckets[name] = b
		return b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(rate, b.tokens+el*rate)
		b.last = now
	}
	return b
}

// prune drops the buckets that are full again once there are many: a full
// bucket and a new one are the same.
func (l *limiter) prune(now time.Time) {
	if len(l.buckets) < 50_000 {
		return
	}
	for name, b := range l.buckets {
		if strings.HasSuffix(name, "\x00"+tableLevelPK) {
			continue // one a table or index, kept
		}
		rate := l.cfg.PartitionWCU // a partition's
		if b.tokens+now.Sub(b.last).Seconds()*rate >= rate {
			delete(l.buckets, name)
		}
	}
}

// admitRead checks a read: a TransactGetItems against the writes in
// progress on its items, every read against its partitions' throughput.
// Reads are charged by their answers (charge).
func (l *limiter) admitRead(ctx context.Context, op string, body []byte) (*admission, *refusal) {
	adm := &admission{l: l, op: op}
	switch op {
	case "GetItem":
		var req struct {
			rawAction
			ConsistentRead       bool
			ProjectionExpression string
			AttributesToGet      []string
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, nil
		}
		r, err := l.refOf(ctx, "Get", req.rawAction)
		if err != nil {
			return nil, nil
		}
		adm.reads = []readCharge{{bucket: l.tableBucket(ctx, r), c: consistencyOf(req.ConsistentRead), table: r.table}}
		if req.ProjectionExpression != "" || len(req.AttributesToGet) > 0 {
			// A projection does not change what is read.
			adm.get = &r
		}
	case "TransactGetItems":
		var req struct {
			TransactItems []struct{ Get rawAction }
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, nil
		}
		refs := make([]ref, len(req.TransactItems))
		for i, ti := range req.TransactItems {
			r, err := l.refOf(ctx, "Get", ti.Get)
			if err != nil {
				return nil, nil
			}
			refs[i] = r
		}
		return l.admitTransactGet(ctx, op, refs)
	case "Query":
		var req struct {
			TableName, IndexName      string
			KeyConditionExpression    string
			ExpressionAttributeNames  map[string]string
			ExpressionAttributeValues map[string]events.DynamoDBAttributeValue
			ConsistentRead            bool
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, nil
		}
		t, err := l.schemas.get(ctx, req.TableName)
		if err != nil {
			return nil, nil
		}
		pkName := t.PartitionKey.Name
		index := ""
		for _, ix := range t.GlobalIndexes {
			if ix.Name == req.IndexName {
				pkName, index = ix.PartitionKey.Name, ix.Name
			}
		}
		v, ok := keyValue(req.KeyConditionExpression, pkName, req.ExpressionAttributeNames, req.ExpressionAttributeValues)
		if !ok {
			return nil, nil
		}
		adm.reads = []readCharge{{bucket: bucketKey{table: req.TableName, index: index, pk: valueText(v)}, c: consistencyOf(req.ConsistentRead), table: req.TableName}}
		adm.body = body
	}
	keys := make([]bucketKey, len(adm.reads))
	for i, rc := range adm.reads {
		keys[i] = rc.bucket
	}
	if _, refused, debt := l.inDebt(keys); debt {
		return nil, throttled(refused)
	}
	return adm, nil
}

// admitTransactGet checks a read transaction: cancelled when a write in
// progress holds one of its items, or when one of its partitions has no
// units left; charged twice its items' whole sizes once answered.
func (l *limiter) admitTransactGet(ctx context.Context, op string, refs []ref) (*admission, *refusal) {
	adm := &admission{l: l, op: op, txGets: refs}
	codes := make([]string, len(refs))
	keys := make([]bucketKey, len(refs))
	for i, r := range refs {
		codes[i] = reasonNone
		keys[i] = l.tableBucket(ctx, r)
	}
	conflicted := false
	l.mu.Lock()
	for i, r := range refs {
		if l.txItems[r.id] > 0 || l.writes[r.id] > 0 {
			codes[i], conflicted = reasonConflict, true
		}
	}
	if conflicted {
		l.stats.Conflicts++
	}
	l.mu.Unlock()
	if conflicted {
		return nil, cancellationOf(codes)
	}
	if i, _, debt := l.inDebt(keys); debt {
		codes[i] = reasonThrottled
		return nil, cancellationOf(codes)
	}
	for _, k := range keys {
		adm.reads = append(adm.reads, readCharge{bucket: k, c: capacity.Transactional, table: k.table})
	}
	return adm, nil
}

func (l *limiter) tableBucket(ctx context.Context, r ref) bucketKey {
	t, _ := l.schemas.get(ctx, r.table)
	return bucketKey{table: r.table, pk: valueText(r.key[t.PartitionKey.Name])}
}

func consistencyOf(strong bool) capacity.Consistency {
	if strong {
		return capacity.Strong
	}
	return capacity.Eventual
}

// keyValue finds the value a key condition gives the partition key name:
// the operand across "=" from the name (or its #placeholder).
func keyValue(expr, name string, names map[string]string, values map[string]events.DynamoDBAttributeValue) (types.AttributeValue, bool) {
	for _, part := range splitAnd(expr) {
		lhs, rhs, ok := strings.Cut(part, "=")
		if !ok || strings.ContainsAny(rhs, "<>=") || strings.HasSuffix(lhs, "<") || strings.HasSuffix(lhs, ">") {
			continue
		}
		lhs, rhs = strings.Trim(strings.TrimSpace(lhs), "()"), strings.Trim(strings.TrimSpace(rhs), "()")
		if strings.HasPrefix(lhs, ":") {
			lhs, rhs = rhs, lhs
		}
		if n, ok := names[lhs]; ok {
			lhs = n
		}
		if lhs != name {
			continue
		}
		raw, ok := values[rhs]
		if !ok {
			return nil, false
		}
		v, err := ddbstream.Value(raw)
		return v, err == nil
	}
	return nil, false
}

// splitAnd splits a key condition at its AND keywords, any case.
func splitAnd(expr string) []string {
	var parts []string
	fields := strings.Fields(expr)
	cur := []string{}
	for _, f := range fields {
		if strings.EqualFold(f, "AND") {
			parts = append(parts, strings.Join(cur, " "))
			cur = cur[:0]
			continue
		}
		cur = append(cur, f)
	}
	return append(parts, strings.Join(cur, " "))
}

// chargeAnswer charges an admitted read by what it read, which its answer
// shows unless a filter or a projection hid some of it (then the read is
// made again without them, uncharged, to size it). A Scan's or a PartiQL
// SELECT's partitions are known only once read: it is refused, its answer
// dropped, when one of them has no units left, as a Query is before it
// reads.
func (a *admission) chargeAnswer(ctx context.Context, status int, out []byte) *refusal {
	if a == nil {
		return nil
	}
	a.committed = status == 200
	a.answered = status < 500
	if a.committed {
		// Before the client has the answer: its next read must find the
		// write's lag already begun.
		a.l.recordWrites(a.tracks)
	}
	if status == 400 {
		a.settleRefused(ctx)
	}
	if status != 200 {
		// A refused request reads nothing: what a BatchGetItem's
		// admission took goes back.
		for b, u := range a.provisional {
			a.l.charge(b, -u)
		}
		return nil
	}
	a.settleWrites(ctx)
	l := a.l
	switch a.op {
	case "Scan":
		groups, err := l.scanned(ctx, a.body, out)
		if err != nil {
			return nil
		}
		return l.takeRead(groups, a.cons)
	case "BatchExecuteStatement":
		refs := make([]ref, len(a.batchReads))
		for i, br := range a.batchReads {
			refs[i] = br.ref
		}
		if len(refs) > 0 {
			if items, err := l.images(ctx, refs); err == nil {
				for _, br := range a.batchReads {
					size := max(capacity.ItemSize(items[br.ref.id]), l.largestSince(br.ref.id, a.start))
					l.charge(l.tableBucket(ctx, br.ref), capacity.ReadUnits(size, br.c))
				}
			}
		}
		return nil
	case "ExecuteStatement":
		if a.stmt == nil {
			return nil
		}
		groups, err := l.selected(ctx, a.stmt, a.cons, a.start)
		if err != nil {
			return nil
		}
		return l.takeRead(groups, a.cons)
	}
	if len(a.reads) == 0 {
		return nil
	}
	switch a.op {
	case "GetItem":
		var res struct {
			Item map[string]events.DynamoDBAttributeValue
		}
		if json.Unmarshal(out, &res) != nil {
			return nil
		}
		size := sizeOf(res.Item)
		if a.get != nil && res.Item != nil {
			// The whole item, never less than the answer: a write
			// between the read and this charge may have shrunk it.
			if items, err := l.images(ctx, []ref{*a.get}); err == nil {
				size = max(size, capacity.ItemSize(items[a.get.id]), l.largestSince(a.get.id, a.start))
			}
		}
		l.charge(a.reads[0].bucket, capacity.ReadUnits(size, a.reads[0].c))
	case "TransactGetItems", "ExecuteTransaction":
		// Charged the whole items, whatever the projection.
		items, err := l.images(ctx, a.txGets)
		if err != nil {
			return nil
		}
		for i, r := range a.txGets {
			size := max(capacity.ItemSize(items[r.id]), l.largestSince(r.id, a.start))
			l.charge(a.reads[i].bucket, capacity.ReadUnits(size, capacity.Transactional))
		}
	case "Query":
		items, err := l.queried(ctx, a.body, out)
		if err != nil {
			return nil
		}
		size := 0
		for _, it := range items {
			size += capacity.ItemSize(it)
		}
		l.charge(a.reads[0].bucket, capacity.ReadUnits(size, a.reads[0].c))
	case "BatchGetItem":
		l.chargeBatchGet(ctx, a, out)
	}
	return nil
}

// takeRead charges each partition what was read in it, summed and rounded
// up to 4 KB, and a capped table or index the whole read, summed and rounded
// once as AWS charges the request; or refuses the read when one of them has
// no units left.
func (l *limiter) takeRead(groups map[bucketKey]int, c capacity.Consistency) *refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	whole := map[bucketKey]int{} // a capped table's or index's bytes read
	for b, size := range groups {
		for _, p := range l.payers(b) {
			if l.refill(p, now).tokens <= 0 {
				l.stats.Throttles++
				return throttled(p)
			}
			if p.pk == tableLevelPK {
				whole[p] += size
			}
		}
	}
	for b, size := range groups {
		l.refill(b, now).tokens -= l.cost(b, capacity.ReadUnits(size, c))
	}
	for p, size := range whole {
		l.refill(p, now).tokens -= capacity.ReadUnits(size, c)
	}
	return nil
}

// readRequest is what a Query or Scan reads: everything but its filter and
// projection.
type readRequest struct {
	TableName, IndexName      string
	KeyConditionExpression    string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]events.DynamoDBAttributeValue
	ExclusiveStartKey         map[string]events.DynamoDBAttributeValue
	Limit                     *int32
	ScanIndexForward          *bool
	ConsistentRead            bool
	Segment, TotalSegments    *int32
	FilterExpression          string
	ProjectionExpression      string
	Select                    string
	AttributesToGet           []string
	QueryFilter, ScanFilter   json.RawMessage
}

func (r readRequest) hides() bool {
	return r.FilterExpression != "" || r.ProjectionExpression != "" || len(r.AttributesToGet) > 0 ||
		(r.Select != "" && r.Select != "ALL_ATTRIBUTES") || len(r.QueryFilter) > 0 || len(r.ScanFilter) > 0
}

// answerItems are the items of a Query's or Scan's answer.
func answerItems(out []byte) ([]map[string]types.AttributeValue, error) {
	var res struct {
		Items []map[string]events.DynamoDBAttributeValue
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, err
	}
	items := make([]map[string]types.AttributeValue, 0, len(res.Items))
	for _, it := range res.Items {
		img, err := ddbstream.Image(it)
		if err != nil {
			return nil, err
		}
		items = append(items, img)
	}
	return items, nil
}

// queried returns the items a Query read, before its filter and projection.
func (l *limiter) queried(ctx context.Context, body, out []byte) ([]map[string]types.AttributeValue, error) {
	var req readRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	if !req.hides() {
		return answerItems(out)
	}
	if req.KeyConditionExpression == "" {
		return nil, fmt.Errorf("query without a key condition expression")
	}
	used := map[string]bool{}
	for _, tok := range strings.FieldsFunc(req.KeyConditionExpression, func(r rune) bool {
		return !(r == '#' || r == ':' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) {
		used[tok] = true
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(req.TableName), KeyConditionExpression: aws.String(req.KeyConditionExpression),
		Limit: req.Limit, ScanIndexForward: req.ScanIndexForward, ConsistentRead: aws.Bool(req.ConsistentRead),
	}
	if req.IndexName != "" {
		in.IndexName = aws.String(req.IndexName)
	}
	for k, v := range req.ExpressionAttributeNames {
		if used[k] {
			if in.ExpressionAttributeNames == nil {
				in.ExpressionAttributeNames = map[string]string{}
			}
			in.ExpressionAttributeNames[k] = v
		}
	}
	for k, v := range req.ExpressionAttributeValues {
		if used[k] {
			av, err := ddbstream.Value(v)
			if err != nil {
				return nil, err
			}
			if in.ExpressionAttributeValues == nil {
				in.ExpressionAttributeValues = map[string]types.AttributeValue{}
			}
			in.ExpressionAttributeValues[k] = av
		}
	}
	if req.ExclusiveStartKey != nil {
		k, err := ddbstream.Image(req.ExclusiveStartKey)
		if err != nil {
			return nil, err
		}
		in.ExclusiveStartKey = k
	}
	res, err := l.db.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("query again without filter: %w", err)
	}
	return res.Items, nil
}

// scanned returns what a Scan read, before its filter and projection,
// summed by partition.
func (l *limiter) scanned(ctx context.Context, body, out []byte) (map[bucketKey]int, error) {
	var req readRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var items []map[string]types.AttributeValue
	var err error
	if !req.hides() {
		items, err = answerItems(out)
	} else {
		in := &dynamodb.ScanInput{
			TableName: aws.String(req.TableName), Limit: req.Limit, ConsistentRead: aws.Bool(req.ConsistentRead),
			Segment: req.Segment, TotalSegments: req.TotalSegments,
		}
		if req.IndexName != "" {
			in.IndexName = aws.String(req.IndexName)
		}
		if req.ExclusiveStartKey != nil {
			if in.ExclusiveStartKey, err = ddbstream.Image(req.ExclusiveStartKey); err != nil {
				return nil, err
			}
		}
		var res *dynamodb.ScanOutput
		if res, err = l.db.Scan(ctx, in); err == nil {
			items = res.Items
		}
	}
	if err != nil {
		return nil, err
	}
	return l.byPartition(ctx, req.TableName, req.IndexName, items)
}

// byPartition sums the sizes of items read from a table or index by their
// partition key values.
func (l *limiter) byPartition(ctx context.Context, table, index string, items []map[string]types.AttributeValue) (map[bucketKey]int, error) {
	t, err := l.schemas.get(ctx, table)
	if err != nil {
		return nil, err
	}
	pkName := t.PartitionKey.Name
	for _, ix := range t.GlobalIndexes {
		if ix.Name == index {
			pkName = ix.PartitionKey.Name
		}
	}
	if index != "" && pkName == t.PartitionKey.Name {
		index = "" // a local index reads the table's partitions
	}
	// By partition, not by key value: a partition's part is summed and
	// rounded once, as AWS rounds a Query's or a Scan's read.
	groups := map[bucketKey]int{}
	for _, it := range items {
		b := l.partition(bucketKey{table: table, index: index, pk: valueText(it[pkName])})
		groups[b] += capacity.ItemSize(it)
	}
	return groups, nil
}

// selected returns what a PartiQL SELECT read, by partition: the item its
// WHERE names by its whole key, or the partition its key equality names
// (every item in it, whatever else the WHERE asks), or else the table or
// index as a Scan reads it.
func (l *limiter) selected(ctx context.Context, st *statement, c capacity.Consistency, since time.Time) (map[bucketKey]int, error) {
	t, err := l.schemas.get(ctx, st.table)
	if err != nil {
		return nil, err
	}
	pk, sk := &t.PartitionKey, t.SortKey
	index := ""
	for _, ix := range append(append([]tables.Index{}, t.GlobalIndexes...), t.LocalIndexes...) {
		if ix.Name == st.index {
			pk, sk, index = &ix.PartitionKey, ix.SortKey, ix.Name
		}
	}
	strong := aws.Bool(c != capacity.Eventual)
	v, byKey := st.equal[pk.Name]
	switch {
	case byKey && index == "" && (sk == nil || st.equal[sk.Name] != nil):
		r := ref{table: st.table, kind: "Get", key: map[string]types.AttributeValue{pk.Name: v}}
		r.id = st.table + "\x00" + valueText(v)
		if sk != nil {
			r.key[sk.Name] = st.equal[sk.Name]
			r.id += "\x00" + valueText(st.equal[sk.Name])
		}
		items, err := l.images(ctx, []ref{r})
		if err != nil {
			return nil, err
		}
		size := max(capacity.ItemSize(items[r.id]), l.largestSince(r.id, since))
		return map[bucketKey]int{{table: st.table, pk: valueText(v)}: size}, nil
	case byKey:
		in := &dynamodb.QueryInput{
			TableName: aws.String(st.table), KeyConditionExpression: aws.String("#k = :k"),
			ExpressionAttributeNames:  map[string]string{"#k": pk.Name},
			ExpressionAttributeValues: map[string]types.AttributeValue{":k": v},
		}
		if index != "" {
			in.IndexName = aws.String(index)
		} else {
			in.ConsistentRead = strong
		}
		res, err := l.db.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		groups, err := l.byPartition(ctx, st.table, index, res.Items)
		if len(groups) == 0 && err == nil {
			b := bucketKey{table: st.table, pk: valueText(v)}
			if index != "" && pk.Name != t.PartitionKey.Name {
				b.index = index
			}
			groups[b] = 0
		}
		return groups, err
	}
	in := &dynamodb.ScanInput{TableName: aws.String(st.table)}
	if index != "" {
		in.IndexName = aws.String(index)
	} else {
		in.ConsistentRead = strong
	}
	res, err := l.db.Scan(ctx, in)
	if err != nil {
		return nil, err
	}
	return l.byPartition(ctx, st.table, index, res.Items)
}

// chargeBatchGet charges each key a BatchGetItem processed as one GetItem
// of its whole item ("DynamoDB read and write operations": each item
// rounded up to 4 KB on its own), a key that found nothing as a read of
// nothing.
func (l *limiter) chargeBatchGet(ctx context.Context, a *admission, out []byte) {
	var req struct {
		RequestItems map[string]struct {
			Keys                 []map[string]events.DynamoDBAttributeValue
			ConsistentRead       bool
			ProjectionExpression string
			AttributesToGet      []string
		}
	}
	var res struct {
		Responses       map[string][]map[string]events.DynamoDBAttributeValue
		UnprocessedKeys map[string]struct {
			Keys []map[string]events.DynamoDBAttributeValue
		}
	}
	if json.Unmarshal(a.body, &req) != nil || json.Unmarshal(out, &res) != nil {
		return
	}
	for table, ka := range req.RequestItems {
		t, err := l.schemas.get(ctx, table)
		if err != nil {
			continue
		}
		unprocessed := map[string]bool{}
		for _, k := range res.UnprocessedKeys[table].Keys {
			if r, err := l.refOf(ctx, "Get", rawAction{TableName: table, Key: k}); err == nil {
				unprocessed[r.id] = true
			}
		}
		found := map[string]map[string]types.AttributeValue{}
		for _, it := range res.Responses[table] {
			img, err := ddbstream.Image(it)
			if err != nil {
				continue
			}
			id := table + "\x00" + valueText(img[t.PartitionKey.Name])
			if t.SortKey != nil {
				id += "\x00" + valueText(img[t.SortKey.Name])
			}
			found[id] = img
		}
		var refs []ref
		for _, k := range ka.Keys {
			r, err := l.refOf(ctx, "Get", rawAction{TableName: table, Key: k})
			if err == nil && !unprocessed[r.id] {
				refs = append(refs, r)
			}
		}
		var whole map[string]map[string]types.AttributeValue
		if ka.ProjectionExpression != "" || len(ka.AttributesToGet) > 0 {
			// A projection does not change what is read; it may even
			// leave out the key, so every processed key is read again
			// (or taken from the image cache), and charged never less
			// than the answer.
			if whole, err = l.images(ctx, refs); err != nil {
				continue
			}
		}
		for _, r := range refs {
			size := max(capacity.ItemSize(found[r.id]), capacity.ItemSize(whole[r.id]))
			if whole != nil {
				size = max(size, l.largestSince(r.id, a.start))
			}
			l.charge(bucketKey{table: table, pk: valueText(r.key[t.PartitionKey.Name])}, capacity.ReadUnits(size, consistencyOf(ka.ConsistentRead)))
		}
	}
	// What admission took is part of what was charged.
	for b, u := range a.provisional {
		l.charge(b, -u)
	}
}

func sizeOf(item map[string]events.DynamoDBAttributeValue) int {
	img, err := ddbstream.Image(item)
	if err != nil {
		return 0
	}
	return capacity.ItemSize(img)
}
