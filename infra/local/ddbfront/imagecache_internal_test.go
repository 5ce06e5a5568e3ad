package ddbfront

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
)

// followAll follows n writes of a table with no indexes.
func followAll(n int) following {
	return following{tables: make([]tables.Table, n), follow: true, refusable: true}
}

// unfollowed are n writes whose answer will not say whether they applied.
func unfollowed(n int) following {
	return following{tables: make([]tables.Table, n)}
}

// An image is kept only from a write that was alone on its item from its
// admission to its answer and committed, and a write sent again with a
// committed transaction's token leaves none.
func TestImageKeptOnlyFromALoneCommittedWrite(t *testing.T) {
	now := time.Now()
	it := map[string]types.AttributeValue{"pk": s("a"), "v": n("1")}
	r := ref{table: "t", id: "t\x00a", kind: "Put", item: it}
	start := func(l *limiter) []imageTrack {
		tr := l.startWrites([]ref{r}, now, followAll(1)).tracks
		tr[0].known, tr[0].after = true, it
		return tr
	}
	cached := func(l *limiter) bool {
		st := l.startWrites([]ref{r}, now, unfollowed(1))
		hits, tr := st.priors, st.tracks
		l.endWrites(tr, false, now)
		_, ok := hits[r.id]
		return ok
	}

	t.Run("alone and committed", func(t *testing.T) {
		l := &limiter{}
		l.endWrites(start(l), true, now)
		if !cached(l) {
			t.Fatal("no image after a lone committed write")
		}
		if cached(l) {
			t.Fatal("an image outlived a write whose outcome was not followed")
		}
	})
	t.Run("refused", func(t *testing.T) {
		l := &limiter{}
		l.endWrites(start(l), false, now)
		if cached(l) {
			t.Fatal("an image from a write that did not commit")
		}
	})
	t.Run("overlapped, either ending first", func(t *testing.T) {
		for _, aFirst := range []bool{true, false} {
			l := &limiter{}
			a, b := start(l), start(l)
			if aFirst {
				l.endWrites(a, true, now)
				l.endWrites(b, true, now)
			} else {
				l.endWrites(b, true, now)
				l.endWrites(a, true, now)
			}
			if cached(l) {
				t.Fatalf("an image from overlapping writes (first admitted ends first: %v)", aFirst)
			}
		}
	})
	t.Run("too old", func(t *testing.T) {
		l := &limiter{}
		l.endWrites(start(l), true, now)
		st := l.startWrites([]ref{r}, now.Add(imageTTL), unfollowed(1))
		hits, tr := st.priors, st.tracks
		l.endWrites(tr, false, now)
		if len(hits) != 0 {
			t.Fatal("an image used past imageTTL")
		}
	})
	t.Run("a table deleted meanwhile", func(t *testing.T) {
		l := &limiter{}
		a := start(l)
		l.forgetImages("t")
		l.endWrites(a, true, now)
		if cached(l) {
			t.Fatal("an image from a write that overlapped the table's deletion")
		}
	})
	t.Run("a replayed token", func(t *testing.T) {
		l := &limiter{}
		if l.replayed("tok", now) {
			t.Fatal("an unknown token counted as replayed")
		}
		l.committedToken("tok", now)
		if !l.replayed("tok", now.Add(time.Minute)) || l.replayed("tok", now.Add(tokenTTL)) {
			t.Fatal("a committed token is a replay within tokenTTL only")
		}
	})
}

// An item the front read whole for itself is kept as an image only when no
// write of it was in flight as the read began and none started before it
// ended, and no write the limits could not name was about; an item the read
// found absent is kept as absent; the items of Puts that were not read are
// not kept.
func TestImageKeptFromAQuietRead(t *testing.T) {
	now := time.Now()
	it := map[string]types.AttributeValue{"pk": s("a"), "v": n("1")}
	get := ref{table: "t", id: "t\x00a", kind: "Get"}
	read := map[string]map[string]types.AttributeValue{get.id: it}
	cached := func(l *limiter) (map[string]types.AttributeValue, bool) {
		e, ok := l.cachedImages([]ref{get}, now)[get.id]
		return e.item, ok
	}
	write := func(l *limiter) []imageTrack {
		l.mu.Lock()
		defer l.mu.Unlock()
		tr := l.startWrites([]ref{{table: "t", id: get.id, kind: "Update"}}, now, followAll(1)).tracks
		return tr
	}
	end := func(l *limiter, tr []imageTrack) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.endWrites(tr, false, now)
	}

	t.Run("quiet", func(t *testing.T) {
		l := &limiter{}
		m := l.markRead([]ref{get})
		l.keepRead(m, []ref{get}, nil, read, now)
		if got, ok := cached(l); !ok || got["v"].(*types.AttributeValueMemberN).Value != "1" {
			t.Fatalf("no image of a quiet read: %v %v", got, ok)
		}
	})
	t.Run("absent", func(t *testing.T) {
		l := &limiter{}
		m := l.markRead([]ref{get})
		l.keepRead(m, []ref{get}, nil, nil, now)
		if got, ok := cached(l); !ok || got != nil {
			t.Fatalf("an absent item: %v %v, want kept as absent", got, ok)
		}
	})
	t.Run("a write started during the read", func(t *testing.T) {
		l := &limiter{}
		m := l.markRead([]ref{get})
		end(l, write(l))
		l.keepRead(m, []ref{get}, nil, read, now)
		if _, ok := cached(l); ok {
			t.Fatal("an image from a read a write overlapped")
		}
	})
	t.Run("a write in flight as the read began", func(t *testing.T) {
		l := &limiter{}
		tr := write(l)
		m := l.markRead([]ref{get})
		end(l, tr)
		l.keepRead(m, []ref{get}, nil, read, now)
		if _, ok := cached(l); ok {
			t.Fatal("an image from a read that began while a write was in flight")
		}
	})
	t.Run("a write started past the cache's bound", func(t *testing.T) {
		l := &limiter{}
		m := l.markRead([]ref{get})
		l.mu.Lock()
		for i := range maxImages {
			l.started1(string(rune(i)))
		}
		l.mu.Unlock()
		l.keepRead(m, []ref{get}, nil, read, now)
		if _, ok := cached(l); ok {
			t.Fatal("an image from a read whose item's starts were forgotten meanwhile")
		}
	})
	t.Run("an untracked write", func(t *testing.T) {
		l := &limiter{}
		m := l.markRead([]ref{get})
		l.beginUntracked()
		l.endUntracked()
		l.keepRead(m, []ref{get}, nil, read, now)
		if _, ok := cached(l); ok {
			t.Fatal("an image from a read an untracked write overlapped")
		}
	})
	t.Run("a table forgotten", func(t *testing.T) {
		l := &limiter{}
		m := l.markRead([]ref{get})
		l.forgetImages("t")
		l.keepRead(m, []ref{get}, nil, read, now)
		if _, ok := cached(l); ok {
			t.Fatal("an image from a read that overlapped the table's deletion")
		}
	})
	t.Run("a Put not read", func(t *testing.T) {
		l := &limiter{}
		put := ref{table: "t", id: get.id, kind: "Put", absentIfApplied: true}
		m := l.markRead([]ref{put})
		l.keepRead(m, []ref{put}, nil, nil, now)
		if _, ok := cached(l); ok {
			t.Fatal("an image of an item no read looked at")
		}
	})
}

// Reads pass the gate unbounded while no transaction holding its items is
// about; with one about, at most the limit is in flight, a waiting
// transaction goes before the requests that waited longer, and a waiter
// that gives up takes no slot with it.
func TestGateLetsTransactionsFirst(t *testing.T) {
	g := newGate(1)
	bg, tx := context.Background(), urgent(context.Background())
	for range 3 {
		if err := g.acquire(bg); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		g.release(bg)
	}
	if err := g.acquire(tx); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	waiting := func(name string, ctx context.Context) {
		go func() {
			if g.acquire(ctx) == nil {
				order <- name
			}
		}()
	}
	queued := func(p, n int) func() bool {
		return func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.waiting[p]) == n }
	}
	waiting("read", bg)
	waitFor(t, queued(1, 1))
	gone, cancel := context.WithCancel(bg)
	waiting("abandoned", gone)
	waitFor(t, queued(1, 2))
	cancel()
	waitFor(t, queued(1, 1))
	waiting("transaction", tx)
	waitFor(t, queued(0, 1))
	g.release(tx)
	if got := <-order; got != "transaction" {
		t.Fatalf("first through: got %s, want the transaction", got)
	}
	g.release(tx)
	if got := <-order; got != "read" {
		t.Fatalf("second through: got %s, want the read", got)
	}
	g.release(bg)
	if g.inflight != 0 || g.urgent != 0 {
		t.Fatalf("after every holder left: got %d in flight and %d urgent, want 0 and 0", g.inflight, g.urgent)
	}
}

// A write that went upstream without an answer deciding it may still land:
// its item stays in flight, so no write overlapping it leaves an image,
// and a transaction sent again with its token counts as a replay.
func TestUndecidedWriteStaysInFlight(t *testing.T) {
	now := time.Now()
	r := ref{table: "t", id: "t\x00a", kind: "Put"}
	for _, answered := range []bool{true, false} {
		l := &limiter{}
		a := &admission{l: l, txIDs: []string{r.id}, token: "tok", answered: answered}
		l.mu.Lock()
		a.tracks = l.startWrites([]ref{r}, now, followAll(1)).tracks
		l.mu.Unlock()
		a.release()
		next := l.startWrites([]ref{r}, now, unfollowed(1)).tracks
		if next[0].exact == !answered {
			t.Errorf("answered %v: a write after it alone on the item: got %v, want %v", answered, next[0].exact, answered)
		}
		if l.replayed("tok", now) == answered {
			t.Errorf("answered %v (not committed): token counted as a replay: got %v, want %v", answered, !answered, !answered)
		}
	}
}

// While a write the limits could not name is on its way, no write leaves an
// image: neither one admitted meanwhile nor one that overlapped its start
// or its end.
func TestNoImageAcrossAnUntrackedWrite(t *testing.T) {
	now := time.Now()
	it := map[string]types.AttributeValue{"pk": s("a")}
	r := ref{table: "t", id: "t\x00a", kind: "Put", item: it}
	start := func(l *limiter) []imageTrack {
		l.mu.Lock()
		defer l.mu.Unlock()
		tr := l.startWrites([]ref{r}, now, followAll(1)).tracks
		tr[0].known, tr[0].after = true, it
		return tr
	}
	end := func(l *limiter, tr []imageTrack) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.endWrites(tr, true, now)
	}
	cached := func(l *limiter) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		st := l.startWrites([]ref{r}, now, unfollowed(1))
		hits, tr := st.priors, st.tracks
		l.endWrites(tr, false, now)
		return len(hits) == 1
	}
	for name, run := range map[string]func(l *limiter){
		"admitted meanwhile": func(l *limiter) {
			l.beginUntracked()
			end(l, start(l))
			l.endUntracked()
		},
		"overlapping its start": func(l *limiter) {
			tr := start(l)
			l.beginUntracked()
			end(l, tr)
			l.endUntracked()
		},
		"overlapping its end": func(l *limiter) {
			l.beginUntracked()
			tr := start(l)
			l.endUntracked()
			end(l, tr)
		},
	} {
		l := &limiter{}
		run(l)
		if cached(l) {
			t.Errorf("%s: an image was kept", name)
		}
	}
	l := &limiter{}
	l.beginUntracked()
	l.endUntracked()
	end(l, start(l))
	if !cached(l) {
		t.Error("no image from a lone write after the untracked one ended")
	}
}

// A write of an item the front does not follow waits for the answers of the
// writes of it in flight before it is priced (awaitPriceable), except those
// gone upstream with no answer that decided them; a write of a followed item
// joins its states at once.
func TestAWriteWaitsForTheUnfollowedWritesOfItsItemInFlight(t *testing.T) {
	now := time.Now()
	r := ref{table: "t", id: "t\x00a", kind: "Put", item: map[string]types.AttributeValue{"pk": s("a")}}
	other := ref{table: "t", id: "t\x00b", kind: "Put", item: map[string]types.AttributeValue{"pk": s("b")}}
	// await runs awaitPriceable for refs in the background; the channel
	// gets how long it waited.
	await := func(l *limiter, refs ...ref) chan time.Duration {
		done := make(chan time.Duration, 1)
		go func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			done <- l.awaitPriceable(refs)
		}()
		return done
	}
	waiting := func(t *testing.T, done chan time.Duration) {
		t.Helper()
		select {
		case d := <-done:
			t.Fatalf("the write did not wait for the one in flight (returned after %v)", d)
		case <-time.After(100 * time.Millisecond):
		}
	}
	passed := func(t *testing.T, done chan time.Duration, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("the write still waits %s", what)
		}
	}

	t.Run("until the answer", func(t *testing.T) {
		l := &limiter{}
		l.mu.Lock()
		first := l.startWrites([]ref{r}, now, unfollowed(1)).tracks
		l.mu.Unlock()
		passed(t, await(l, other), "though no write of its item is in flight")
		done := await(l, other, r)
		waiting(t, done)
		l.mu.Lock()
		l.endWrites(first, true, now)
		l.mu.Unlock()
		passed(t, done, "after the answer of the write in flight")
	})
	t.Run("not for an undecided write", func(t *testing.T) {
		l := &limiter{}
		l.mu.Lock()
		first := l.startWrites([]ref{r}, now, unfollowed(1)).tracks
		l.mu.Unlock()
		done := await(l, r)
		waiting(t, done)
		a := &admission{l: l, tracks: first}
		a.release() // gone upstream, no answer
		passed(t, done, "for a write whose answer did not decide it")
		l.mu.Lock()
		defer l.mu.Unlock()
		if fl := l.flights[r.id]; fl == nil || fl.count != 1 {
			t.Fatalf("the undecided write left the flights (%+v); it stays in flight for undecidedFor", fl)
		}
	})
	t.Run("not for a followed item", func(t *testing.T) {
		l := &limiter{}
		l.mu.Lock()
		l.imgs = map[string]imageEntry{r.id: {item: nil, readAt: now}}
		if tr := l.startWrites([]ref{r}, now, followAll(1)).tracks; tr[0].p == nil {
			l.mu.Unlock()
			t.Fatal("the write of an item with an image is not followed")
		}
		l.mu.Unlock()
		passed(t, await(l, r), "though its item's states are followed")
	})
}

// A transaction that waited to be priced past its window (its timer fired
// with no write of it followed yet) frees the items it is followed in as
// soon as it is priced, not at its answer; the item it waited for, not
// followed, stays held.
func TestATransactionThatWaitedPastItsWindowFreesItsFollowedItems(t *testing.T) {
	const window = 50 * time.Millisecond
	mk := func(pk string) ref {
		k := map[string]types.AttributeValue{"pk": s(pk)}
		return ref{table: "t", id: "t\x00" + pk, kind: "Put", absentIfApplied: true, key: k, item: k}
	}
	cold, known := mk("cold"), mk("known")
	l := newLimiter(Limits{TxWindow: window}, nil)
	l.schemas.byName["t"] = tables.Table{Name: "t", PartitionKey: tables.Key{Name: "pk"}}
	now := time.Now()
	l.mu.Lock()
	l.imgs = map[string]imageEntry{known.id: {item: nil, readAt: now}}
	first := l.startWrites([]ref{cold}, now, unfollowed(1)).tracks
	l.mu.Unlock()
	done := make(chan *admission, 1)
	go func() {
		adm, refused := l.admitTransactRefs(context.Background(), "TransactWriteItems", []ref{cold, known}, "")
		if refused != nil {
			t.Errorf("refused: %s", refused.body)
		}
		done <- adm
	}()
	time.Sleep(3 * window) // past the window, still waiting
	l.mu.Lock()
	l.endWrites(first, true, time.Now())
	l.mu.Unlock()
	adm := <-done
	if adm == nil {
		t.Fatal("not admitted")
	}
	defer adm.releaseNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stats.Waits != 1 {
		t.Fatalf("%d waits, want 1: the transaction did not wait for the write of its item", l.stats.Waits)
	}
	if !adm.followedLocked(1) {
		t.Fatal("the write of the item with an image is not followed")
	}
	if l.txItems[known.id] != 0 {
		t.Errorf("the followed item is still held %v past the window", 2*window)
	}
	if l.txItems[cold.id] != 1 {
		t.Errorf("the item not followed: held %d times, want 1 (until the answer)", l.txItems[cold.id])
	}
}

// The TTL sweeper's delete of an item stays in flight until DynamoDB Local
// answers it, not until the whole page is done.
func TestASweptItemsWriteEndsAtItsAnswer(t *testing.T) {
	l := newLimiter(Limits{}, nil)
	l.schemas.byName["t"] = tables.Table{Name: "t", PartitionKey: tables.Key{Name: "pk"}}
	keys := []map[string]types.AttributeValue{{"pk": s("a")}, {"pk": s("b")}}
	answered, done := l.sweeping(context.Background(), "t", keys)
	inFlight := func(pk string) int {
		_, id, err := itemKey(l.schemas.byName["t"], "t", map[string]types.AttributeValue{"pk": s(pk)}, "key")
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if fl := l.flights[id]; fl != nil {
			return fl.count
		}
		return 0
	}
	if inFlight("a") != 1 || inFlight("b") != 1 {
		t.Fatalf("in flight: a %d, b %d; want 1 each", inFlight("a"), inFlight("b"))
	}
	answered(0)
	answered(0) // once only
	if inFlight("a") != 0 || inFlight("b") != 1 {
		t.Fatalf("after a's answer: a %d, b %d in flight; want 0, 1", inFlight("a"), inFlight("b"))
	}
	done()
	done()
	if inFlight("b") != 0 {
		t.Fatalf("after the page: b %d in flight, want 0", inFlight("b"))
	}
}
