package releases_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/infra/local/releases"
)

// TestChangelogListsEverySupportedRelease: CHANGELOG.md names each supported
// release with its version and full commit, and the commit is in the
// repository's history (a missing one fails, never skips).
func TestChangelogListsEverySupportedRelease(t *testing.T) {
	raw, err := os.ReadFile("../../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	log := string(raw)
	root, err := releases.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range releases.Supported() {
		if !strings.Contains(log, "## ["+r.Version+"] - "+r.Date) {
			t.Errorf("CHANGELOG.md has no entry \"## [%s] - %s\"", r.Version, r.Date)
		}
		if !strings.Contains(log, "`"+r.Commit+"`") {
			t.Errorf("CHANGELOG.md does not name %s's commit %s", r.Version, r.Commit)
		}
		got, err := releases.Resolve(context.Background(), root, r.Short())
		if err != nil || got != r.Commit {
			t.Errorf("release %s: %s resolves to %q (%v), want %s", r.Version, r.Short(), got, err, r.Commit)
		}
	}
	if p := releases.Previous(); p != releases.Supported()[len(releases.Supported())-1] {
		t.Errorf("previous release %v is not the last supported one", p)
	}
}

// TestSupportedReleasesBuild builds what the release drills run: each
// supported release's local stack and the previous release's API function,
// from the history, into the releases cache (make test runs it first, alone,
// so the drills find them built).
func TestSupportedReleasesBuild(t *testing.T) {
	root, err := releases.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := releases.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range releases.Supported() {
		if _, err := releases.Build(ctx, root, r.Commit, "./infra/local", cache); err != nil {
			t.Errorf("release %s: %v", r.Version, err)
		}
	}
	if _, err := releases.Build(ctx, root, releases.Previous().Commit, "./functions/api", cache, "lambda.norpc"); err != nil {
		t.Errorf("release %s's API: %v", releases.Previous().Version, err)
	}
}
