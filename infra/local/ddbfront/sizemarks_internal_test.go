package ddbfront

import (
	"testing"
	"time"
)

// A read is charged at least the largest mark of its item from its
// admission on: marks before it do not count, nor marks older than
// markWindow once a newer one is made.
func TestLargestSince(t *testing.T) {
	now := time.Now()
	l := &limiter{}
	l.markSize("a", 5000, now.Add(-markWindow-time.Second))
	l.markSize("a", 300, now.Add(-time.Second))
	l.markSize("a", 10_000, now)
	l.markSize("a", 100, now.Add(time.Second))
	l.markSize("b", 0, now) // no size: no mark
	for _, tc := range []struct {
		id    string
		since time.Time
		want  int
	}{
		{"a", now.Add(-2 * markWindow), 10_000},
		{"a", now.Add(time.Millisecond), 100},
		{"a", now.Add(2 * time.Second), 0},
		{"b", now.Add(-time.Hour), 0},
	} {
		if got := l.largestSince(tc.id, tc.since); got != tc.want {
			t.Errorf("largest mark of %s since %s: %d, want %d", tc.id, tc.since.Sub(now), got, tc.want)
		}
	}
	if n := len(l.marks["a"]); n != 3 {
		t.Errorf("%d marks kept of a, want 3 (the one older than markWindow cut)", n)
	}
}
