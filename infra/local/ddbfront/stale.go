package ddbfront

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/tables"
)

// Eventually consistent reads. On AWS the answer to an eventually
// consistent read "may not reflect the results of a recently completed write
// operation" (Read consistency, developer guide); DynamoDB Local always
// answers with the item as it is. The front keeps, for StaleReads after each write it saw
// commit, the item as it was before, and answers an eventually consistent
// GetItem, BatchGetItem, Query or Scan, and every read of a global index,
// with the item as it was StaleReads ago: a copy that has not applied the
// writes of the last StaleReads yet. Strongly consistent reads and
// transactions see the item as it is.
//
// A query or scan is answered by DynamoDB Local from the items as they are,
// and the front then takes out what the lagging copy would not hold: an item
// written since is replaced by what it was before, or left out when it was
// not there (or, in an index, not under the same index key). What the copy
// would still hold and DynamoDB Local no longer does (an item deleted since,
// or moved away from the index key read) cannot be put back, and a filter is
// evaluated on the item as it is: those two parts read fresher than AWS may.

// staleWrite is one committed write of an item: when, and the item before it
// (nil: there was none).
type staleWrite struct {
	at     time.Time
	before map[string]types.AttributeValue
}

// maxRecent bounds the items with writes kept; past it the oldest go first.
const maxRecent = 50_000

// recordWrites records the writes of an admission whose answer says they
// committed.
func (l *limiter) recordWrites(tracks []imageTrack) {
	if len(tracks) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for _, t := range tracks {
		if t.write {
			l.wrote(t.id, t.before, now)
		}
	}
}

// wrote records a committed write of item id. Callers hold l.mu.
func (l *limiter) wrote(id string, before map[string]types.AttributeValue, now time.Time) {
	if l.cfg.StaleReads <= 0 {
		return
	}
	if l.recent == nil {
		l.recent = map[string][]staleWrite{}
	}
	if len(l.recent) >= maxRecent || (len(l.recent) >= 1024 && now.Sub(l.recentPruned) >= time.Second) {
		l.pruneRecent(now)
		l.recentPruned = now
	}
	ws := l.recent[id]
	cut := 0
	for cut < len(ws) && now.Sub(ws[cut].at) >= l.cfg.StaleReads {
		cut++
	}
	l.recent[id] = append(ws[cut:], staleWrite{at: now, before: before})
	l.lastWrite = now
}

// pruneRecent drops the writes every copy has applied by now. Callers hold
// l.mu.
func (l *limiter) pruneRecent(now time.Time) {
	for id, ws := range l.recent {
		if now.Sub(ws[len(ws)-1].at) >= l.cfg.StaleReads {
			delete(l.recent, id)
		}
	}
	if len(l.recent) >= maxRecent {
		clear(l.recent) // a burst of fresh writes: start again
	}
}

// asOf is item id as a copy StaleReads behind sees it at now: stale is false
// when no write of it is that recent.
func (l *limiter) asOf(id string, now time.Time) (item map[string]types.AttributeValue, stale bool) {
	item, stale = l.asOfAll([]string{id}, now)[id]
	return item, stale
}

// staleAnswer rewrites DynamoDB Local's answer to an eventually consistent
// GetItem or BatchGetItem with the items as a lagging copy sees them. An
// answer it cannot rewrite exactly (a projection of nested paths, a batch
// whose projection leaves out the key) is passed on as it is.
func (l *limiter) staleAnswer(ctx context.Context, op string, body, out []byte) []byte {
	if l == nil || l.cfg.StaleReads <= 0 || !l.anyRecent() {
		return out
	}
	var rewritten []byte
	var ok bool
	switch op {
	case "GetItem":
		rewritten, ok = l.staleGet(ctx, body, out)
	case "BatchGetItem":
		rewritten, ok = l.staleBatchGet(ctx, body, out)
	case "Query", "Scan":
		rewritten, ok = l.staleQuery(ctx, body, out)
	}
	if !ok {
		return out
	}
	return rewritten
}

// staleOps are the operations whose eventually consistent answers lag.
var staleOps = map[string]bool{"GetItem": true, "BatchGetItem": true, "Query": true, "Scan": true}

// staleQuery rewrites the page of an eventually consistent Query or Scan, or
// of any read of a global index (they are eventually consistent only).
func (l *limiter) staleQuery(ctx context.Context, body, out []byte) ([]byte, bool) {
	var in struct {
		TableName        string
		IndexName        string
		Select           string
		FilterExpression string
		QueryFilter      json.RawMessage
		ScanFilter       json.RawMessage
		readShape
	}
	if json.Unmarshal(body, &in) != nil || (in.ConsistentRead && in.IndexName == "") || in.Select == "COUNT" {
		return nil, false
	}
	t, err := l.schemas.get(ctx, in.TableName)
	if err != nil {
		return nil, false
	}
	var ix *tables.Index
	global := false
	if in.IndexName != "" {
		for i := range t.GlobalIndexes {
			if t.GlobalIndexes[i].Name == in.IndexName {
				ix, global = &t.GlobalIndexes[i], true
			}
		}
		for i := range t.LocalIndexes {
			if t.LocalIndexes[i].Name == in.IndexName {
				ix = &t.LocalIndexes[i]
			}
		}
		if ix == nil || (in.ConsistentRead && !global) {
			return nil, false // unknown, or a strongly consistent read of a local index
		}
	}
	// A local index fetches from the table what it does not project when
	// the read asks for it; a global index refuses such a read.
	indexOnly := ix != nil && (global || in.Select == "ALL_PROJECTED_ATTRIBUTES" ||
		(in.Select == "" && in.ProjectionExpression == "" && len(in.AttributesToGet) == 0))
	// A filter is evaluated on the item as it is: what it was may not pass,
	// so an item that changed is shown as it is (only the items not in the
	// copy yet are left out).
	filtered := in.FilterExpression != "" || len(in.QueryFilter) > 0 || len(in.ScanFilter) > 0
	var ans map[string]json.RawMessage
	if json.Unmarshal(out, &ans) != nil {
		return nil, false
	}
	var items []map[string]events.DynamoDBAttributeValue
	if raw, ok := ans["Items"]; !ok || json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	imgs := make([]map[string]types.AttributeValue, len(items))
	ids := make([]string, len(items))
	for i, it := range items {
		img, err := ddbstream.Image(it)
		if err != nil {
			return nil, false
		}
		if _, ids[i], err = itemKey(t, in.TableName, img, "key"); err != nil {
			return nil, false // projected without the table's key: cannot be matched
		}
		imgs[i] = img
	}
	stale := l.asOfAll(ids, time.Now())
	if len(stale) == 0 {
		return nil, false
	}
	kept := make([]map[string]events.DynamoDBAttributeValue, 0, len(items))
	dropped := 0
	for i, it := range items {
		before, isStale := stale[ids[i]]
		if !isStale {
			kept = append(kept, it)
			continue
		}
		same, known := true, true
		if ix != nil {
			same, known = sameIndexKey(*ix, before, imgs[i])
		}
		switch {
		case before == nil || !same:
			dropped++ // not in the copy yet, or not under this index key
			continue
		case filtered || !known:
			kept = append(kept, it) // cannot tell what the copy answers: as it is
			continue
		}
		if indexOnly {
			before = capacity.IndexEntry(t, *ix, before) // not nil: sameIndexKey found its keys
		}
		proj, ok := project(before, in.readShape)
		if !ok {
			return nil, false
		}
		kept = append(kept, ddbstream.EventImage(proj))
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return nil, false
	}
	ans["Items"] = raw
	ans["Count"] = json.RawMessage(strconv.Itoa(len(kept)))
	if rawScanned, ok := ans["ScannedCount"]; ok && dropped > 0 {
		// The copy did not hold the items left out: it did not read them.
		if n, err := strconv.Atoi(string(rawScanned)); err == nil && n >= dropped {
			ans["ScannedCount"] = json.RawMessage(strconv.Itoa(n - dropped))
		}
	}
	b, err := json.Marshal(ans)
	return b, err == nil
}

// sameIndexKey reports whether before sits under the index key the answered
// item has: it holds the index's key attributes (a sparse index holds no
// item without them), equal to the answer's. known is false when the
// answer does not show a key attribute, so that only its absence from
// before can be told.
func sameIndexKey(ix tables.Index, before, answered map[string]types.AttributeValue) (same, known bool) {
	known = true
	for _, k := range []*tables.Key{&ix.PartitionKey, ix.SortKey} {
		if k == nil {
			continue
		}
		b, ok := before[k.Name]
		if !ok {
			return false, true
		}
		a, ok := answered[k.Name]
		if !ok {
			known = false
			continue
		}
		if valueText(a) != valueText(b) {
			return false, true
		}
	}
	return true, known
}

// anyRecent reports whether any write is recent enough for a lagging copy
// not to have it.
func (l *limiter) anyRecent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent) > 0 && time.Since(l.lastWrite) < l.cfg.StaleReads
}

// asOfAll is asOf of each of ids under one lock: the items a copy
// StaleReads behind sees differently, by id.
func (l *limiter) asOfAll(ids []string, now time.Time) map[string]map[string]types.AttributeValue {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]map[string]types.AttributeValue{}
	for _, id := range ids {
		for _, w := range l.recent[id] {
			if now.Sub(w.at) < l.cfg.StaleReads {
				out[id] = w.before
				break
			}
		}
	}
	return out
}

type readShape struct {
	ConsistentRead           bool
	ProjectionExpression     string
	ExpressionAttributeNames map[string]string
	AttributesToGet          []string
}

func (l *limiter) staleGet(ctx context.Context, body, out []byte) ([]byte, bool) {
	var in struct {
		TableName string
		Key       map[string]events.DynamoDBAttributeValue
		readShape
	}
	if json.Unmarshal(body, &in) != nil || in.ConsistentRead {
		return nil, false
	}
	r, err := l.refOf(ctx, "Get", rawAction{TableName: in.TableName, Key: in.Key})
	if err != nil {
		return nil, false
	}
	item, stale := l.asOf(r.id, time.Now())
	if !stale {
		return nil, false
	}
	var ans map[string]json.RawMessage
	if json.Unmarshal(out, &ans) != nil {
		return nil, false
	}
	if item == nil {
		delete(ans, "Item")
	} else {
		proj, ok := project(item, in.readShape)
		if !ok {
			return nil, false
		}
		raw, err := encodeItem(proj)
		if err != nil {
			return nil, false
		}
		ans["Item"] = raw
	}
	b, err := json.Marshal(ans)
	return b, err == nil
}

func (l *limiter) staleBatchGet(ctx context.Context, body, out []byte) ([]byte, bool) {
	var in struct {
		RequestItems map[string]struct {
			Keys []map[string]events.DynamoDBAttributeValue
			readShape
		}
	}
	if json.Unmarshal(body, &in) != nil {
		return nil, false
	}
	var ans map[string]json.RawMessage
	if json.Unmarshal(out, &ans) != nil {
		return nil, false
	}
	var responses map[string][]map[string]events.DynamoDBAttributeValue
	if raw, ok := ans["Responses"]; !ok || json.Unmarshal(raw, &responses) != nil {
		return nil, false
	}
	now, changed := time.Now(), false
	for table, req := range in.RequestItems {
		if req.ConsistentRead {
			continue
		}
		t, err := l.schemas.get(ctx, table)
		if err != nil {
			continue
		}
		stale := map[string]map[string]types.AttributeValue{}
		for _, k := range req.Keys {
			r, err := l.refOf(ctx, "Get", rawAction{TableName: table, Key: k})
			if err != nil {
				continue
			}
			if item, ok := l.asOf(r.id, now); ok {
				stale[r.id] = item
			}
		}
		if len(stale) == 0 {
			continue
		}
		var kept []map[string]events.DynamoDBAttributeValue
		ok := true
		for _, it := range responses[table] {
			img, err := ddbstream.Image(it)
			if err != nil {
				ok = false
				break
			}
			// Matched by the key's text as the request spelled it: a number
			// key written otherwise than DynamoDB prints it ("1.0") is not
			// matched (the product's keys are strings).
			_, id, err := itemKey(t, table, img, "key")
			if err != nil {
				ok = false // projected without its key: cannot be matched
				break
			}
			if _, isStale := stale[id]; !isStale {
				kept = append(kept, it)
			}
		}
		if !ok {
			continue
		}
		for _, item := range stale {
			if item == nil {
				continue
			}
			proj, ok := project(item, req.readShape)
			if !ok {
				return nil, false
			}
			kept = append(kept, ddbstream.EventImage(proj))
		}
		if kept == nil {
			kept = []map[string]events.DynamoDBAttributeValue{}
		}
		responses[table] = kept
		changed = true
	}
	if !changed {
		return nil, false
	}
	raw, err := json.Marshal(responses)
	if err != nil {
		return nil, false
	}
	ans["Responses"] = raw
	b, err := json.Marshal(ans)
	return b, err == nil
}

// project keeps the attributes a read asked for. Only top-level names are
// handled (ok false otherwise).
func project(item map[string]types.AttributeValue, shape readShape) (map[string]types.AttributeValue, bool) {
	var names []string
	switch {
	case shape.ProjectionExpression != "":
		for _, p := range strings.Split(shape.ProjectionExpression, ",") {
			p = strings.TrimSpace(p)
			if p == "" || strings.ContainsAny(p, ".[") {
				return nil, false
			}
			if strings.HasPrefix(p, "#") {
				n, ok := shape.ExpressionAttributeNames[p]
				if !ok {
					return nil, false
				}
				p = n
			}
			names = append(names, p)
		}
	case len(shape.AttributesToGet) > 0:
		names = shape.AttributesToGet
	default:
		return item, true
	}
	out := map[string]types.AttributeValue{}
	for _, n := range names {
		if v, ok := item[n]; ok {
			out[n] = v
		}
	}
	return out, true
}

func encodeItem(item map[string]types.AttributeValue) (json.RawMessage, error) {
	return json.Marshal(ddbstream.EventImage(item))
}
