package ddbfront

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/shared/ddbstream"
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
	need := map[bucketKey]float64{}
	for _, c := range charges {
		need[c.bucket] += c.units
	}
	for _, c := range charges {
		b := l.refill(c.bucket, now)
		rate := l.rate(c.bucket)
		if b.tokens < need[c.bucket] && b.tokens < rate {
			l.stats.Throttles++
			return c.pos, c.bucket, false
		}
	}
	for k, units := range need {
		l.buckets[bucketName(k)].tokens -= units
	}
	l.prune(now)
	return 0, bucketKey{}, true
}

// inDebt reports the first bucket of keys that has nothing left: a read is
// let through while its partition has any units, and charged by its answer.
func (l *limiter) inDebt(keys []bucketKey) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for i, k := range keys {
		if l.refill(k, now).tokens <= 0 {
			l.stats.Throttles++
			return i, true
		}
	}
	return 0, false
}

func (l *limiter) charge(k bucketKey, units float64) {
	if units <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(k, l.now()).tokens -= units
}

func (l *limiter) rate(k bucketKey) float64 {
	if k.write {
		return l.cfg.PartitionWCU
	}
	return l.cfg.PartitionRCU
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
	name := bucketName(k)
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
		rate := l.cfg.PartitionRCU
		if strings.HasPrefix(name, "w") {
			rate = l.cfg.PartitionWCU
		}
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
			ConsistentRead bool
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, nil
		}
		r, err := l.refOf(ctx, "Get", req.rawAction)
		if err != nil {
			return nil, nil
		}
		adm.reads = []readCharge{{bucket: l.tableBucket(ctx, r), c: consistencyOf(req.ConsistentRead), table: r.table}}
	case "TransactGetItems":
		var req struct {
			TransactItems []struct{ Get rawAction }
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, nil
		}
		codes := make([]string, len(req.TransactItems))
		refs := make([]ref, len(req.TransactItems))
		for i, ti := range req.TransactItems {
			codes[i] = reasonNone
			r, err := l.refOf(ctx, "Get", ti.Get)
			if err != nil {
				return nil, nil
			}
			refs[i] = r
			adm.reads = append(adm.reads, readCharge{bucket: l.tableBucket(ctx, r), c: capacity.Transactional, table: r.table})
		}
		conflicted := false
		l.mu.Lock()
		for i, r := range refs {
			if l.txItems[r.id].count > 0 || l.writes[r.id] > 0 {
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
		keys := make([]bucketKey, len(adm.reads))
		for i, rc := range adm.reads {
			keys[i] = rc.bucket
		}
		if i, debt := l.inDebt(keys); debt {
			codes[i] = reasonThrottled
			return nil, cancellationOf(codes)
		}
		return adm, nil
	case "BatchGetItem":
		var req struct {
			RequestItems map[string]struct {
				Keys           []map[string]events.DynamoDBAttributeValue
				ConsistentRead bool
			}
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, nil
		}
		for table, ka := range req.RequestItems {
			for _, k := range ka.Keys {
				r, err := l.refOf(ctx, "Get", rawAction{TableName: table, Key: k})
				if err != nil {
					return nil, nil
				}
				adm.reads = append(adm.reads, readCharge{bucket: l.tableBucket(ctx, r), c: consistencyOf(ka.ConsistentRead), table: table})
			}
		}
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
	}
	keys := make([]bucketKey, len(adm.reads))
	for i, rc := range adm.reads {
		keys[i] = rc.bucket
	}
	if i, debt := l.inDebt(keys); debt {
		return nil, throttled(keys[i])
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

// chargeAnswer charges an admitted read by what its answer holds.
func (a *admission) chargeAnswer(ctx context.Context, status int, out []byte) {
	if a == nil || len(a.reads) == 0 || status != 200 {
		return
	}
	l := a.l
	switch a.op {
	case "GetItem":
		var res struct {
			Item map[string]events.DynamoDBAttributeValue
		}
		if json.Unmarshal(out, &res) == nil {
			l.charge(a.reads[0].bucket, capacity.ReadUnits(sizeOf(res.Item), a.reads[0].c))
		}
	case "TransactGetItems":
		var res struct {
			Responses []struct {
				Item map[string]events.DynamoDBAttributeValue
			}
		}
		if json.Unmarshal(out, &res) == nil {
			for i, rc := range a.reads {
				size := 0
				if i < len(res.Responses) {
					size = sizeOf(res.Responses[i].Item)
				}
				l.charge(rc.bucket, capacity.ReadUnits(size, rc.c))
			}
		}
	case "Query":
		var res struct {
			Items []map[string]events.DynamoDBAttributeValue
		}
		if json.Unmarshal(out, &res) == nil {
			size := 0
			for _, it := range res.Items {
				size += sizeOf(it)
			}
			l.charge(a.reads[0].bucket, capacity.ReadUnits(size, a.reads[0].c))
		}
	case "BatchGetItem":
		var res struct {
			Responses map[string][]map[string]events.DynamoDBAttributeValue
		}
		if json.Unmarshal(out, &res) != nil {
			return
		}
		cons := map[string]capacity.Consistency{}
		for _, rc := range a.reads {
			cons[rc.table] = rc.c
		}
		for table, items := range res.Responses {
			t, err := l.schemas.get(ctx, table)
			if err != nil {
				continue
			}
			for _, it := range items {
				img, err := ddbstream.Image(it)
				if err != nil {
					continue
				}
				k := bucketKey{table: table, pk: valueText(img[t.PartitionKey.Name])}
				l.charge(k, capacity.ReadUnits(capacity.ItemSize(img), cons[table]))
			}
		}
	}
}

func sizeOf(item map[string]events.DynamoDBAttributeValue) int {
	img, err := ddbstream.Image(item)
	if err != nil {
		return 0
	}
	return capacity.ItemSize(img)
}
