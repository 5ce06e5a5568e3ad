package store

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// productCounters and userCounters are the attributes the counters
// processor keeps on catalog items and users: derived, and repairable from
// their markers (make audit REPAIR=1).
var (
	productCounters = []string{"reviewCount", "ratingTotal", "unitsSold"}
	userCounters    = []string{"orderCount", "lifetimeSpendCents", "reviewCount"}
)

// readable returns item without those of counters that do not hold an
// integer of 64 bits (written by hand, or by a tool outside the product),
// logging each one that it leaves out: a derived count that cannot be read
// is shown as none counted, and the product or user is served, rather than
// a 500 for every page, list and order that reads it. item itself is left
// as it is.
func (s *Store) readable(ctx context.Context, key, id string, item map[string]types.AttributeValue, counters []string) map[string]types.AttributeValue {
	var out map[string]types.AttributeValue
	for _, name := range counters {
		v, ok := item[name]
		if !ok {
			continue
		}
		if n, isN := v.(*types.AttributeValueMemberN); isN {
			if _, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
				continue
			}
		}
		if out == nil {
			out = maps.Clone(item)
		}
		delete(out, name)
		s.cfg.Logger.ErrorContext(ctx, "counter unreadable: shown as none counted until make audit REPAIR=1 sets it",
			key, id, "attribute", name, "holds", held(v))
	}
	if out == nil {
		return item
	}
	return out
}

// held describes an attribute value for a log line.
func held(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		return "N " + v.Value
	case *types.AttributeValueMemberS:
		return "S " + strconv.Quote(v.Value)
	default:
		return fmt.Sprintf("%T", v)
	}
}
