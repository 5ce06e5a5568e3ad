package ddbfront

import (
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/ddbstream"
)

// An item's possible states. A write that starts while other writes of its
// item are unanswered does not know the item it will change: DynamoDB Local
// may apply it before or after each of them, and each may fail its
// condition. AWS charges a write by the larger of the item before and after
// it, so the front prices such a write by every item it could find: when the
// item was known as the first of them started (an image), and every write
// since is one whose item after the front computes, the item is one of the
// states that applying any of those writes, in any order, to the known item
// gives. The write is charged, partition by partition, the most any of them
// costs, which is never less than what AWS charges for the one it meets.
// Each answer that decides a write keeps the states that agree with it
// (applied, or not); once no write of the item is unanswered and one state
// is left, it is the item in DynamoDB Local, and the image cache keeps it.
// Anything the front cannot follow (an update it cannot compute, a write
// whose outcome it will not learn, too many states) forgets the item's
// states: the next writes read the item, as before.

// maxPending bounds the unanswered writes one item's states follow (a
// state's applied bits), and maxPossible the states themselves: n writes
// that change the item make up to 2^n states, so maxPossible binds first
// (a ConditionCheck or a replay changes nothing and takes no slot).
const (
	maxPending  = 8
	maxPossible = 64
)

// possible is what the front knows of an item with writes in flight: the
// states it may be in, and the writes that may still change it.
type possible struct {
	// readAt is when the image the states grew from was read (imageTTL
	// applies to the image the last answer leaves).
	readAt time.Time
	states []possibleState
	// pending are the unanswered writes, by slot; a state's applied bit i
	// says pending[i] is in it.
	pending [maxPending]*pendingWrite
}

type possibleState struct {
	item    map[string]types.AttributeValue
	applied uint8
}

type pendingWrite struct {
	r      ref
	replay bool // a transaction answered again without being applied
}

// newPossible starts following an item known to be img.
func newPossible(img imageEntry) *possible {
	return &possible{readAt: img.readAt, states: []possibleState{{item: img.item}}}
}

// afterOf is the item a write of r turns old into, if it applies; ok false
// when it cannot be computed. A ConditionCheck and a replayed transaction
// leave the item as it is.
func afterOf(r ref, old map[string]types.AttributeValue, replay bool) (after map[string]types.AttributeValue, ok bool) {
	if replay {
		return old, true
	}
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

// latest is the state with every unanswered write applied: the item a write
// starting now finds if it is applied last, as the item before it that
// eventually consistent reads keep (stale.go).
func (p *possible) latest() map[string]types.AttributeValue {
	var all uint8
	for i, w := range p.pending {
		if w != nil {
			all |= 1 << i
		}
	}
	for _, s := range p.states {
		if s.applied == all {
			return s.item
		}
	}
	return p.states[len(p.states)-1].item
}

// add follows one more write: the states it may find stay, and the states it
// and the writes still pending make of them join them. It returns the
// write's slot, or false when the item can no longer be followed.
func (p *possible) add(w *pendingWrite) (int, bool) {
	if w.replay || w.r.kind == "ConditionCheck" {
		return -1, true
	}
	slot := -1
	for i, pw := range p.pending {
		if pw == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		return 0, false
	}
	p.pending[slot] = w
	seen := make(map[string]bool, 2*len(p.states))
	for _, s := range p.states {
		k, err := stateKey(s)
		if err != nil {
			return 0, false
		}
		seen[k] = true
	}
	// Every state already holds every order of the writes before this one;
	// this one applied to each, and then the pending ones it lacks, in any
	// order, gives the rest.
	frontier := append([]possibleState(nil), p.states...)
	var grow func(s possibleState, i int) bool
	grow = func(s possibleState, i int) bool {
		after, ok := afterOf(p.pending[i].r, s.item, p.pending[i].replay)
		if !ok {
			return false
		}
		n := possibleState{item: after, applied: s.applied | 1<<i}
		k, err := stateKey(n)
		if err != nil {
			return false
		}
		if seen[k] {
			return true
		}
		if len(p.states) >= maxPossible {
			return false
		}
		seen[k] = true
		p.states = append(p.states, n)
		for j, pw := range p.pending {
			if pw != nil && n.applied&(1<<j) == 0 {
				if !grow(n, j) {
					return false
				}
			}
		}
		return true
	}
	for _, s := range frontier {
		if !grow(s, slot) {
			return 0, false
		}
	}
	return slot, true
}

// settle keeps the states that agree with the answer of the write in slot
// (-1: one that changes nothing): applied when committed, not applied
// otherwise.
func (p *possible) settle(slot int, committed bool) {
	if slot < 0 {
		return
	}
	kept := p.states[:0]
	for _, s := range p.states {
		if (s.applied&(1<<slot) != 0) == committed {
			s.applied &^= 1 << slot
			kept = append(kept, s)
		}
	}
	p.states = kept
	p.pending[slot] = nil
}

// known is the one item the states agree on, once no write is pending.
func (p *possible) known() (map[string]types.AttributeValue, bool) {
	if len(p.states) == 0 {
		return nil, false
	}
	first, err := stateKey(possibleState{item: p.states[0].item})
	if err != nil {
		return nil, false
	}
	for _, s := range p.states[1:] {
		if k, err := stateKey(possibleState{item: s.item}); err != nil || k != first {
			return nil, false
		}
	}
	return p.states[0].item, true
}

// stateKey names a state: its applied writes and its item. Two items with
// one key are equal; two equal items may have two keys (a set's elements in
// another order), which only keeps a state more.
func stateKey(s possibleState) (string, error) {
	if s.item == nil {
		return string([]byte{s.applied}) + "-", nil // no item
	}
	b, err := json.Marshal(ddbstream.EventImage(s.item)) // typed: {"N":"5"} is not {"S":"5"}
	if err != nil {
		return "", err
	}
	return string([]byte{s.applied}) + string(b), nil
}
