package store

import (
	"slices"
	"testing"

	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/stock"
)

func TestPlanOrder(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	first := func(int) int { return 0 }
	buckets := func(units ...int64) []bucket {
		bs := make([]bucket, len(units))
		for i, u := range units {
			bs[i] = bucket{Index: i, Units: u}
		}
		return bs
	}
	for _, tc := range []struct {
		name      string
		items     []orders.Item
		products  map[string]products.Product
		buckets   map[string][]bucket
		wide      map[string]bool
		consist   bool
		draw      func(int) int
		takes     map[string][]stock.Take
		gone      []string
		short     []string
		readAgain bool
	}{
		{
			name:     "one bucket drawn, not read",
			items:    []orders.Item{{ProductID: "a", Quantity: 3}},
			products: map[string]products.Product{"a": {ProductID: "a", StockBuckets: 4}},
			draw:     func(n int) int { return n - 1 },
			takes:    map[string][]stock.Take{"a": {{Bucket: 3, Units: 3}}},
		},
		{
			name:     "a catalog item's own stock (shape 1)",
			items:    []orders.Item{{ProductID: "a", Quantity: 2}},
			products: map[string]products.Product{"a": {ProductID: "a", CatalogStock: i64(5)}},
			takes:    map[string][]stock.Take{"a": {{Bucket: onCatalog, Units: 2}}},
		},
		{
			name:     "wide: over the buckets as read",
			items:    []orders.Item{{ProductID: "a", Quantity: 6}},
			products: map[string]products.Product{"a": {ProductID: "a", StockBuckets: 3}},
			buckets:  map[string][]bucket{"a": buckets(0, 5, 3)},
			wide:     map[string]bool{"a": true},
			takes:    map[string][]stock.Take{"a": stock.Plan([]int64{0, 5, 3}, 6, 0)},
		},
		{
			name:     "wide and short",
			items:    []orders.Item{{ProductID: "a", Quantity: 3}},
			products: map[string]products.Product{"a": {ProductID: "a", StockBuckets: 2}},
			buckets:  map[string][]bucket{"a": buckets(1, 1)},
			wide:     map[string]bool{"a": true},
			takes:    map[string][]stock.Take{"a": nil},
			short:    []string{"a"},
		},
		{
			name:     "the catalog item's stock last, as the bucket after the others",
			items:    []orders.Item{{ProductID: "a", Quantity: 5}},
			products: map[string]products.Product{"a": {ProductID: "a", CatalogStock: i64(4)}},
			buckets:  map[string][]bucket{"a": buckets(1)},
			wide:     map[string]bool{"a": true},
			takes:    map[string][]stock.Take{"a": {{Bucket: 0, Units: 1}, {Bucket: onCatalog, Units: 4}}},
		},
		{
			name:      "short by a catalog item's stock read eventually consistent: read again",
			items:     []orders.Item{{ProductID: "a", Quantity: 5}},
			products:  map[string]products.Product{"a": {ProductID: "a", CatalogStock: i64(4)}},
			buckets:   map[string][]bucket{"a": buckets(0)},
			wide:      map[string]bool{"a": true},
			takes:     map[string][]stock.Take{"a": nil},
			readAgain: true,
		},
		{
			name:     "short by a catalog item's stock read consistently",
			items:    []orders.Item{{ProductID: "a", Quantity: 5}},
			products: map[string]products.Product{"a": {ProductID: "a", CatalogStock: i64(4)}},
			buckets:  map[string][]bucket{"a": buckets(0)},
			wide:     map[string]bool{"a": true},
			consist:  true,
			takes:    map[string][]stock.Take{"a": nil},
			short:    []string{"a"},
		},
		{
			name:     "a product gone is named, with the short ones",
			items:    []orders.Item{{ProductID: "a", Quantity: 5}, {ProductID: "b", Quantity: 1}, {ProductID: "c", Quantity: 9}},
			products: map[string]products.Product{"a": {ProductID: "a", CatalogStock: i64(4)}, "c": {ProductID: "c", StockBuckets: 1}},
			buckets:  map[string][]bucket{"a": buckets(0), "c": buckets(2)},
			wide:     map[string]bool{"a": true, "c": true},
			takes:    map[string][]stock.Take{"a": nil, "c": nil},
			gone:     []string{"b"},
			short:    []string{"c"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			draw := tc.draw
			if draw == nil {
				draw = first
			}
			got := planOrder(orderRead{items: tc.items, products: tc.products, buckets: tc.buckets}, orderLessons{wide: tc.wide, consistent: tc.consist}, draw)
			if !equalTakes(got.takes, tc.takes) {
				t.Errorf("takes: got %v, want %v", got.takes, tc.takes)
			}
			if !equalStrings(got.gone, tc.gone) || !equalStrings(got.short, tc.short) || got.readAgain != tc.readAgain {
				t.Errorf("got gone %v, short %v, readAgain %v; want %v, %v, %v", got.gone, got.short, got.readAgain, tc.gone, tc.short, tc.readAgain)
			}
		})
	}
}

// equalTakes compares takes in any order.
func equalTakes(a, b map[string][]stock.Take) bool {
	if len(a) != len(b) {
		return false
	}
	byBucket := func(ts []stock.Take) []stock.Take {
		out := slices.Clone(ts)
		slices.SortFunc(out, func(x, y stock.Take) int { return x.Bucket - y.Bucket })
		return out
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || len(x) != len(y) {
			return false
		}
		x, y = byBucket(x), byBucket(y)
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
