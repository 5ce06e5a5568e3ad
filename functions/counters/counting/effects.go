package counting

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/shared/ddbstream"
)

type delta struct {
	item  counterKey
	delta map[string]int64
}

type orderImage struct {
	UserID     string `dynamodbav:"userId"`
	Status     string `dynamodbav:"status"`
	TotalCents int64  `dynamodbav:"totalCents"`
	Lines      []struct {
		ProductID string `dynamodbav:"productId"`
		Quantity  int64  `dynamodbav:"quantity"`
	} `dynamodbav:"lines"`
}

type reviewImage struct {
	ProductID string `dynamodbav:"productId"`
	UserID    string `dynamodbav:"userId"`
	Rating    int64  `dynamodbav:"rating"`
}

// effects says what one record does to which counter items. TTL removals
// (archiving) do nothing.
func (h *Handler) effects(rec events.DynamoDBEventRecord) ([]delta, error) {
	if ddbstream.IsTTLRemoval(rec) {
		return nil, nil
	}
	switch table := ddbstream.TableName(rec); table {
	case h.deps.Tables.Orders:
		return h.orderEffects(rec)
	case h.deps.Tables.Reviews:
		return h.reviewEffects(rec)
	default:
		return nil, fmt.Errorf("record from table %q, which the counters do not follow", table)
	}
}

func (h *Handler) orderEffects(rec events.DynamoDBEventRecord) ([]delta, error) {
	var sign int64
	var img map[string]events.DynamoDBAttributeValue
	switch rec.EventName {
	case "INSERT":
		sign, img = 1, rec.Change.NewImage
	case "MODIFY":
		var before, after orderImage
		if err := ddbstream.Decode(rec.Change.OldImage, &before); err != nil {
			return nil, fmt.Errorf("order old image: %w", err)
		}
		if err := ddbstream.Decode(rec.Change.NewImage, &after); err != nil {
			return nil, fmt.Errorf("order new image: %w", err)
		}
		if before.Status == "CANCELLED" || after.Status != "CANCELLED" {
			return nil, nil
		}
		sign, img = -1, rec.Change.NewImage
	default:
		return nil, nil // orders are never deleted by users; REMOVE is archiving
	}
	var o orderImage
	if err := ddbstream.Decode(img, &o); err != nil {
		return nil, fmt.Errorf("order image: %w", err)
	}
	if o.UserID == "" || len(o.Lines) == 0 {
		return nil, fmt.Errorf("order image without user or lines")
	}
	user := map[string]int64{"lifetimeSpendCents": sign * o.TotalCents}
	if sign > 0 {
		user["orderCount"] = 1
	}
	out := []delta{{counterKey{h.deps.Tables.Users, o.UserID}, user}}
	units := map[string]int64{}
	var order []string
	for _, l := range o.Lines {
		if l.ProductID == "" || l.Quantity <= 0 {
			return nil, fmt.Errorf("order line without product or quantity")
		}
		if _, seen := units[l.ProductID]; !seen {
			order = append(order, l.ProductID)
		}
		units[l.ProductID] += l.Quantity
	}
	for _, p := range order {
		out = append(out, delta{counterKey{h.deps.Tables.Products, p}, map[string]int64{"unitsSold": sign * units[p]}})
	}
	return out, nil
}

func (h *Handler) reviewEffects(rec events.DynamoDBEventRecord) ([]delta, error) {
	var before, after reviewImage
	if rec.Change.OldImage != nil {
		if err := ddbstream.Decode(rec.Change.OldImage, &before); err != nil {
			return nil, fmt.Errorf("review old image: %w", err)
		}
	}
	if rec.Change.NewImage != nil {
		if err := ddbstream.Decode(rec.Change.NewImage, &after); err != nil {
			return nil, fmt.Errorf("review new image: %w", err)
		}
	}
	valid := func(r reviewImage) error {
		if r.ProductID == "" || r.UserID == "" || r.Rating < 1 || r.Rating > 5 {
			return fmt.Errorf("review image without product, user or a rating in 1..5")
		}
		return nil
	}
	switch rec.EventName {
	case "INSERT":
		if err := valid(after); err != nil {
			return nil, err
		}
		return []delta{
			{counterKey{h.deps.Tables.Users, after.UserID}, map[string]int64{"reviewCount": 1}},
			{counterKey{h.deps.Tables.Products, after.ProductID}, map[string]int64{"reviewCount": 1, "ratingTotal": after.Rating}},
		}, nil
	case "MODIFY":
		if err := valid(before); err != nil {
			return nil, err
		}
		if err := valid(after); err != nil {
			return nil, err
		}
		if after.Rating == before.Rating {
			return nil, nil
		}
		return []delta{{counterKey{h.deps.Tables.Products, after.ProductID}, map[string]int64{"ratingTotal": after.Rating - before.Rating}}}, nil
	case "REMOVE":
		if err := valid(before); err != nil {
			return nil, err
		}
		return []delta{
			{counterKey{h.deps.Tables.Users, before.UserID}, map[string]int64{"reviewCount": -1}},
			{counterKey{h.deps.Tables.Products, before.ProductID}, map[string]int64{"reviewCount": -1, "ratingTotal": -before.Rating}},
		}, nil
	}
	return nil, fmt.Errorf("unknown event name %q", rec.EventName)
}
