package ddbfront

import (
	"sync"
	"testing"
	"time"
)

// Two readers of one REMOVE record that both arrive while the sweeper's
// deletion is pending both see it as the sweeper's, whichever binds it first:
// the second must not miss the binding the first made while it waited.
func TestConcurrentReadersOfAPendingSweepAgree(t *testing.T) {
	l, err := openLedger("")
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	const arn, key, seq = "arn:stream", `[{"Name":"id","Type":"S","Value":"o1"}]`, "000000000000000000020"
	entries, err := l.begin(arn, "orders", []string{key}, time.Now(), "000000000000000000010")
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	const readers = 8
	got := make([]bool, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() { got[i] = l.isSweep(arn, key, seq) })
	}
	time.Sleep(100 * time.Millisecond) // the readers wait on the pending entry
	if err := l.settle(entries, []bool{true}); err != nil {
		t.Fatalf("settle: %v", err)
	}
	wg.Wait()
	for i, g := range got {
		if !g {
			t.Errorf("reader %d: got isSweep false, want true", i)
		}
	}
	if !l.isSweep(arn, key, seq) {
		t.Errorf("a later reader: got isSweep false, want true")
	}
	// Another REMOVE of the same key (a user's delete after the sweep) is not the service's.
	if l.isSweep(arn, key, "000000000000000000030") {
		t.Errorf("a second REMOVE of the key: got isSweep true, want false")
	}
}
