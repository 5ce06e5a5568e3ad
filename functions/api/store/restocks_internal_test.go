package store

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
)

// TestRestocksGiveEachProductBackOnce: a cancel gives each product's units
// back in one action, into one of its buckets (or its catalog item's stock,
// shape 1), lines naming one product summed (a transaction takes one action
// an item), products gone left out, and writes no other bucket: a cancel
// that wrote every bucket would meet every sale of the product.
func TestRestocksGiveEachProductBackOnce(t *testing.T) {
	held := int64(3)
	ps := map[string]products.Product{
		"one":     {ProductID: "one", StockBuckets: 1},
		"catalog": {ProductID: "catalog", CatalogStock: &held},
		"eight":   {ProductID: "eight", StockBuckets: 8},
		"gone":    {ProductID: "gone", StockBuckets: 8},
	}
	lines := []orders.Line{
		{ProductID: "one", Quantity: 1}, {ProductID: "catalog", Quantity: 2}, {ProductID: "eight", Quantity: 3},
		{ProductID: "gone", Quantity: 5}, {ProductID: "eight", Quantity: 6},
	}
	s := New(nil, Config{})
	for range 20 {
		actions := s.restocks(lines, ps, map[string]bool{"gone": true})
		got := map[string]int{}
		for _, a := range actions {
			u := a.Update
			switch k := u.Key["bucketId"].(type) {
			case *types.AttributeValueMemberS:
				id := k.Value[:len(k.Value)-2]
				if k.Value[len(k.Value)-2] != '#' {
					t.Fatalf("bucket key %q", k.Value)
				}
				got[id]++
			default:
				got[u.Key["productId"].(*types.AttributeValueMemberS).Value]++
			}
		}
		want := map[string]int{"one": 1, "catalog": 1, "eight": 1}
		if len(got) != len(want) {
			t.Fatalf("actions by product %v, want %v", got, want)
		}
		for id, n := range want {
			if got[id] != n {
				t.Fatalf("actions by product %v, want %v", got, want)
			}
		}
	}
}
