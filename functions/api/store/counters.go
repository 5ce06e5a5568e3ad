package store

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/facts"
)

// readable returns item without those of its counters that do not hold an
// integer (facts.Readable), logging each one it leaves out: a derived count
// that cannot be read is shown as none counted, and the product or user is
// served, rather than a 500 for every page, list and order that reads it.
func (s *Store) readable(ctx context.Context, kind facts.Kind, key, id string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, bad := facts.Readable(kind, item)
	for _, u := range bad {
		if s.unreadable.first(string(kind) + "/" + id + "/" + u.Name) {
			s.cfg.Logger.ErrorContext(ctx, "counter unreadable: shown as none counted until make audit REPAIR=1 sets it",
				key, id, "attribute", u.Name, "holds", u.Holds)
		}
	}
	return out
}

// unreadableLogEvery is how often an instance logs one unreadable counter
// again: a popular product's would otherwise log at every page and list.
const unreadableLogEvery = time.Minute

// logOnce remembers what was logged when, for unreadableLogEvery.
type logOnce struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// first says whether key was not logged within unreadableLogEvery, and
// counts it as logged now.
func (o *logOnce) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if at, ok := o.last[key]; ok && now.Sub(at) < unreadableLogEvery {
		return false
	}
	if o.last == nil || len(o.last) >= catalogCacheSize {
		o.last = map[string]time.Time{}
	}
	o.last[key] = now
	return true
}
