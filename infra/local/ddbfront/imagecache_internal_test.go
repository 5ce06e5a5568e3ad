package ddbfront

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An image is kept only from a write that was alone on its item from its
// admission to its answer and committed, and a write sent again with a
// committed transaction's token leaves none.
func TestImageKeptOnlyFromALoneCommittedWrite(t *testing.T) {
	now := time.Now()
	it := map[string]types.AttributeValue{"pk": s("a"), "v": n("1")}
	r := ref{table: "t", id: "t\x00a", kind: "Put", item: it}
	start := func(l *limiter) []imageTrack {
		_, tr := l.startWrites([]ref{r}, now)
		tr[0].known, tr[0].after = true, it
		return tr
	}
	cached := func(l *limiter) bool {
		hits, tr := l.startWrites([]ref{r}, now)
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
		hits, tr := l.startWrites([]ref{r}, now.Add(imageTTL))
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
		_, a.tracks = l.startWrites([]ref{r}, now)
		l.mu.Unlock()
		a.release()
		_, next := l.startWrites([]ref{r}, now)
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
		_, tr := l.startWrites([]ref{r}, now)
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
		hits, tr := l.startWrites([]ref{r}, now)
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
