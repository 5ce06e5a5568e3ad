package audit

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/shared/facts"
)

// TestMarkersKeepWhatTheAuditNeeds: markers held compactly answer which facts
// are marked, the marked effects per item, and a review fact's effects, as
// the facts themselves would; a review marker of another shape is kept whole.
func TestMarkersKeepWhatTheAuditNeeds(t *testing.T) {
	r := facts.Review{ProductID: "p#1", UserID: "u1", CreatedAt: "2026-11-25T03:00:00.000Z", Version: 2, Rating: 4}
	o := facts.Order{UserID: "u1", OrderID: "o1", Status: facts.Cancelled, TotalCents: 700,
		Lines: []facts.Line{{ProductID: "p#1", Quantity: 2}, {ProductID: "p2", Quantity: 1}}}
	odd := facts.Fact{Key: facts.InKey(r.Instance(), 3), Effects: facts.Effects{{Kind: facts.Product, ID: "p#1"}: {"ratingTotal": 5}}}
	all := append(facts.OfOrder(o), facts.In(r), facts.Out(r), odd)
	m := newMarkers()
	want := map[Item]map[string]int64{}
	for _, f := range all {
		m.add(f)
		m.add(f) // a second reading of one marker changes nothing
		for it, cs := range f.Effects {
			if want[it] == nil {
				want[it] = map[string]int64{}
			}
			for c, n := range cs {
				want[it][c] += n
			}
		}
	}
	for _, f := range all {
		if !m.has(f.Key) {
			t.Errorf("%s: not marked", f.Key)
		}
	}
	if m.has(facts.OutKey(r.Instance(), 3)) || len(m.keys) != len(all) {
		t.Errorf("marked: %v, want exactly %d facts", m.keys, len(all))
	}
	if diff := cmp.Diff(want, m.sums); diff != "" {
		t.Errorf("sums (-want +got):\n%s", diff)
	}
	for _, f := range []facts.Fact{facts.In(r), facts.Out(r), odd} {
		if diff := cmp.Diff(f.Effects, m.effects(f.Key)); diff != "" {
			t.Errorf("%s effects (-want +got):\n%s", f.Key, diff)
		}
	}
	if len(m.reviews) != 2 || len(m.odd) != 1 {
		t.Errorf("got %d compact and %d whole review markers, want 2 and 1", len(m.reviews), len(m.odd))
	}
}

// TestUnreadReviewProvesNothing: a review counted in (its version 1 marked)
// that the table still holds but the audit could not read (a rating stored
// as text by a hand edit) is not taken for gone: no fact is derived for it,
// so a repair leaves its counts as they are. A review the table no longer
// holds is taken out, as before.
func TestUnreadReviewProvesNothing(t *testing.T) {
	r := facts.Review{ProductID: "p1", UserID: "u1", CreatedAt: "2026-11-25T03:00:00.000Z", Version: 1, Rating: 4}
	other := facts.Review{ProductID: "p1", UserID: "u2", CreatedAt: "2026-11-25T04:00:00.000Z", Version: 1, Rating: 2}
	m := newMarkers()
	m.add(facts.In(r))
	m.add(facts.In(other))
	got := reviewFacts(m, map[string]facts.Review{}, map[string]bool{reviewPrefix("p1", "u1"): true})
	if _, ok := got[facts.OutKey(r.Instance(), 1)]; ok {
		t.Errorf("the unread review is taken out: %v", got)
	}
	out, ok := got[facts.OutKey(other.Instance(), 1)]
	if !ok || len(got) != 1 || !cmp.Equal(out.Effects, facts.Out(other).Effects) {
		t.Errorf("facts: %v; want only the gone review taken out, with its effects", got)
	}
}
