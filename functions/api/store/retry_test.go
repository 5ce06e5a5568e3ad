package store

import (
	"testing"
	"time"
)

// TestConflictRoundsWaitLessThanThrottledOnes: a round cancelled only by
// other transactions holding its items (some 20-30 ms on AWS) waits at most
// 40 ms before it tries again; a round in which an action was throttled
// waits up to 150 ms, since the partition needs time to refill. Either
// kind leaves the request's deadline to end its tries: the quicker rounds
// must not run out of attempts while the product still has stock.
func TestConflictRoundsWaitLessThanThrottledOnes(t *testing.T) {
	for _, tc := range []struct {
		codes     []string
		throttled bool
	}{
		{[]string{reasonConflict, reasonNone}, false},
		{[]string{reasonNone, reasonConflict, reasonConflict}, false},
		{[]string{reasonConflict, reasonThrottled}, true},
		{[]string{reasonProvisioned}, true},
	} {
		c := &cancellation{codes: tc.codes}
		if got := c.throttled(); got != tc.throttled {
			t.Errorf("throttled(%v) = %v, want %v", tc.codes, got, tc.throttled)
		}
	}
	s := New(nil, Config{})
	conflict, throttle := s.conflictRetries(), s.retries(0)
	if conflict.Cap != 40*time.Millisecond || throttle.Cap != 150*time.Millisecond || conflict.Base >= throttle.Base {
		t.Errorf("ceilings: conflicts %v (base %v), throttling %v (base %v); want 40 ms under 150 ms", conflict.Cap, conflict.Base, throttle.Cap, throttle.Base)
	}
	if conflict.Margin != throttle.Margin || conflict.Margin == 0 {
		t.Errorf("margins before the deadline: %v and %v, want the same, not zero", conflict.Margin, throttle.Margin)
	}
	if s.cfg.MaxAttempts*int(conflict.Cap/2) < int(8*time.Second) {
		t.Errorf("MaxAttempts %d × the mean conflict wait %v ends before a 10 s request's deadline: attempts, not the deadline, would end a contended order", s.cfg.MaxAttempts, conflict.Cap/2)
	}
}
