package store

import (
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
)

// TestRestocksStampEveryBucketWithinTheBudget: a cancel puts each product's
// units back in one bucket and stamps all the buckets of a product of
// several with one stamp, while the transaction stays within its budget;
// past it, a product's restock stamps only its own bucket.
func TestRestocksStampEveryBucketWithinTheBudget(t *testing.T) {
	held := int64(3)
	ps := map[string]products.Product{
		"one":     {ProductID: "one", StockBuckets: 1},
		"catalog": {ProductID: "catalog", CatalogStock: &held},
		"four":    {ProductID: "four", StockBuckets: 4},
		"wide":    {ProductID: "wide", StockBuckets: 32},
		"gone":    {ProductID: "gone", StockBuckets: 8},
	}
	lines := []orders.Line{
		{ProductID: "one", Quantity: 1}, {ProductID: "catalog", Quantity: 2}, {ProductID: "four", Quantity: 3},
		{ProductID: "wide", Quantity: 4}, {ProductID: "gone", Quantity: 5}, {ProductID: "four", Quantity: 6},
	}
	gone := map[string]bool{"gone": true}
	for _, tc := range []struct {
		name    string
		budget  int
		stamped map[string]int // buckets stamped a product
	}{
		{"room for all", 99, map[string]int{"four": 4, "wide": 32}},
		{"room for the first", 10, map[string]int{"four": 4, "wide": 1}},
		{"room for none", 4, map[string]int{"four": 1, "wide": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(nil, Config{})
			actions := s.restocks(lines, ps, gone, tc.budget)
			if len(actions) > tc.budget {
				t.Fatalf("%d actions, budget %d", len(actions), tc.budget)
			}
			added := map[string]string{} // key → units added
			stamped := map[string]int{}
			stamps := map[string]bool{}
			for _, a := range actions {
				u := a.Update
				key := "catalog"
				if k, ok := u.Key["bucketId"]; ok {
					key = k.(*types.AttributeValueMemberS).Value
				}
				if v, ok := u.ExpressionAttributeValues[valueOf(u, "units")+valueOf(u, "stock")]; ok {
					added[key] = v.(*types.AttributeValueMemberN).Value
				}
				if v, ok := u.ExpressionAttributeValues[valueOf(u, "at")]; ok {
					stamped[productOf(key)]++
					stamps[v.(*types.AttributeValueMemberN).Value] = true
				}
			}
			units := map[string]string{}
			for k, v := range added {
				units[productOf(k)] = v
			}
			want := map[string]string{"one": "1", "catalog": "2", "four": "9", "wide": "4"}
			if len(units) != len(want) {
				t.Errorf("units added %v, want %v", units, want)
			}
			for id, u := range want {
				if units[id] != u {
					t.Errorf("%s: %q units added, want %q", id, units[id], u)
				}
			}
			if len(stamped) != len(tc.stamped) {
				t.Errorf("stamped %v, want %v", stamped, tc.stamped)
			}
			for id, n := range tc.stamped {
				if stamped[id] != n {
					t.Errorf("%s: %d buckets stamped, want %d", id, stamped[id], n)
				}
			}
			if len(stamps) != 1 {
				t.Errorf("stamps %v, want one", stamps)
			}
		})
	}
}

// valueOf is the placeholder of the value an update expression sets or
// adds to attribute name (SET #n = :v, SET #n = #n + :v, ADD #n :v), or "".
func valueOf(u *types.Update, name string) string {
	for ph, n := range u.ExpressionAttributeNames {
		if n != name {
			continue
		}
		re := regexp.MustCompile(`(?:^|[\s,])` + regexp.QuoteMeta(ph) + `\s*=?\s*(?:#\w+\s*\+\s*)?(:\w+)`)
		if m := re.FindStringSubmatch(aws.ToString(u.UpdateExpression)); m != nil {
			return m[1]
		}
	}
	return ""
}

func productOf(key string) string {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '#' {
			return key[:i]
		}
	}
	return key
}
