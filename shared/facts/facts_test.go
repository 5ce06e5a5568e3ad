package facts

import (
	"reflect"
	"strings"
	"testing"
)

func TestReviewKeysRoundTrip(t *testing.T) {
	r := Review{ProductID: "p#1", UserID: "u1", CreatedAt: "2026-11-24T10:00:00.000Z", Version: 12, Rating: 4}
	for _, f := range []Fact{In(r), Out(r)} {
		k, ok := ParseReviewKey(f.Key)
		if !ok || k.Instance != r.Instance() || k.Version != 12 || k.In != (f.Key == In(r).Key) {
			t.Errorf("ParseReviewKey(%q) = %+v, %v", f.Key, k, ok)
		}
	}
	for _, bad := range []string{"order#o1#placed", "review#p#u#c#v0#in", "review#p#u#c#vx#in", "review#p#u#c#v1#up"} {
		if _, ok := ParseReviewKey(bad); ok {
			t.Errorf("ParseReviewKey(%q) accepted", bad)
		}
	}
}

func TestOrderFactsAndMarkerRoundTrip(t *testing.T) {
	o := Order{UserID: "u1", OrderID: "o1", Status: Cancelled, TotalCents: 700,
		Lines: []Line{{ProductID: "p1", Quantity: 2}, {ProductID: "p1", Quantity: 1}, {ProductID: "p2", Quantity: 1}}}
	fs := OfOrder(o)
	if len(fs) != 2 || fs[0].Key != "order#o1#placed" || fs[1].Key != "order#o1#cancelled" {
		t.Fatalf("facts: %+v", fs)
	}
	sum := Effects{}
	for _, f := range fs {
		for it, cs := range f.Effects {
			for c, n := range cs {
				sum.Add(it, c, n)
			}
		}
	}
	want := Effects{{User, "u1"}: {"orderCount": 1, "lifetimeSpendCents": 0}, {Product, "p1"}: {"unitsSold": 0}, {Product, "p2"}: {"unitsSold": 0}}
	if !reflect.DeepEqual(sum, want) {
		t.Errorf("placed+cancelled: %v, want %v", sum, want)
	}
	got, err := DecodeMarker(map[string]typesAV{KeyAttr: strAV(fs[0].Key), EffectsAttr: EncodeEffects(fs[0].Effects)})
	if err != nil || !reflect.DeepEqual(got, fs[0]) {
		t.Errorf("marker round trip: %+v, %v; want %+v", got, err, fs[0])
	}
}

// TestEveryKeyHasAGrantedPrefix: the counters' role may put markers only
// under KeyPrefixes (dynamodb:LeadingKeys); a fact keyed otherwise would be
// refused on AWS, where the local stack enforces no IAM.
func TestEveryKeyHasAGrantedPrefix(t *testing.T) {
	o := Order{UserID: "u1", OrderID: "o1", Status: Cancelled, TotalCents: 1, Lines: []Line{{ProductID: "p1", Quantity: 1}}}
	r := Review{ProductID: "p1", UserID: "u1", CreatedAt: "2026-11-24T10:00:00.000Z", Version: 1, Rating: 5}
	for _, f := range append(OfOrder(o), In(r), Out(r)) {
		ok := false
		for _, p := range KeyPrefixes() {
			ok = ok || strings.HasPrefix(f.Key, p)
		}
		if !ok {
			t.Errorf("fact %q starts with none of %v", f.Key, KeyPrefixes())
		}
	}
}
