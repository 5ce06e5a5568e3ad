package facts

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Counters lists the counters of each kind of counter item, as stored (a
// product's rating average is ratingTotal / reviewCount).
var Counters = map[Kind][]string{
	User:    {"orderCount", "lifetimeSpendCents", "reviewCount"},
	Product: {"reviewCount", "ratingTotal", "unitsSold"},
}

// Unreadable is a counter that does not hold an integer of 64 bits.
type Unreadable struct {
	Name  string
	Holds string // the attribute's type and value, for a log line
}

// Readable returns item without those of its kind's counters that do not
// hold an integer of 64 bits (written by hand, or by a tool outside the
// product), and names them: the item can then be read as if none had been
// counted, while make audit REPAIR=1 sets them from their markers (a
// product's rating pair goes together). item itself is left as it is.
func Readable(kind Kind, item map[string]types.AttributeValue) (map[string]types.AttributeValue, []Unreadable) {
	var out map[string]types.AttributeValue
	var bad []Unreadable
	for _, name := range Counters[kind] {
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
		bad = append(bad, Unreadable{Name: name, Holds: held(v)})
	}
	if out == nil {
		return item, nil
	}
	// A product's rating average is ratingTotal / reviewCount: with either
	// unreadable, neither is shown (an average of 0 stars from a count
	// alone, or a total over no count, would be a rating nobody gave).
	if kind == Product {
		_, total := out["ratingTotal"]
		_, count := out["reviewCount"]
		if total != count {
			delete(out, "ratingTotal")
			delete(out, "reviewCount")
		}
	}
	return out, bad
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
