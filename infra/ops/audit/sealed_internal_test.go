package audit

import (
	"testing"
	"time"
)

// TestSealThrough: the last day that may be sealed is 48 h and a day before
// S3's time, before every day a failure object may still be replayed to, and
// before the first day with an object the digest does not hold.
func TestSealThrough(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		discarded []time.Time
		unsettled []string
		want      string
	}{
		{"nothing in the way", nil, nil, "year=2026/month=11/day=22"},
		{"a failure object", []time.Time{time.Date(2026, 11, 10, 5, 0, 0, 0, time.UTC)}, nil, "year=2026/month=11/day=07"},
		{"a failure object of today", []time.Time{now}, nil, "year=2026/month=11/day=22"},
		{"days with objects out of the digest", nil, []string{"year=2026/month=11/day=05", "year=2026/month=11/day=03", "year=2026/month=11/day=24"}, "year=2026/month=11/day=02"},
		{"a day across a month", nil, []string{"year=2026/month=11/day=01"}, "year=2026/month=10/day=31"},
		{"an unreadable day", nil, []string{"somewhere"}, ""},
	}
	for _, c := range cases {
		if got := sealThrough(now, c.discarded, c.unsettled); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	for day, want := range map[string]bool{"year=2026/month=01/day=02": true, "year=2026/month=1/day=2": false, "year=2026/month=02/day=30": false, "": false} {
		if got := validDay(day); got != want {
			t.Errorf("validDay(%q) = %v, want %v", day, got, want)
		}
	}
}
