package ddbfront

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/ddbstream"
)

// Eventually consistent reads. On AWS the answer to an eventually
// consistent read "may not reflect the results of a recently completed write
// operation" (Read consistency, developer guide); DynamoDB Local always
// answers with the item as it is. The front keeps, for StaleReads after each write it saw
// commit, the item as it was before, and answers an eventually consistent
// GetItem or BatchGetItem of it with the item as it was StaleReads ago: a
// copy that has not applied the writes of the last StaleReads yet. Strongly
// consistent reads, transactions, queries and scans see the item as it is.

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
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.recent[id] {
		if now.Sub(w.at) < l.cfg.StaleReads {
			return w.before, true
		}
	}
	return nil, false
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
	}
	if !ok {
		return out
	}
	return rewritten
}

// anyRecent reports whether any write is kept.
func (l *limiter) anyRecent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent) > 0
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
