package store

import (
	"context"

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
		s.cfg.Logger.ErrorContext(ctx, "counter unreadable: shown as none counted until make audit REPAIR=1 sets it",
			key, id, "attribute", u.Name, "holds", u.Holds)
	}
	return out
}
