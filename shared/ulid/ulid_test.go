package ulid

import (
	"testing"
	"time"
)

func TestMonotonicWithinAMillisecond(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g := New(func() time.Time { return at })
	prev := g.Make()
	for range 1000 {
		id := g.Make()
		if !Valid(id) || id <= prev {
			t.Fatalf("got %s after %s, want a greater valid ULID", id, prev)
		}
		prev = id
	}
	later := New(func() time.Time { return at.Add(time.Millisecond) }).Make()
	if later <= prev {
		t.Errorf("got %s, want it after %s", later, prev)
	}
}

func TestEncodeTime(t *testing.T) {
	// The first 10 characters encode the milliseconds (spec example).
	g := New(func() time.Time { return time.UnixMilli(1469918176385) })
	if got := g.Make()[:10]; got != "01ARYZ6S41" {
		t.Errorf("got time part %s, want 01ARYZ6S41", got)
	}
}
