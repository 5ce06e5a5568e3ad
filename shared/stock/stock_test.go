package stock

import (
	"reflect"
	"testing"
)

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		total int64
		n     int
		want  []int64
	}{
		{0, 1, []int64{0}},
		{10, 1, []int64{10}},
		{10, 3, []int64{4, 3, 3}},
		{2, 4, []int64{1, 1, 0, 0}},
		{100, 32, append(repeat(4, 4), repeat(3, 28)...)},
	} {
		got := Spread(tc.total, tc.n)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Spread(%d, %d) = %v, want %v", tc.total, tc.n, got, tc.want)
		}
		if Sum(got) != tc.total {
			t.Errorf("Spread(%d, %d) sums to %d", tc.total, tc.n, Sum(got))
		}
	}
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		units    []int64
		quantity int64
		start    int
		want     []Take
	}{
		{"one bucket holds it, the draw's", []int64{5, 5}, 3, 1, []Take{{1, 3}}},
		{"the draw's bucket is short, the next holds it", []int64{5, 1, 0}, 3, 1, []Take{{0, 3}}},
		{"no bucket holds it: fullest first", []int64{2, 5, 3}, 7, 0, []Take{{1, 5}, {2, 2}}},
		{"every bucket", []int64{1, 1, 1}, 3, 2, []Take{{0, 1}, {1, 1}, {2, 1}}},
		{"short by one: nothing", []int64{2, 2}, 5, 0, nil},
		{"empty buckets", []int64{0, 0}, 1, 0, nil},
		{"exactly all", []int64{4}, 4, 0, []Take{{0, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.units, tc.quantity, tc.start)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan(%v, %d, %d) = %v, want %v", tc.units, tc.quantity, tc.start, got, tc.want)
			}
			var taken int64
			for _, tk := range got {
				if tk.Units > tc.units[tk.Bucket] {
					t.Errorf("takes %d from bucket %d holding %d", tk.Units, tk.Bucket, tc.units[tk.Bucket])
				}
				taken += tk.Units
			}
			if got != nil && taken != tc.quantity {
				t.Errorf("takes %d, want %d", taken, tc.quantity)
			}
		})
	}
}

func TestStraddles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stamps []Stamp
		n      int
		want   bool
	}{
		{"one bucket, its number", []Stamp{{Of: 1, At: 1}}, 1, false},
		{"one write's buckets", []Stamp{{Of: 3, At: 7}, {Of: 3, At: 7}, {Of: 3, At: 7}}, 3, false},
		{"written before stamps had a number", []Stamp{{At: 7}, {At: 7}}, 2, false},
		{"written before stamps", []Stamp{{}, {}}, 2, false},
		{"a restock's mark on all", []Stamp{{Of: 2, At: 9}, {Of: 2, At: 9}}, 2, false},
		{"either side of a restock", []Stamp{{Of: 2, At: 7}, {Of: 2, At: 9}}, 2, true},
		{"either side of a stamp, the first bucket's newer", []Stamp{{Of: 2, At: 9}, {Of: 2, At: 7}}, 2, true},
		{"a respread the catalog item does not know", []Stamp{{Of: 32, At: 9}}, 1, true},
		{"a catalog item newer than the buckets", []Stamp{{Of: 2, At: 7}, {Of: 2, At: 7}}, 4, true},
		{"a bucket missing beside stamped ones", []Stamp{{Of: 2, At: 7}, {}}, 2, true},
	} {
		if got := Straddles(tc.stamps, tc.n); got != tc.want {
			t.Errorf("%s: Straddles(%v, %d) = %v, want %v", tc.name, tc.stamps, tc.n, got, tc.want)
		}
	}
}
