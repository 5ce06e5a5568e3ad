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
		held      map[string]int
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
			name:     "a bucket held by another transaction is not drawn again",
			items:    []orders.Item{{ProductID: "a", Quantity: 3}, {ProductID: "b", Quantity: 1}},
			products: map[string]products.Product{"a": {ProductID: "a", StockBuckets: 8}, "b": {ProductID: "b", StockBuckets: 8}},
			held:     map[string]int{"a": 0, "b": 5},
			draw:     func(int) int { return 0 },
			takes:    map[string][]stock.Take{"a": {{Bucket: 1, Units: 3}}, "b": {{Bucket: 0, Units: 1}}},
		},
		{
			name:     "the last of the others drawn past the held bucket",
			items:    []orders.Item{{ProductID: "a", Quantity: 3}},
			products: map[string]products.Product{"a": {ProductID: "a", StockBuckets: 8}},
			held:     map[string]int{"a": 3},
			draw:     func(n int) int { return n - 1 },
			takes:    map[string][]stock.Take{"a": {{Bucket: 7, Units: 3}}},
		},
		{
			name:     "a product of one bucket has no other",
			items:    []orders.Item{{ProductID: "a", Quantity: 3}},
			products: map[string]products.Product{"a": {ProductID: "a", StockBuckets: 1}},
			held:     map[string]int{"a": 0},
			draw:     func(n int) int { return n - 1 },
			takes:    map[string][]stock.Take{"a": {{Bucket: 0, Units: 3}}},
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
			got := planOrder(orderRead{items: tc.items, products: tc.products, buckets: tc.buckets}, orderLessons{wide: tc.wide, held: tc.held, consistent: tc.consist}, draw)
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

// TestHeldBy: a round refused because other transactions held some of its
// decrements' buckets teaches the next round those buckets, and lets it go
// at once only when every action refused was such a decrement, of a
// product planned on one bucket of several.
func TestHeldBy(t *testing.T) {
	ps := map[string]products.Product{
		"a": {ProductID: "a", StockBuckets: 8}, "b": {ProductID: "b", StockBuckets: 8},
		"one": {ProductID: "one", StockBuckets: 1}, "w": {ProductID: "w", StockBuckets: 8},
	}
	// The actions: [0] the order, [1] a's decrement of bucket 2, [2] b's of
	// bucket 6, [3] one's of bucket 0, [4] w's of bucket 1 and [5] of bucket 4.
	decrements := []decrementRef{
		{productID: "a", Take: stock.Take{Bucket: 2, Units: 1}, at: 1},
		{productID: "b", Take: stock.Take{Bucket: 6, Units: 1}, at: 2},
		{productID: "one", Take: stock.Take{Bucket: 0, Units: 1}, at: 3},
		{productID: "w", Take: stock.Take{Bucket: 1, Units: 4}, at: 4},
		{productID: "w", Take: stock.Take{Bucket: 4, Units: 2}, at: 5},
	}
	takes := map[string][]stock.Take{"a": {decrements[0].Take}, "b": {decrements[1].Take}, "one": {decrements[2].Take}, "w": {decrements[3].Take, decrements[4].Take}}
	const (
		no = reasonNone
		cf = reasonConflict
		th = reasonThrottled
	)
	for _, tc := range []struct {
		name      string
		codes     []string
		wide      map[string]bool
		held      map[string]int
		elsewhere bool
	}{
		{"a's bucket held", []string{no, cf, no, no, no, no}, nil, map[string]int{"a": 2}, true},
		{"a's and b's held", []string{no, cf, cf, no, no, no}, nil, map[string]int{"a": 2, "b": 6}, true},
		{"the one bucket of a product held", []string{no, cf, no, cf, no, no}, nil, map[string]int{"a": 2}, false},
		{"a product taken from several buckets", []string{no, no, no, no, cf, no}, nil, nil, false},
		{"a product planned wide", []string{no, cf, no, no, no, no}, map[string]bool{"a": true}, nil, false},
		{"the order's own item held", []string{cf, cf, no, no, no, no}, nil, map[string]int{"a": 2}, false},
		{"a bucket throttled", []string{no, cf, th, no, no, no}, nil, map[string]int{"a": 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := orderLessons{wide: tc.wide, held: map[string]int{"stale": 1}}
			c := &cancellation{codes: tc.codes}
			l.throttled = c.throttled()
			l.heldBy(c, decrements, ps, takes)
			if len(l.held) != len(tc.held) {
				t.Errorf("held %v, want %v", l.held, tc.held)
			}
			for id, b := range tc.held {
				if got, ok := l.held[id]; !ok || got != b {
					t.Errorf("held %v, want %v", l.held, tc.held)
				}
			}
			if l.elsewhere != tc.elsewhere {
				t.Errorf("elsewhere %v, want %v", l.elsewhere, tc.elsewhere)
			}
		})
	}
}
