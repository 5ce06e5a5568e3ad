package ddbfront

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A waiter is released only by a barrier run that started after it arrived,
// and every waiter that arrived during one run shares the next.
func TestBarrierOrdersWaitersAfterTheirArrival(t *testing.T) {
	started := make(chan int)
	release := make(chan error)
	runs := 0
	b := &barrier{run: func(context.Context) error {
		runs++
		started <- runs
		return <-release
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first := make(chan error, 1)
	go func() { first <- b.wait(ctx) }()
	if got := <-started; got != 1 {
		t.Fatalf("first run: got run %d, want 1", got)
	}
	// Ten waiters arrive while run 1 is in flight.
	const late = 10
	var wg sync.WaitGroup
	lateErrs := make(chan error, late)
	for i := 0; i < late; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lateErrs <- b.wait(ctx)
		}()
	}
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiting) == late })
	release <- nil
	if err := <-first; err != nil {
		t.Fatalf("first waiter: got %v, want nil", err)
	}
	if got := <-started; got != 2 {
		t.Fatalf("second run: got run %d, want 2", got)
	}
	select {
	case err := <-lateErrs:
		t.Fatalf("a waiter that arrived during run 1 returned (%v) before run 2 ended", err)
	default:
	}
	boom := errors.New("dynamodb local gone")
	release <- boom
	wg.Wait()
	close(lateErrs)
	n := 0
	for err := range lateErrs {
		n++
		if !errors.Is(err, boom) {
			t.Errorf("late waiter: got %v, want run 2's error", err)
		}
	}
	if n != late || runs != 2 {
		t.Errorf("got %d late waiters released by %d runs, want %d by 2", n, runs, late)
	}
	// With nobody waiting the loop ends; the next waiter starts a new run.
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return !b.running })
	go func() { first <- b.wait(ctx) }()
	if got := <-started; got != 3 {
		t.Fatalf("run after idle: got run %d, want 3", got)
	}
	release <- nil
	if err := <-first; err != nil {
		t.Fatalf("waiter after idle: got %v, want nil", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
