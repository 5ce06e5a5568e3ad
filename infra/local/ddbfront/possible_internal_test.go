package ddbfront

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var errNotComputed = errors.New("not computed")

// stockRef is an update of item "t\x00a" by expr with the value v.
func stockRef(t *testing.T, expr, v string) ref {
	t.Helper()
	actions, err := parseUpdate(expr, nil, map[string]types.AttributeValue{":v": n(v)})
	if err != nil {
		t.Fatal(err)
	}
	return ref{table: "t", id: "t\x00a", kind: "Update", key: map[string]types.AttributeValue{"pk": s("a")}, actions: actions}
}

// numbers are attribute name's values in items, sorted ("-" for no item).
func numbers(items []map[string]types.AttributeValue, name string) string {
	var out []string
	for _, it := range items {
		if it == nil {
			out = append(out, "-")
			continue
		}
		out = append(out, it[name].(*types.AttributeValueMemberN).Value)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// The states of an item follow its unanswered writes: every order and every
// outcome of them, narrowed by each answer; the item is known again once one
// state is left.
func TestPossibleStatesOfAnItem(t *testing.T) {
	base := map[string]types.AttributeValue{"pk": s("a"), "stock": n("10")}
	type write struct {
		expr, v string
	}
	for _, tc := range []struct {
		name   string
		writes []write
		// priors are the stocks the last write may find.
		priors string
		// outcomes are the answers, in the order given (index into
		// writes, committed).
		outcomes []struct {
			i         int
			committed bool
		}
		// final is the item's stock once all answered ("" when not one
		// state is left).
		final string
	}{
		{name: "one write", writes: []write{{"ADD stock :v", "-3"}}, priors: "10",
			outcomes: []struct {
				i         int
				committed bool
			}{{0, true}}, final: "7"},
		{name: "one write refused", writes: []write{{"ADD stock :v", "-3"}}, priors: "10",
			outcomes: []struct {
				i         int
				committed bool
			}{{0, false}}, final: "10"},
		{name: "two decrements, either order, either outcome", writes: []write{{"ADD stock :v", "-3"}, {"ADD stock :v", "-2"}}, priors: "10 7",
			outcomes: []struct {
				i         int
				committed bool
			}{{1, true}, {0, true}}, final: "5"},
		{name: "three, the middle refused", writes: []write{{"ADD stock :v", "-3"}, {"ADD stock :v", "-2"}, {"ADD stock :v", "-1"}}, priors: "10 5 7 8",
			outcomes: []struct {
				i         int
				committed bool
			}{{0, true}, {1, false}, {2, true}}, final: "6"},
		{name: "two overwrites: the order decides", writes: []write{{"SET stock = :v", "1"}, {"SET stock = :v", "2"}}, priors: "1 10",
			outcomes: []struct {
				i         int
				committed bool
			}{{0, true}, {1, true}}, final: ""},
		{name: "two overwrites, one refused", writes: []write{{"SET stock = :v", "1"}, {"SET stock = :v", "2"}}, priors: "1 10",
			outcomes: []struct {
				i         int
				committed bool
			}{{1, false}, {0, true}}, final: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPossible(imageEntry{item: base, readAt: time.Now()})
			slots := make([]int, len(tc.writes))
			var priors []map[string]types.AttributeValue
			for i, w := range tc.writes {
				priors = p.priors()
				slot, ok := p.add(&pendingWrite{r: stockRef(t, w.expr, w.v)})
				if !ok {
					t.Fatalf("write %d: not followed", i)
				}
				slots[i] = slot
			}
			if got := numbers(priors, "stock"); got != tc.priors {
				t.Errorf("the last write may find stock %q, want %q", got, tc.priors)
			}
			for _, o := range tc.outcomes {
				p.settle(slots[o.i], o.committed)
			}
			item, ok := p.known()
			got := ""
			if ok {
				got = item["stock"].(*types.AttributeValueMemberN).Value
			}
			if got != tc.final {
				t.Errorf("the item once all answered: stock %q (known %v), want %q", got, ok, tc.final)
			}
		})
	}
}

// What the front cannot follow ends the following: an update it cannot
// compute, more states than maxPossible. A ConditionCheck and a replayed transaction change nothing.
func TestPossibleStatesStopWhereTheyCannotBeFollowed(t *testing.T) {
	base := imageEntry{item: map[string]types.AttributeValue{"pk": s("a"), "stock": n("10")}}
	t.Run("an update not computed", func(t *testing.T) {
		p := newPossible(base)
		r := stockRef(t, "ADD stock :v", "1")
		r.actionsErr = errNotComputed
		if _, ok := p.add(&pendingWrite{r: r}); ok {
			t.Fatal("followed an update whose item after is not known")
		}
	})
	t.Run("too many states", func(t *testing.T) {
		p := newPossible(base)
		followed := 0
		for i := range maxPending {
			// Decrements by powers of two: every subset a state.
			if _, ok := p.add(&pendingWrite{r: stockRef(t, "ADD stock :v", "-1"+strings.Repeat("0", i))}); !ok {
				break
			}
			followed++
			if len(p.states) > maxPossible {
				t.Fatalf("%d states, bound %d", len(p.states), maxPossible)
			}
		}
		if followed == maxPending {
			t.Fatalf("followed %d writes of distinct subsets: %d states, bound %d", followed, len(p.states), maxPossible)
		}
	})
	t.Run("a check and a replay", func(t *testing.T) {
		p := newPossible(base)
		check := ref{table: "t", id: "t\x00a", kind: "ConditionCheck"}
		if _, ok := p.add(&pendingWrite{r: check}); !ok {
			t.Fatal("a ConditionCheck not followed")
		}
		if _, ok := p.add(&pendingWrite{r: stockRef(t, "ADD stock :v", "-1"), replay: true}); !ok {
			t.Fatal("a replay not followed")
		}
		if len(p.states) != 1 {
			t.Fatalf("%d states after a check and a replay, want 1", len(p.states))
		}
	})
}

// Two states are one only when their items are equal to the type: a number
// 5 and a string "5" are two, and no item is not an empty one.
func TestStateKeyTellsTypesApart(t *testing.T) {
	keys := map[string]bool{}
	for _, st := range []possibleState{
		{item: map[string]types.AttributeValue{"pk": s("a"), "v": n("5")}},
		{item: map[string]types.AttributeValue{"pk": s("a"), "v": s("5")}},
		{item: map[string]types.AttributeValue{"pk": s("a"), "v": n("5")}, applied: 1},
		{item: nil},
		{item: map[string]types.AttributeValue{}},
	} {
		k, err := stateKey(st)
		if err != nil {
			t.Fatal(err)
		}
		if keys[k] {
			t.Errorf("two states share the key %q", k)
		}
		keys[k] = true
	}
}
