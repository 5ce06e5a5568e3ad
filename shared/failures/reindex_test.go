package failures

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOutstandingReindex(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	need := func(k string) string { return ReindexNeededPrefix + "aws/lambda/" + k }
	for _, c := range []struct {
		name    string
		objects map[string]time.Time
		want    []string
	}{
		{"nothing asked", map[string]time.Time{ReindexStartedPrefix + "r1": at(0), ReindexFinishedPrefix + "r1": at(5)}, nil},
		{"asked, never reindexed", map[string]time.Time{need("b"): at(2), need("a"): at(1)}, []string{"aws/lambda/a", "aws/lambda/b"}},
		{"asked, then a reindex finished", map[string]time.Time{need("a"): at(1), ReindexStartedPrefix + "r1": at(2), ReindexFinishedPrefix + "r1": at(9)}, nil},
		{"a reindex started but never finished", map[string]time.Time{need("a"): at(1), ReindexStartedPrefix + "r1": at(2)}, []string{"aws/lambda/a"}},
		{"asked while a reindex ran", map[string]time.Time{ReindexStartedPrefix + "r1": at(2), need("a"): at(3), ReindexFinishedPrefix + "r1": at(9)}, []string{"aws/lambda/a"}},
		{"asked in the second a reindex started", map[string]time.Time{need("a"): at(2), ReindexStartedPrefix + "r1": at(2), ReindexFinishedPrefix + "r1": at(9)}, nil},
		{"asked the second after a reindex started", map[string]time.Time{need("a"): at(3), ReindexStartedPrefix + "r1": at(2), ReindexFinishedPrefix + "r1": at(9)}, []string{"aws/lambda/a"}},
		{"the latest finished run counts", map[string]time.Time{
			ReindexStartedPrefix + "r1": at(0), ReindexFinishedPrefix + "r1": at(1), need("a"): at(3),
			ReindexStartedPrefix + "r2": at(4), ReindexFinishedPrefix + "r2": at(8), need("b"): at(9),
			ReindexStartedPrefix + "r3": at(10)}, []string{"aws/lambda/b"}},
		{"finer times do not count", map[string]time.Time{need("a"): at(2).Add(900 * time.Millisecond), ReindexStartedPrefix + "r1": at(2), ReindexFinishedPrefix + "r1": at(9)}, nil},
		{"a finished run whose start expired answers nothing", map[string]time.Time{need("a"): at(1), ReindexFinishedPrefix + "r1": at(9)}, []string{"aws/lambda/a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, n := range OutstandingReindex(c.objects) {
				got = append(got, n.Key)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("outstanding (-want +got):\n%s", d)
			}
		})
	}
}

func TestReindexRunNamesDiffer(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a, b := ReindexRun(now), ReindexRun(now)
	if a == b || !strings.HasPrefix(a, "20261126T120000Z-") {
		t.Errorf("two runs of one second named %q and %q", a, b)
	}
}
