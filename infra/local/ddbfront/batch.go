package ddbfront

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/infra/local/capacity"
)

// Batches are answered key by key, as "BatchWriteItem" and "BatchGetItem"
// (API reference) describe: the items whose partitions can pay are
// processed, the others come back in UnprocessedItems or UnprocessedKeys,
// and the whole request fails with ProvisionedThroughputExceededException
// only when none could be processed. The front passes DynamoDB Local the
// batch without the refused keys and adds them to its answer.

// rewrite is a batch the limits cut down: the request DynamoDB Local gets,
// and what its answer must add as unprocessed.
type rewrite struct {
	forward []byte
	field   string // UnprocessedItems or UnprocessedKeys
	refused map[string]json.RawMessage
	// statementErrors are a BatchExecuteStatement's refused statements'
	// errors, by position (nil: run by DynamoDB Local).
	statementErrors []map[string]any
}

// answer adds the refused keys to DynamoDB Local's answer.
func (rw *rewrite) answer(out []byte) []byte {
	if rw != nil && rw.statementErrors != nil {
		return rw.statementAnswer(out)
	}
	if rw == nil || len(rw.refused) == 0 {
		return out
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(out, &res) != nil {
		return out
	}
	merged := map[string]json.RawMessage{}
	if raw, ok := res[rw.field]; ok {
		var local map[string]json.RawMessage
		if json.Unmarshal(raw, &local) == nil {
			for t, v := range local {
				merged[t] = v
			}
		}
	}
	for t, v := range rw.refused {
		if prev, ok := merged[t]; ok && rw.field == "UnprocessedItems" {
			var a, b []json.RawMessage
			if json.Unmarshal(prev, &a) == nil && json.Unmarshal(v, &b) == nil {
				v, _ = json.Marshal(append(a, b...))
			}
		} else if ok {
			var a, b map[string]json.RawMessage
			if json.Unmarshal(prev, &a) == nil && json.Unmarshal(v, &b) == nil {
				var ka, kb []json.RawMessage
				json.Unmarshal(a["Keys"], &ka)
				json.Unmarshal(b["Keys"], &kb)
				b["Keys"], _ = json.Marshal(append(ka, kb...))
				v, _ = json.Marshal(b)
			}
		}
		merged[t] = v
	}
	res[rw.field], _ = json.Marshal(merged)
	body, err := json.Marshal(res)
	if err != nil {
		return out
	}
	return body
}

// withItems is the request body with RequestItems replaced.
func withItems(body []byte, items map[string]json.RawMessage) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var err error
	if req["RequestItems"], err = json.Marshal(items); err != nil {
		return nil, err
	}
	return json.Marshal(req)
}

func (l *limiter) admitBatchWrite(ctx context.Context, body []byte) (*admission, *refusal) {
	var req struct {
		RequestItems map[string][]json.RawMessage
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, nil
	}
	type entry struct {
		table string
		raw   json.RawMessage
	}
	var refs []ref
	var entries []entry
	names := make([]string, 0, len(req.RequestItems))
	for table := range req.RequestItems {
		names = append(names, table)
	}
	slices.Sort(names)
	for _, table := range names {
		for _, raw := range req.RequestItems[table] {
			var wr struct {
				PutRequest *struct {
					Item map[string]events.DynamoDBAttributeValue
				}
				DeleteRequest *struct {
					Key map[string]events.DynamoDBAttributeValue
				}
			}
			if json.Unmarshal(raw, &wr) != nil {
				return nil, nil
			}
			a := rawAction{TableName: table}
			kind := "Delete"
			if wr.PutRequest != nil {
				kind, a.Item = "Put", wr.PutRequest.Item
			} else if wr.DeleteRequest != nil {
				a.Key = wr.DeleteRequest.Key
			}
			r, err := l.refOf(ctx, kind, a)
			if err != nil {
				return nil, nil
			}
			refs = append(refs, r)
			entries = append(entries, entry{table, raw})
		}
	}
	// An item a transaction holds, or whose possible states cannot take
	// the write beside a transaction freed at its window, is left
	// unprocessed: priced by a read that may not see that transaction,
	// and the transaction never charged for what the write makes of the
	// item (possible.go). Stricter than AWS.
	var held []entry
	l.mu.Lock()
	n := 0
	for i, r := range refs {
		if p := l.poss[r.id]; l.txItems[r.id] > 0 || (p != nil && p.hasFreed(r.id) && !p.fits(r)) {
			held = append(held, entries[i])
			continue
		}
		refs[n], entries[n] = r, entries[i]
		n++
	}
	l.stats.Conflicts += int64(len(held))
	l.mu.Unlock()
	refs, entries = refs[:n], entries[:n]
	if len(refs) == 0 && len(held) > 0 {
		return nil, conflictRefusal
	}
	adm := &admission{l: l, op: "BatchWriteItem"}
	charges, _, err := l.writeCharges(ctx, adm, refs, false)
	for i := range adm.tracks {
		// A batch's items succeed or stay unprocessed one by one: none
		// leaves an image.
		adm.tracks[i].known = false
	}
	if err != nil {
		adm.releaseNow()
		return nil, nil
	}
	byPos := make([][]charge, len(refs))
	for _, c := range charges {
		byPos[c.pos] = append(byPos[c.pos], c)
	}
	kept := map[string]json.RawMessage{}
	keptItems := map[string][]json.RawMessage{}
	refused := map[string][]json.RawMessage{}
	for _, e := range held {
		refused[e.table] = append(refused[e.table], e.raw)
	}
	var first bucketKey
	throttledAny := false
	for i, r := range refs {
		if _, b, ok := l.take(byPos[i]); !ok {
			if !throttledAny {
				first, throttledAny = b, true
			}
			refused[entries[i].table] = append(refused[entries[i].table], entries[i].raw)
			continue
		}
		keptItems[entries[i].table] = append(keptItems[entries[i].table], entries[i].raw)
		adm.writeID = append(adm.writeID, r.id)
	}
	if len(adm.writeID) == 0 && len(refs) > 0 {
		adm.releaseNow()
		return nil, throttled(first)
	}
	l.mu.Lock()
	for _, id := range adm.writeID {
		l.writes[id]++
	}
	l.mu.Unlock()
	if len(refused) == 0 {
		return adm, nil
	}
	l.mu.Lock()
	l.stats.Unprocessed += int64(len(refs) - len(adm.writeID))
	l.mu.Unlock()
	for t, items := range keptItems {
		kept[t], _ = json.Marshal(items)
	}
	forward, err := withItems(body, kept)
	if err != nil {
		adm.releaseNow()
		return nil, nil
	}
	adm.rewrite = &rewrite{forward: forward, field: "UnprocessedItems", refused: map[string]json.RawMessage{}}
	for t, items := range refused {
		adm.rewrite.refused[t], _ = json.Marshal(items)
	}
	return adm, nil
}

// admitBatchGet lets each key through while its partition has units left,
// taking from it at once the least a read costs, so that the batch's next
// keys on that partition see it; the rest is charged by the answer.
func (l *limiter) admitBatchGet(ctx context.Context, body []byte) (*admission, *refusal) {
	var req struct {
		RequestItems map[string]map[string]json.RawMessage
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, nil
	}
	names := make([]string, 0, len(req.RequestItems))
	for table := range req.RequestItems {
		names = append(names, table)
	}
	slices.Sort(names)
	adm := &admission{l: l, op: "BatchGetItem", provisional: map[bucketKey]float64{}}
	kept := map[string]json.RawMessage{}
	refused := map[string]json.RawMessage{}
	var first bucketKey
	processed, total := 0, 0
	for _, table := range names {
		ka := req.RequestItems[table]
		var keys []map[string]events.DynamoDBAttributeValue
		var consistent bool
		if json.Unmarshal(ka["Keys"], &keys) != nil {
			return nil, nil
		}
		if raw, ok := ka["ConsistentRead"]; ok && json.Unmarshal(raw, &consistent) != nil {
			return nil, nil
		}
		least := capacity.ReadUnits(0, consistencyOf(consistent))
		var in, out []map[string]events.DynamoDBAttributeValue
		for _, k := range keys {
			total++
			r, err := l.refOf(ctx, "Get", rawAction{TableName: table, Key: k})
			if err != nil {
				return nil, nil
			}
			b := l.tableBucket(ctx, r)
			l.mu.Lock()
			now, ok, short, payers := l.now(), true, b, l.payers(b)
			for _, p := range payers {
				if l.refill(p, now).tokens <= 0 {
					ok, short = false, p
					break
				}
			}
			if ok {
				for _, p := range payers {
					l.refill(p, now).tokens -= l.cost(p, least)
				}
			} else {
				l.stats.Throttles++
			}
			l.mu.Unlock()
			if !ok {
				if len(out) == 0 && len(refused) == 0 {
					first = short
				}
				out = append(out, k)
				continue
			}
			adm.provisional[b] += least
			processed++
			in = append(in, k)
		}
		with := func(keys []map[string]events.DynamoDBAttributeValue) json.RawMessage {
			c := map[string]json.RawMessage{}
			for f, v := range ka {
				c[f] = v
			}
			c["Keys"], _ = json.Marshal(keys)
			raw, _ := json.Marshal(c)
			return raw
		}
		if len(in) > 0 {
			kept[table] = with(in)
		}
		if len(out) > 0 {
			refused[table] = with(out)
		}
	}
	if processed == 0 && total > 0 {
		return nil, throttled(first)
	}
	adm.reads = []readCharge{{}} // charged by its answer
	adm.body = body
	if len(refused) == 0 {
		return adm, nil
	}
	l.mu.Lock()
	l.stats.Unprocessed += int64(total - processed)
	l.mu.Unlock()
	forward, err := withItems(body, kept)
	if err != nil {
		return nil, nil
	}
	adm.body = forward
	adm.rewrite = &rewrite{forward: forward, field: "UnprocessedKeys", refused: refused}
	return adm, nil
}

// admitExecuteTransaction checks an ExecuteTransaction as the transaction
// it stands for: INSERT, UPDATE and DELETE statements as a
// TransactWriteItems of their items, SELECT statements as a
// TransactGetItems.
func (l *limiter) admitExecuteTransaction(ctx context.Context, body []byte) (*admission, *refusal) {
	var req struct {
		TransactStatements []struct {
			Statement  string
			Parameters []events.DynamoDBAttributeValue
		}
		ClientRequestToken string
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, nil
	}
	var refs []ref
	reads := 0
	for _, ts := range req.TransactStatements {
		st, err := l.statementOf(ts.Statement, ts.Parameters)
		if err != nil {
			return nil, nil
		}
		var r ref
		if st.kind == "SELECT" {
			r, err = l.refOfKey(ctx, st)
			reads++
		} else {
			r, err = l.refOfStatement(ctx, st)
		}
		if err != nil {
			return nil, nil
		}
		refs = append(refs, r)
	}
	if reads == 0 {
		return l.admitTransactRefs(ctx, "ExecuteTransaction", refs, req.ClientRequestToken)
	}
	if reads != len(refs) {
		return nil, nil // DynamoDB refuses a mix of reads and writes
	}
	return l.admitTransactGet(ctx, "ExecuteTransaction", refs)
}

// refOfKey names the item a SELECT names by its whole key.
func (l *limiter) refOfKey(ctx context.Context, st *statement) (ref, error) {
	del := *st
	del.kind = "DELETE"
	r, err := l.refOfStatement(ctx, &del)
	r.kind = "Get"
	return r, err
}

// admitBatchStatements checks a BatchExecuteStatement statement by
// statement, as BatchExecuteStatement answers: a statement whose item a
// transaction holds fails alone with TransactionConflict, one whose
// partition cannot pay with ProvisionedThroughputExceeded, and the others
// are run. DynamoDB Local runs the admitted ones; the front puts the
// refused ones' errors in their places.
func (l *limiter) admitBatchStatements(ctx context.Context, body []byte) (*admission, *refusal) {
	var req struct {
		Statements []struct {
			Statement      string
			Parameters     []events.DynamoDBAttributeValue
			ConsistentRead bool
		}
	}
	var raw struct{ Statements []json.RawMessage }
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(body, &raw) != nil || len(raw.Statements) != len(req.Statements) {
		return nil, nil
	}
	adm := &admission{l: l, op: "BatchExecuteStatement"}
	errs := make([]map[string]any, len(req.Statements))
	// The writes are priced together, in one writeCharges: a write that
	// waits for the writes of its item in flight (awaitPriceable) must
	// not hold flights of its own meanwhile, which statement by statement
	// the batch's earlier ones would.
	type write struct {
		at    int // the statement's position
		table string
	}
	var writes []write
	var refs []ref
	for i, s := range req.Statements {
		st, err := l.statementOf(s.Statement, s.Parameters)
		if err != nil {
			adm.untracked = true // a write, maybe, the limits cannot name
			continue
		}
		if st.kind == "SELECT" {
			r, err := l.refOfKey(ctx, st)
			if err == nil {
				b := l.tableBucket(ctx, r)
				if _, short, debt := l.inDebt([]bucketKey{b}); debt {
					errs[i] = statementError(st.table, statementThrottle(throttled(short)), throttledMessage)
					continue
				}
				adm.batchReads = append(adm.batchReads, batchRead{ref: r, c: consistencyOf(s.ConsistentRead)})
			}
			continue
		}
		r, err := l.refOfStatement(ctx, st)
		if err != nil {
			adm.untracked = true
			continue
		}
		writes = append(writes, write{at: i, table: st.table})
		refs = append(refs, r)
	}
	if len(refs) > 0 && !l.admitStatementWrites(ctx, adm, refs, func(j int, refused *refusal) {
		if refused == conflictRefusal {
			errs[writes[j].at] = statementError(writes[j].table, "TransactionConflict", "Transaction is ongoing for the item")
			return
		}
		errs[writes[j].at] = statementError(writes[j].table, statementThrottle(refused), throttledMessage)
	}) {
		adm.untracked = true
	}
	var kept []json.RawMessage
	for i := range req.Statements {
		if errs[i] == nil {
			kept = append(kept, raw.Statements[i])
		}
	}
	refused := 0
	for _, e := range errs {
		if e != nil {
			refused++
		}
	}
	if refused == 0 {
		return adm, nil
	}
	var req2 map[string]json.RawMessage
	if json.Unmarshal(body, &req2) != nil {
		adm.releaseNow()
		return nil, nil
	}
	req2["Statements"], _ = json.Marshal(kept)
	forward, err := json.Marshal(req2)
	if err != nil {
		adm.releaseNow()
		return nil, nil
	}
	adm.rewrite = &rewrite{forward: forward, statementErrors: errs}
	return adm, nil
}

// admitStatementWrites admits a BatchExecuteStatement's writes, refs, into
// adm, statement by statement as to their refusals (refuse(j, why) for
// refs[j]: a conflict where a transaction holds the item, a throttle where
// its partition cannot pay) but priced together. false: they could not be
// priced, and go on unpriced (untracked).
func (l *limiter) admitStatementWrites(ctx context.Context, adm *admission, refs []ref, refuse func(j int, why *refusal)) bool {
	at := make([]int, len(refs)) // refs' positions as given
	for j := range at {
		at[j] = j
	}
	var charges []charge
	var settle []settlement
	for {
		// A statement whose item a transaction holds fails alone with
		// TransactionConflict; so does one that cannot join its item's
		// possible states beside a transaction freed at its window
		// (startWrites' refusal), found as the others are priced.
		l.mu.Lock()
		n := 0
		for j, r := range refs {
			if l.txItems[r.id] > 0 {
				l.stats.Conflicts++
				refuse(at[j], conflictRefusal)
				continue
			}
			refs[n], at[n] = r, at[j]
			n++
		}
		l.mu.Unlock()
		refs, at = refs[:n], at[:n]
		if len(refs) == 0 {
			return true
		}
		var err error
		charges, settle, err = l.writeCharges(ctx, adm, refs, false)
		if full := (*chainFull)(nil); errors.As(err, &full) {
			l.mu.Lock()
			l.stats.Conflicts++
			l.mu.Unlock()
			refuse(at[full.pos], conflictRefusal)
			refs = append(refs[:full.pos], refs[full.pos+1:]...)
			at = append(at[:full.pos], at[full.pos+1:]...)
			continue
		}
		if err != nil {
			// Unpriced, but writes in progress all the same, as a single
			// write gone on unpriced is (admitWriteRef).
			l.mu.Lock()
			for _, r := range refs {
				adm.writeID = append(adm.writeID, r.id)
				l.writes[r.id]++
			}
			l.mu.Unlock()
			return false
		}
		break
	}
	// The batch's 200 does not say which statements applied: none leaves
	// an image, and a refused INSERT is not charged as a PutItem's is.
	for i := range adm.tracks {
		adm.tracks[i].known = false
	}
	adm.ifRefused = nil
	byPos := make([][]charge, len(refs))
	for _, c := range charges {
		byPos[c.pos] = append(byPos[c.pos], c)
	}
	throttledAt := map[int]bool{} // by position in refs
	var kept, dropped []imageTrack
	for j, r := range refs {
		if _, b, ok := l.take(byPos[j]); !ok {
			refuse(at[j], throttled(b))
			throttledAt[j] = true
			dropped = append(dropped, adm.tracks[j])
			continue
		}
		kept = append(kept, adm.tracks[j])
		adm.writeID = append(adm.writeID, r.id)
	}
	for _, s := range settle {
		if len(s.charged) == 0 || !throttledAt[s.charged[0].pos] {
			adm.settle = append(adm.settle, s)
		}
	}
	l.mu.Lock()
	// A throttled statement is never sent: its write ends now, as a
	// throttled single write's does, neither left in flight to the
	// batch's answer nor taken for one that answer applied.
	l.endWrites(dropped, false, time.Now())
	adm.tracks = kept
	for _, id := range adm.writeID {
		l.writes[id]++
	}
	l.mu.Unlock()
	return true
}

// refusedAll reports a BatchExecuteStatement none of whose statements was
// admitted.
func (a *admission) refusedAll() bool {
	if a == nil || a.rewrite == nil || a.rewrite.statementErrors == nil {
		return false
	}
	for _, e := range a.rewrite.statementErrors {
		if e == nil {
			return false
		}
	}
	return true
}

func statementError(table, code, msg string) map[string]any {
	return map[string]any{"TableName": table, "Error": map[string]string{"Code": code, "Message": msg}}
}

const throttledMessage = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html."

// batchRead is a SELECT of a BatchExecuteStatement, charged as a GetItem
// of its whole item.
type batchRead struct {
	ref ref
	c   capacity.Consistency
}

// statementAnswer puts the refused statements' errors in their places
// among DynamoDB Local's responses, or answers alone when every statement
// was refused.
func (rw *rewrite) statementAnswer(out []byte) []byte {
	var res map[string]json.RawMessage
	if out == nil {
		res = map[string]json.RawMessage{}
	} else if json.Unmarshal(out, &res) != nil {
		return out
	}
	var local []json.RawMessage
	json.Unmarshal(res["Responses"], &local)
	merged := make([]any, 0, len(rw.statementErrors))
	for _, e := range rw.statementErrors {
		if e != nil {
			merged = append(merged, e)
			continue
		}
		if len(local) > 0 {
			merged = append(merged, local[0])
			local = local[1:]
		}
	}
	res["Responses"], _ = json.Marshal(merged)
	body, err := json.Marshal(res)
	if err != nil {
		return out
	}
	return body
}

// statementThrottle is a batch statement's error code for a throttle: a
// table's maximum is ThrottlingError, a partition's ceiling
// ProvisionedThroughputExceeded (BatchStatementErrorCodeEnum).
func statementThrottle(r *refusal) string {
	if t, _ := r.body["__type"].(string); strings.HasSuffix(t, "#ThrottlingException") {
		return "ThrottlingError"
	}
	return "ProvisionedThroughputExceeded"
}
