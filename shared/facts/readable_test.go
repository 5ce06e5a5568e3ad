package facts

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestReadable: counters that hold no integer of 64 bits are left out and
// named, the rest of the item kept; a product's rating pair is left out
// together when either one is unreadable; an item with none is returned
// as it is.
func TestReadable(t *testing.T) {
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for name, tc := range map[string]struct {
		kind     Kind
		item     map[string]types.AttributeValue
		kept     []string
		left     []string
		unreadOf []string
	}{
		"all readable": {Product, map[string]types.AttributeValue{"unitsSold": n("3"), "reviewCount": n("2"), "ratingTotal": n("9")},
			[]string{"unitsSold", "reviewCount", "ratingTotal"}, nil, nil},
		"text": {Product, map[string]types.AttributeValue{"unitsSold": &types.AttributeValueMemberS{Value: "lots"}, "name": &types.AttributeValueMemberS{Value: "Pan"}},
			[]string{"name"}, []string{"unitsSold"}, []string{"unitsSold"}},
		"past 64 bits": {User, map[string]types.AttributeValue{"orderCount": n("99999999999999999999"), "lifetimeSpendCents": n("5")},
			[]string{"lifetimeSpendCents"}, []string{"orderCount"}, []string{"orderCount"}},
		"a total that is a fraction takes its count": {Product, map[string]types.AttributeValue{"reviewCount": n("5"), "ratingTotal": n("9.5")},
			nil, []string{"reviewCount", "ratingTotal"}, []string{"ratingTotal"}},
		"a count that is text takes its total": {Product, map[string]types.AttributeValue{"reviewCount": &types.AttributeValueMemberS{Value: "x"}, "ratingTotal": n("9")},
			nil, []string{"reviewCount", "ratingTotal"}, []string{"reviewCount"}},
		"a user's reviewCount is its own": {User, map[string]types.AttributeValue{"reviewCount": n("1.5"), "orderCount": n("2")},
			[]string{"orderCount"}, []string{"reviewCount"}, []string{"reviewCount"}},
	} {
		t.Run(name, func(t *testing.T) {
			out, bad := Readable(tc.kind, tc.item)
			for _, k := range tc.kept {
				if _, ok := out[k]; !ok {
					t.Errorf("%s left out, want it kept", k)
				}
			}
			for _, k := range tc.left {
				if _, ok := out[k]; ok {
					t.Errorf("%s kept, want it left out", k)
				}
				if _, ok := tc.item[k]; !ok {
					t.Errorf("%s taken from the item given, want it left as it is", k)
				}
			}
			var names []string
			for _, u := range bad {
				names = append(names, u.Name)
			}
			if len(names) != len(tc.unreadOf) {
				t.Fatalf("named %v, want %v", names, tc.unreadOf)
			}
			for i := range names {
				if names[i] != tc.unreadOf[i] {
					t.Errorf("named %v, want %v", names, tc.unreadOf)
				}
			}
		})
	}
}
