package stock

import (
	"reflect"
	"testing"
	"time"
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

func TestHoldRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 19, 0, 0, 123e6, time.UTC)
	for _, h := range []Hold{
		{At: at, Units: 1, OrderID: "01JDQ7W0000000000000000000", UserID: "alice"},
		{At: at, Units: 1000, OrderID: "o", UserID: "user with spaces"},
	} {
		got, err := ParseHold(h.String())
		if err != nil || got != h {
			t.Errorf("ParseHold(%q) = %+v, %v; want %+v", h.String(), got, err, h)
		}
	}
}

func TestParseHoldRefuses(t *testing.T) {
	for _, s := range []string{"", "1 2 o", "x 1 o u", "1 0 o u", "1 -2 o u", "1 z o u", "1 1  u", "1 1 o "} {
		if h, err := ParseHold(s); err == nil {
			t.Errorf("ParseHold(%q) = %+v, want an error", s, h)
		}
	}
}

func TestHeldCountsOnlyFreshHolds(t *testing.T) {
	now := time.Date(2026, 11, 25, 19, 0, 0, 0, time.UTC)
	fresh := Hold{At: now.Add(-time.Second), Units: 3, OrderID: "a", UserID: "u"}.String()
	edge := Hold{At: now.Add(-OrderWindow + time.Millisecond), Units: 4, OrderID: "b", UserID: "u"}.String()
	decided := Hold{At: now.Add(-OrderWindow), Units: 5, OrderID: "c", UserID: "u"}.String()
	for _, tc := range []struct {
		set  []string
		want int64
	}{
		{nil, 0},
		{[]string{fresh}, 3},
		{[]string{fresh, edge}, 7},
		{[]string{fresh, decided}, 3},
		{[]string{"garbage", edge}, 4},
	} {
		if got := Held(tc.set, now); got != tc.want {
			t.Errorf("Held(%v) = %d, want %d", tc.set, got, tc.want)
		}
	}
	staleEdge := Hold{At: now.Add(-StaleAfter + time.Millisecond)}
	if !(Hold{At: now.Add(-StaleAfter)}).Stale(now) || staleEdge.Stale(now) || mustParse(t, decided).Stale(now) {
		t.Errorf("a hold is stale from StaleAfter on, not before")
	}
}

func mustParse(t *testing.T, s string) Hold {
	t.Helper()
	h, err := ParseHold(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
