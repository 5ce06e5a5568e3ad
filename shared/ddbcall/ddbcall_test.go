package ddbcall

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffWait(t *testing.T) {
	var ceilings []int64
	b := Backoff{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond, MaxAttempts: 5, Margin: time.Second,
		Rand: func(n int64) int64 { ceilings = append(ceilings, n); return 0 }}
	ctx := context.Background()
	for attempt := 1; attempt <= 4; attempt++ {
		if err := b.Wait(ctx, attempt); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	want := []int64{int64(20 * time.Millisecond), int64(40 * time.Millisecond), int64(40 * time.Millisecond), int64(40 * time.Millisecond)}
	for i := range want {
		if ceilings[i] != want[i] {
			t.Errorf("ceiling %d: got %v, want %v", i+1, time.Duration(ceilings[i]), time.Duration(want[i]))
		}
	}
	if err := b.Wait(ctx, 5); !errors.Is(err, ErrExhausted) {
		t.Errorf("attempt 5 of 5: got %v, want ErrExhausted", err)
	}
	near, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := b.Wait(near, 1); !errors.Is(err, ErrDeadline) {
		t.Errorf("half a second before the deadline with a 1 s margin: got %v, want ErrDeadline", err)
	}
}
