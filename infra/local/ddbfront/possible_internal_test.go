package ddbfront

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
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

// stockTable is the table of stockRef's item: its key only.
var stockTable = tables.Table{Name: "t", PartitionKey: tables.Key{Name: "pk"}}

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
			ws := make([]*pendingWrite, len(tc.writes))
			var priors []map[string]types.AttributeValue
			for i, w := range tc.writes {
				priors = p.priors()
				ws[i] = &pendingWrite{r: stockRef(t, w.expr, w.v), t: stockTable}
				if _, ok := p.add(ws[i]); !ok {
					t.Fatalf("write %d: not followed", i)
				}
			}
			if got := numbers(priors, "stock"); got != tc.priors {
				t.Errorf("the last write may find stock %q, want %q", got, tc.priors)
			}
			for _, o := range tc.outcomes {
				p.settle(ws[o.i], o.committed)
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
// compute, more states than maxPossible. A ConditionCheck changes nothing.
func TestPossibleStatesStopWhereTheyCannotBeFollowed(t *testing.T) {
	base := imageEntry{item: map[string]types.AttributeValue{"pk": s("a"), "stock": n("10")}}
	t.Run("an update not computed", func(t *testing.T) {
		p := newPossible(base)
		r := stockRef(t, "ADD stock :v", "1")
		r.actionsErr = errNotComputed
		if _, ok := p.add(&pendingWrite{r: r, t: stockTable}); ok {
			t.Fatal("followed an update whose item after is not known")
		}
	})
	t.Run("too many states", func(t *testing.T) {
		p := newPossible(base)
		followed := 0
		for i := range maxPending {
			// Decrements by powers of ten: every subset a state.
			if _, ok := p.add(&pendingWrite{r: stockRef(t, "ADD stock :v", "-1"+strings.Repeat("0", i)), t: stockTable}); !ok {
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
	t.Run("a check", func(t *testing.T) {
		p := newPossible(base)
		check := &pendingWrite{r: ref{table: "t", id: "t\x00a", kind: "ConditionCheck"}, t: stockTable}
		if _, ok := p.add(check); !ok {
			t.Fatal("a ConditionCheck not followed")
		}
		if len(p.states) != 1 || len(p.checks) != 1 {
			t.Fatalf("%d states and %d checks after a check, want 1 and 1", len(p.states), len(p.checks))
		}
		p.settle(check, true)
		if len(p.states) != 1 || len(p.checks) != 0 {
			t.Fatalf("%d states and %d checks after its answer, want 1 and 0", len(p.states), len(p.checks))
		}
	})
}

// Two states are one only when their items are equal to the type: a number
// 5 and a string "5" are two, and no item is not an empty one.
func TestSameItemTellsTypesApart(t *testing.T) {
	items := []map[string]types.AttributeValue{
		{"pk": s("a"), "v": n("5")},
		{"pk": s("a"), "v": s("5")},
		nil,
		{},
	}
	for i, a := range items {
		for j, b := range items {
			x, y := possibleState{item: a}, possibleState{item: b}
			if got := sameItem(&x, &y); got != (i == j) {
				t.Errorf("items %d and %d: same %v, want %v", i, j, got, i == j)
			}
		}
	}
}

// A write unanswered when a later one is admitted may meet that one's item
// (DynamoDB Local, or the gate before it, may take the later first): it is
// charged what the later write's item adds to its most. And the item kept as
// "before" a write, for the eventually consistent reads, is one the item
// really was and never newer than the one the write meets.
func TestLaterWritesRaiseAnUnansweredOnesPrice(t *testing.T) {
	key := map[string]types.AttributeValue{"pk": s("a")}
	small := map[string]types.AttributeValue{"pk": s("a"), "v": n("0")}
	big := map[string]types.AttributeValue{"pk": s("a"), "body": s(strings.Repeat("x", 10_000))}
	p := newPossible(imageEntry{item: small})
	update := &pendingWrite{r: stockRef(t, "SET v = :v", "1"), t: stockTable}
	if debts, ok := p.add(update); !ok || len(debts) != 0 {
		t.Fatalf("the first write: followed %v, debts %v", ok, debts)
	}
	units := func(w *pendingWrite) float64 {
		sum := 0.0
		for _, u := range w.most {
			sum += u
		}
		return sum
	}
	if got := units(update); got != 1 {
		t.Fatalf("the update of a small item charged %v, want 1", got)
	}
	put := &pendingWrite{r: ref{table: "t", id: "t\x00a", kind: "Put", key: key, item: big}, t: stockTable, transactional: true}
	debts, ok := p.add(put)
	if !ok {
		t.Fatal("the Put not followed")
	}
	if got := units(put); got != 20 {
		t.Errorf("the transaction's Put of 10 KB charged %v, want 20", got)
	}
	owed := 0.0
	for _, d := range debts {
		owed += d.units
	}
	if owed != 9 || units(update) != 10 {
		t.Errorf("the update, which may meet the 10 KB item: owes %v more (most %v), want 9 (most 10)", owed, units(update))
	}
	v := func(it map[string]types.AttributeValue) string {
		if n, ok := it["v"].(*types.AttributeValueMemberN); ok {
			return n.Value
		}
		return "none"
	}
	if got := v(p.before()); got != "0" {
		t.Errorf("before a third write: v %s, want 0 (no unanswered write applied)", got)
	}
	p.settle(update, false)
	if got := v(p.before()); got != "0" {
		t.Errorf("before a third write, the update refused: v %s, want 0 (the Put unanswered)", got)
	}
	p.settle(put, true)
	if got, ok := p.known(); !ok || got["body"] == nil {
		t.Errorf("after both answers: %v (known %v), want the Put's item", got, ok)
	}
}

// The writes whose answer does not say whether they applied are not
// followed: a batch's, a BatchExecuteStatement's statements, a transaction
// sent again with its token. The others are, and a transaction's holds are
// its admission's.
func TestWhichWritesAreFollowed(t *testing.T) {
	for _, tc := range []struct {
		adm    admission
		tx     bool
		follow bool
	}{
		{admission{op: "PutItem"}, false, true},
		{admission{op: "ExecuteStatement"}, false, true},
		{admission{op: "TransactWriteItems"}, true, true},
		{admission{op: "ExecuteTransaction"}, true, true},
		{admission{op: "BatchWriteItem"}, false, false},
		{admission{op: "BatchExecuteStatement"}, false, false},
		{admission{op: "TransactWriteItems", replay: true}, true, false},
	} {
		f := followingFor(&tc.adm, nil, tc.tx)
		if f.follow != tc.follow {
			t.Errorf("%s (replay %v): followed %v, want %v", tc.adm.op, tc.adm.replay, f.follow, tc.follow)
		}
		if f.refusable != (tc.adm.op != "BatchWriteItem") {
			t.Errorf("%s: refusable %v, want only a BatchWriteItem's writes never refused", tc.adm.op, f.refusable)
		}
		if (f.adm != nil) != tc.tx {
			t.Errorf("%s: holds given back by a dropped chain %v, want %v", tc.adm.op, f.adm != nil, tc.tx)
		}
	}
}

// A transaction frees at its window only the items it is followed on; when
// an item's states stop being followed (here a batch writes it), the
// transaction holds that item again until its answer.
func TestADroppedChainHoldsItsTransactionsItemAgain(t *testing.T) {
	now := time.Now()
	l := &limiter{txItems: map[string]int{}, writes: map[string]int{}}
	followedID, coldID := "t\x00a", "t\x00b"
	l.imgs = map[string]imageEntry{followedID: {item: map[string]types.AttributeValue{"pk": s("a"), "stock": n("1")}, readAt: now}}
	cold := stockRef(t, "ADD stock :v", "-1")
	cold.id, cold.key = coldID, map[string]types.AttributeValue{"pk": s("b")}
	adm := &admission{l: l, start: now, held: true, txIDs: []string{followedID, coldID}}
	l.txItems[followedID], l.txItems[coldID] = 1, 1
	adm.tracks = l.startWrites([]ref{stockRef(t, "ADD stock :v", "-1"), cold}, now,
		following{tables: []tables.Table{stockTable, stockTable}, transactional: true, adm: adm, follow: true, refusable: true}).tracks

	adm.unholdFollowedLocked(now.Add(DefaultTxWindow))
	if l.txItems[followedID] != 0 || l.txItems[coldID] != 1 || !adm.held {
		t.Fatalf("at the window: held %v, want the followed item free and the other held", l.txItems)
	}
	l.startWrites([]ref{stockRef(t, "ADD stock :v", "-1")}, now, following{tables: []tables.Table{stockTable}}) // not followed: a batch's
	if l.txItems[followedID] != 1 {
		t.Fatalf("after its states were dropped: the item held %d times, want 1", l.txItems[followedID])
	}
	adm.unholdLocked(now.Add(time.Second))
	if len(l.txItems) != 0 || adm.held {
		t.Fatalf("after the answer: held %v, want none", l.txItems)
	}
	if l.stats.Holds != 1 || l.stats.HeldFor != time.Second {
		t.Errorf("hold counted %d times for %s, want once for 1s", l.stats.Holds, l.stats.HeldFor)
	}
}

// A write that leaves the item's states (a batch's) still joins them first:
// the transaction unanswered beside it is charged what meeting its item may
// cost. A write that cannot join them while a transaction freed at its
// window is among them is refused, and nothing of it is started. A chain
// older than imageTTL prices the write by a read as well.
func TestWritesThatLeaveOrCannotJoinTheStates(t *testing.T) {
	now := time.Now()
	id := "t\x00a"
	small := map[string]types.AttributeValue{"pk": s("a"), "stock": n("1")}
	big := map[string]types.AttributeValue{"pk": s("a"), "body": s(strings.Repeat("x", 10_000))}
	setup := func(t *testing.T, readAt time.Time) (*limiter, *admission) {
		t.Helper()
		l := &limiter{txItems: map[string]int{id: 1}, writes: map[string]int{}}
		l.imgs = map[string]imageEntry{id: {item: small, readAt: readAt}}
		adm := &admission{l: l, start: now, held: true, txIDs: []string{id}}
		adm.tracks = l.startWrites([]ref{stockRef(t, "ADD stock :v", "-1")}, now,
			following{tables: []tables.Table{stockTable}, transactional: true, adm: adm, follow: true, refusable: true}).tracks
		adm.unholdFollowedLocked(now)
		if !adm.freed[id] {
			t.Fatal("the followed transaction did not free its item at the window")
		}
		return l, adm
	}
	t.Run("a batch's Put", func(t *testing.T) {
		l, adm := setup(t, now)
		put := ref{table: "t", id: id, kind: "Put", key: map[string]types.AttributeValue{"pk": s("a")}, item: big}
		started := l.startWrites([]ref{put}, now, following{tables: []tables.Table{stockTable}})
		owed := 0.0
		for _, d := range started.debts {
			owed += d.units
		}
		// The transaction was charged 2 (1 unit, doubled); meeting 10 KB, 20.
		if owed != 18 {
			t.Errorf("the transaction owes %v for the batch's Put, want 18", owed)
		}
		if l.poss[id] != nil || l.txItems[id] != 1 || adm.freed[id] {
			t.Errorf("after the batch: states kept %v, item held %d times (freed %v), want none kept and the item held again", l.poss[id] != nil, l.txItems[id], adm.freed[id])
		}
	})
	t.Run("one write too many", func(t *testing.T) {
		l, _ := setup(t, now)
		// Decrements by powers of ten: every subset a state; 2^6 = 64.
		for i := 1; i < 6; i++ {
			started := l.startWrites([]ref{stockRef(t, "ADD stock :v", "-1"+strings.Repeat("0", i))}, now, followAll(1))
			if started.refused >= 0 {
				t.Fatalf("write %d refused", i+1)
			}
		}
		before := l.flights[id].count
		started := l.startWrites([]ref{stockRef(t, "ADD stock :v", "-1000000")}, now, followAll(1))
		if started.refused != 0 {
			t.Fatalf("the seventh write of the item: refused at %d, want 0 (beyond %d states)", started.refused, maxPossible)
		}
		if l.flights[id].count != before || l.poss[id] == nil {
			t.Errorf("the refused write was started (in flight %d, was %d) or dropped the states", l.flights[id].count, before)
		}
	})
	t.Run("states older than imageTTL", func(t *testing.T) {
		l, _ := setup(t, now.Add(-imageTTL+time.Millisecond))
		started := l.startWrites([]ref{stockRef(t, "ADD stock :v", "-1")}, now.Add(time.Millisecond), followAll(1))
		if !started.reread[id] || started.tracks[0].p != nil {
			t.Errorf("a write of states older than imageTTL: read again %v, followed %v; want read, not followed", started.reread[id], started.tracks[0].p != nil)
		}
	})
}

// A write admitted while its item was free may find, as it starts, that a
// transaction holds the item again (its states were dropped in between):
// it is refused, as a conflict, and nothing of it is started. A
// transaction's own hold of its item does not count against it.
func TestAWriteStartedBesideAHeldItemIsRefused(t *testing.T) {
	now := time.Now()
	id := "t\x00a"
	for _, tc := range []struct {
		name    string
		holds   int
		tx      bool
		refused bool
	}{
		{"a single write, the item free", 0, false, false},
		{"a single write, the item held", 1, false, true},
		{"a transaction, its own hold", 1, true, false},
		{"a transaction, another's hold too", 2, true, true},
	} {
		l := &limiter{txItems: map[string]int{id: tc.holds}, writes: map[string]int{}}
		f := followAll(1)
		f.transactional = tc.tx
		started := l.startWrites([]ref{stockRef(t, "ADD stock :v", "-1")}, now, f)
		if got := started.refused == 0; got != tc.refused {
			t.Errorf("%s: refused %v, want %v", tc.name, got, tc.refused)
		}
		if tc.refused && (len(started.tracks) != 0 || l.flights[id] != nil && l.flights[id].count != 0) {
			t.Errorf("%s: the refused write was started", tc.name)
		}
	}
}
