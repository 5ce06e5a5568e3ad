package counting

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/facts"
)

type delta struct {
	item  counterKey
	delta map[string]int64
}

// factsOf says which facts one record carries (docs/counters.md, "Facts"):
// an order INSERT its placement, a MODIFY into CANCELLED its cancellation, a
// review INSERT its first version counted in, a MODIFY the old version taken
// out and the new one counted in, a REMOVE the old version taken out. TTL
// removals (archiving) carry none.
func (h *Handler) factsOf(rec events.DynamoDBEventRecord) ([]facts.Fact, error) {
	return RecordFacts(rec, h.deps.Tables.Orders, h.deps.Tables.Reviews)
}

// RecordFacts returns the facts a record of the orders or reviews table
// (physical names given) carries, as the processor derives them.
func RecordFacts(rec events.DynamoDBEventRecord, orders, reviews string) ([]facts.Fact, error) {
	if ddbstream.IsTTLRemoval(rec) {
		return nil, nil
	}
	switch table := ddbstream.TableName(rec); table {
	case orders:
		return orderFacts(rec)
	case reviews:
		return reviewFacts(rec)
	default:
		return nil, fmt.Errorf("record from table %q, which the counters do not follow", table)
	}
}

func orderFacts(rec events.DynamoDBEventRecord) ([]facts.Fact, error) {
	decode := func(img map[string]events.DynamoDBAttributeValue, what string) (facts.Order, error) {
		var o facts.Order
		if err := ddbstream.Decode(img, &o); err != nil {
			return o, fmt.Errorf("order %s image: %w", what, err)
		}
		return o, o.Check()
	}
	switch rec.EventName {
	case "INSERT":
		o, err := decode(rec.Change.NewImage, "new")
		if err != nil {
			return nil, err
		}
		return []facts.Fact{facts.Placed(o)}, nil
	case "MODIFY":
		var before struct {
			Status string `dynamodbav:"status"`
		}
		if err := ddbstream.Decode(rec.Change.OldImage, &before); err != nil {
			return nil, fmt.Errorf("order old image: %w", err)
		}
		after, err := decode(rec.Change.NewImage, "new")
		if err != nil {
			return nil, err
		}
		if before.Status == facts.Cancelled || after.Status != facts.Cancelled {
			return nil, nil
		}
		return []facts.Fact{facts.CancelledFact(after)}, nil
	default:
		return nil, nil // orders are never deleted by users; REMOVE is archiving
	}
}

func reviewFacts(rec events.DynamoDBEventRecord) ([]facts.Fact, error) {
	decode := func(img map[string]events.DynamoDBAttributeValue, what string) (facts.Review, error) {
		var r facts.Review
		if err := ddbstream.Decode(img, &r); err != nil {
			return r, fmt.Errorf("review %s image: %w", what, err)
		}
		return r, r.Check()
	}
	switch rec.EventName {
	case "INSERT":
		after, err := decode(rec.Change.NewImage, "new")
		if err != nil {
			return nil, err
		}
		return []facts.Fact{facts.In(after)}, nil
	case "MODIFY":
		before, err := decode(rec.Change.OldImage, "old")
		if err != nil {
			return nil, err
		}
		after, err := decode(rec.Change.NewImage, "new")
		if err != nil {
			return nil, err
		}
		if before.Instance() != after.Instance() || after.Version <= before.Version {
			return nil, fmt.Errorf("review replaced from %s v%d to %s v%d: not a new version of one instance",
				before.Instance(), before.Version, after.Instance(), after.Version)
		}
		return []facts.Fact{facts.Out(before), facts.In(after)}, nil
	case "REMOVE":
		before, err := decode(rec.Change.OldImage, "old")
		if err != nil {
			return nil, err
		}
		return []facts.Fact{facts.Out(before)}, nil
	}
	return nil, fmt.Errorf("unknown event name %q", rec.EventName)
}

// deltas turns a fact's effects into deltas on physical counter items.
func (h *Handler) deltas(f facts.Fact) []delta {
	out := make([]delta, 0, len(f.Effects))
	for _, it := range f.Effects.Items() {
		table := h.deps.Tables.Users
		if it.Kind == facts.Product {
			table = h.deps.Tables.Products
		}
		out = append(out, delta{counterKey{table, it.ID}, f.Effects[it]})
	}
	return out
}
