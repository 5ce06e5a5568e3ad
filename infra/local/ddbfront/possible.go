package ddbfront

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/tables"
)

// An item's possible states. A transaction holds its items for AWS's
// window, and DynamoDB Local may answer it later: a write of its item
// admitted meanwhile does not know the item it will change, since DynamoDB
// Local may apply it before or after each unanswered write of the item, and
// each of those may fail its condition. AWS charges a write by the larger of
// the item before and after it, so the front prices such writes by every item
// they may find. When the item was known as the first of them started (an
// image), and every write since is one whose item after the front computes,
// the item is one of the states that applying any of those writes, in any
// order, to the known item gives. Each write is charged, partition by
// partition, the most any state it may meet costs, and when a later write
// adds states, each write still unanswered is charged what they add to its
// most: never less than AWS charges for the state it meets. Each answer that
// decides a write keeps the states that agree with it (applied, or not); once
// no write of the item is in flight and one state is left, it is the item in
// DynamoDB Local, and the image cache keeps it.
//
// Every write of a followed item joins its states first, so that the writes
// unanswered are charged what it may make of the item. What the front cannot
// follow after that (a write whose answer does not say whether it applied, a
// replayed token, a chain older than imageTTL) ends the following, and the
// writes of the item go back to being priced by a read. A transaction not
// followed on an item holds that item until its answer, not for the window
// only: a write admitted beside it would be priced by a read that may not see
// it (limits.go, unholdFollowedLocked); a transaction freed at its window
// whose item's states end holds it again (dropChain). A write that cannot
// join the states at all (an update the front cannot compute on one of them,
// more than maxPossible states) while such a transaction is among them is
// refused as a conflict, which is stricter than AWS.

// maxPending bounds the unanswered writes one item's states follow (a
// state's applied bits), and maxPossible the states themselves: n writes
// that change the item make up to 2^n states, so maxPossible binds first.
const (
	maxPending  = 8
	maxPossible = 64
)

// possible is what the front knows of an item with writes in flight: the
// states it may be in, and the writes that may still change it.
type possible struct {
	// readAt is when the image the states grew from was read; base is
	// that image.
	readAt time.Time
	base   map[string]types.AttributeValue
	states []possibleState
	// pending are the unanswered writes that change the item, by slot: a
	// state's applied bit i says pending[i] is in it. checks are the
	// unanswered ConditionChecks, which change nothing but are priced by
	// the item too.
	pending [maxPending]*pendingWrite
	checks  []*pendingWrite
}

type possibleState struct {
	item    map[string]types.AttributeValue
	applied uint8
	// sum names item, computed when first needed (summed).
	sum    [sha256.Size]byte
	summed bool
}

// pendingWrite is one unanswered write the states follow, and the most it
// has been charged in each partition.
type pendingWrite struct {
	r             ref
	t             tables.Table
	transactional bool
	most          map[bucketKey]float64
	slot          int // -1 for a ConditionCheck
	// adm is the write's transaction, whose hold of the item may have
	// ended at the window (nil for a single-item write).
	adm *admission
}

// newPossible starts following an item known to be img.
func newPossible(img imageEntry) *possible {
	return &possible{readAt: img.readAt, base: img.item, states: []possibleState{{item: img.item}}}
}

// afterOf is the item a write of r turns old into, if it applies; ok false
// when it cannot be computed. A ConditionCheck leaves the item as it is.
func afterOf(r ref, old map[string]types.AttributeValue) (after map[string]types.AttributeValue, ok bool) {
	switch r.kind {
	case "Put":
		return r.item, true
	case "Delete":
		return nil, true
	case "Update":
		if r.actionsErr != nil {
			return nil, false
		}
		after, err := applyUpdate(old, r.key, r.actions)
		if err != nil {
			return nil, false
		}
		return after, true
	}
	return old, true
}

// priors are the items a write starting now may find.
func (p *possible) priors() []map[string]types.AttributeValue {
	out := make([]map[string]types.AttributeValue, len(p.states))
	for i, s := range p.states {
		out[i] = s.item
	}
	return out
}

// before is an item the item was before a write starting now, to keep for
// the eventually consistent reads (stale.go): never one it never was, and
// never newer than the one the write meets. The state with no unanswered
// write applied is that when it is one item; else the image the states grew
// from.
func (p *possible) before() map[string]types.AttributeValue {
	var found *possibleState
	for i := range p.states {
		s := &p.states[i]
		if s.applied != 0 {
			continue
		}
		if found != nil && !sameItem(found, s) {
			return p.base
		}
		found = s
	}
	if found == nil {
		return p.base
	}
	return found.item
}

// priceOn is what w costs in each partition when it meets old; ok false when
// its item after cannot be computed.
func (w *pendingWrite) priceOn(old map[string]types.AttributeValue) (map[bucketKey]float64, bool) {
	after, ok := afterOf(w.r, old)
	if !ok {
		return nil, false
	}
	out := map[bucketKey]float64{}
	for _, c := range chargesOf(w.t, 0, w.r, old, after, w.transactional) {
		out[c.bucket] += c.units
	}
	return out, true
}

// raise makes w's most at least what meeting old costs, and returns what
// that adds.
func (w *pendingWrite) raise(old map[string]types.AttributeValue) ([]charge, bool) {
	price, ok := w.priceOn(old)
	if !ok {
		return nil, false
	}
	var more []charge
	for b, u := range price {
		if d := u - w.most[b]; d > 0 {
			w.most[b] = u
			more = append(more, charge{bucket: b, units: d})
		}
	}
	return more, true
}

// add follows one more write: w is charged the most any present state costs
// (w.most), the states it and the pending writes make of them join them,
// and each pending write is charged what the new states add to its most
// (debts), each as its state is found. ok false: the item can no longer be
// followed (the caller drops the states, and prices w by the states add
// began with); the debts found until then are owed.
func (p *possible) add(w *pendingWrite) (debts []charge, ok bool) {
	return p.join(w, false)
}

// join is add; dry only says whether w can join, charging and keeping
// nothing of it (the caller gives a copy of the states: fits).
func (p *possible) join(w *pendingWrite, dry bool) (debts []charge, ok bool) {
	if !dry {
		w.most = map[bucketKey]float64{}
	}
	for _, s := range p.states {
		if dry {
			if _, ok := afterOf(w.r, s.item); !ok {
				return nil, false
			}
		} else if _, ok := w.raise(s.item); !ok {
			return nil, false
		}
	}
	w.slot = -1
	if w.r.kind == "ConditionCheck" {
		p.checks = append(p.checks, w)
		return nil, true
	}
	for i, pw := range p.pending {
		if pw == nil {
			w.slot = i
			break
		}
	}
	if w.slot < 0 {
		return nil, false
	}
	p.pending[w.slot] = w
	// Every state already holds every order of the writes before this one;
	// this one applied to each, and then the pending ones it lacks, in any
	// order, gives the rest.
	old := len(p.states)
	var grow func(s possibleState, i int) bool
	grow = func(s possibleState, i int) bool {
		after, ok := afterOf(p.pending[i].r, s.item)
		if !ok {
			return false
		}
		n := possibleState{item: after, applied: s.applied | 1<<i}
		for j := range p.states {
			if p.states[j].applied == n.applied && sameItem(&p.states[j], &n) {
				return true
			}
		}
		if len(p.states) >= maxPossible {
			return false
		}
		p.states = append(p.states, n)
		// The writes still unanswered may meet it.
		for j, pw := range p.pending {
			if !dry && pw != nil && pw != w && n.applied&(1<<j) == 0 {
				more, _ := pw.raise(n.item) // computed as they joined
				debts = append(debts, more...)
			}
		}
		for _, c := range p.checks {
			if !dry {
				more, _ := c.raise(n.item)
				debts = append(debts, more...)
			}
		}
		for j, pw := range p.pending {
			if pw != nil && n.applied&(1<<j) == 0 {
				if !grow(n, j) {
					return false
				}
			}
		}
		return true
	}
	for k := 0; k < old; k++ {
		if !grow(p.states[k], w.slot) {
			return debts, false
		}
	}
	return debts, true
}

// hasFreed says whether a transaction among the unanswered writes has freed
// item id at its window.
func (p *possible) hasFreed(id string) bool {
	for _, w := range p.pending {
		if w != nil && w.adm != nil && w.adm.freed[id] {
			return true
		}
	}
	for _, w := range p.checks {
		if w.adm != nil && w.adm.freed[id] {
			return true
		}
	}
	return false
}

// fits says whether a write of r can join the states: its item after
// computed from each, a slot free, and the states it makes within
// maxPossible. It changes nothing.
func (p *possible) fits(r ref) bool {
	trial := &possible{states: append([]possibleState(nil), p.states...), pending: p.pending}
	_, ok := trial.join(&pendingWrite{r: r}, true)
	return ok
}

// settle keeps the states that agree with w's answer: applied when
// committed, not applied otherwise.
func (p *possible) settle(w *pendingWrite, committed bool) {
	if w.slot < 0 {
		for i, c := range p.checks {
			if c == w {
				p.checks = append(p.checks[:i], p.checks[i+1:]...)
				break
			}
		}
		return
	}
	kept := p.states[:0]
	for _, s := range p.states {
		if (s.applied&(1<<w.slot) != 0) == committed {
			s.applied &^= 1 << w.slot
			kept = append(kept, s)
		}
	}
	p.states = kept
	p.pending[w.slot] = nil
}

// known is the one item the states agree on. The caller makes sure no write
// of the item is in flight: then every state has every answered write
// applied or not as its answer said, and only the orders of the applied
// ones may differ.
func (p *possible) known() (map[string]types.AttributeValue, bool) {
	if len(p.states) == 0 {
		return nil, false
	}
	for i := 1; i < len(p.states); i++ {
		if !sameItem(&p.states[0], &p.states[i]) {
			return nil, false
		}
	}
	return p.states[0].item, true
}

// sameItem says whether a and b hold equal items, typed: a number 5 and a
// string "5" differ, and so does no item from an empty one. Two equal items
// may be told apart (a set's elements in another order), which only keeps a
// state more.
func sameItem(a, b *possibleState) bool {
	if (a.item == nil) != (b.item == nil) {
		return false
	}
	if a.item == nil {
		return true
	}
	an, aok := a.name()
	bn, bok := b.name()
	return aok && bok && bytes.Equal(an, bn)
}

// name is the digest of the state's item, computed once; ok false when the
// item cannot be written out (then it is like no other).
func (s *possibleState) name() ([]byte, bool) {
	if !s.summed {
		b, err := json.Marshal(ddbstream.EventImage(s.item))
		if err != nil {
			return nil, false
		}
		s.sum, s.summed = sha256.Sum256(b), true
	}
	return s.sum[:], true
}
