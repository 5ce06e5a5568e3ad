// Package releases names shopstream's releases (the landed mains that stages
// may run, as CHANGELOG.md lists them) and builds an earlier one's code from
// the repository's history: the upgrade and canary drills run the real code
// of each release this one must upgrade from and run beside, and `make run`
// can route a share of API requests to an earlier build (a local canary).
package releases

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Release is a landed main.
type Release struct {
	Version string
	// Commit is the full hash of the release's commit.
	Commit string
	Date   string
}

// Short is the commit's first 7 characters.
func (r Release) Short() string { return r.Commit[:7] }

// Supported returns the earlier releases this release upgrades from (their
// data) and serves beside (their code), oldest first. The last is the
// previous release: the one a canary runs beside and a rollback returns to.
func Supported() []Release {
	return []Release{
		{Version: "0.1.0", Commit: "8c8a8ba20f81b51dc5b292ff9024a59dac616d06", Date: "2026-11-23"},
		{Version: "0.2.0", Commit: "6569c494e3a696edfd81ddd432ecd1184605e72a", Date: "2026-11-25"},
		{Version: "0.3.0", Commit: "13ca2635a2b5565ec60d12f949a1dcf64da22812", Date: "2026-11-25"},
		{Version: "0.4.0", Commit: "d0cf6970e0081bb8631c75c00c23e8a77d27f87f", Date: "2026-11-25"},
		{Version: "0.5.0", Commit: "736bc186c15da476b4733bb03732455e54e3400c", Date: "2026-11-25"},
		{Version: "0.6.0", Commit: "4c44a8a481bd28d150f8a36b1b39645ad31eb097", Date: "2026-11-25"},
		{Version: "0.7.0", Commit: "7b42723fd2f3994f843b5f3c9d9fe79bdae90dd3", Date: "2026-11-25"},
		{Version: "0.8.0", Commit: "98d91634103cce186735abb36a9b4e9f0834349f", Date: "2026-11-26"},
		{Version: "0.9.0", Commit: "3552ec01b0c8e4c3a7d1930f3e357397c61e9f84", Date: "2026-11-26"},
		{Version: "0.10.0", Commit: "1bfb9e29fd09c423fbf9e15702620d3ff44a6aff", Date: "2026-11-26"},
		{Version: "0.11.0", Commit: "f00ec60ac96a41340d8a5c3ab3c3166717b52ccd", Date: "2026-11-26"},
		{Version: "0.12.0", Commit: "17148e1432dafe6dff88172a571df6e86fc051c1", Date: "2026-11-26"},
		{Version: "0.13.0", Commit: "07667250d20800272310e88d68af25c5cecc0520", Date: "2026-11-26"},
		{Version: "0.14.0", Commit: "656e3ba6bcc99a77b2f7f0238d507c68a1d083e3", Date: "2026-11-26"},
		{Version: "0.15.0", Commit: "375d2d3a9c92d223afc6f2ca04fcaf90c3dcc495", Date: "2026-11-26"},
		{Version: "0.16.0", Commit: "5997e473f0c94695f0799c26e32fab0c22e8177b", Date: "2026-11-26"},
		{Version: "0.17.0", Commit: "cea420e21094f5cb5428b5f2f7bcfb3df9d9ab24", Date: "2026-11-27"},
		{Version: "0.18.0", Commit: "5b06ee12799daadfe3e3e40fefcc8eb8b42e73b8", Date: "2026-11-27"},
		{Version: "0.19.0", Commit: "6b83dced728cad82b996c3854cae90652db7b88e", Date: "2026-11-27"},
		{Version: "0.20.0", Commit: "818f53d416e8ab6c2b517f34ac969666fb382a6f", Date: "2026-11-27"},
		{Version: "0.21.0", Commit: "4d5e13e798ce37a57f2b2d0514055aaf7e23f7e1", Date: "2026-11-27"},
	}
}

// Previous is the release before this one.
func Previous() Release {
	s := Supported()
	return s[len(s)-1]
}

// Root returns the repository's top directory, from dir.
func Root(dir string) (string, error) {
	out, err := git(context.Background(), dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Resolve returns the full hash of ref (a commit, tag or branch) in the
// repository at root. A commit missing from the history (a shallow clone)
// is an error saying how to fetch it.
func Resolve(ctx context.Context, root, ref string) (string, error) {
	out, err := git(ctx, root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		hint := ""
		if shallow, _ := git(ctx, root, "rev-parse", "--is-shallow-repository"); strings.TrimSpace(shallow) == "true" {
			hint = " (this clone is shallow: git fetch --unshallow)"
		}
		return "", fmt.Errorf("release %s is not in the repository's history%s", ref, hint)
	}
	return strings.TrimSpace(out), nil
}

// Build compiles the Go package pkg ("./infra/local", "./functions/api") of
// commit for this machine into cacheDir/<commit>/, from the commit's own
// tree (git archive), and returns the binary's path; a binary already there
// is reused. tags are build tags ("lambda.norpc" for a function).
func Build(ctx context.Context, root, commit, pkg, cacheDir string, tags ...string) (string, error) {
	if len(commit) != 40 {
		return "", fmt.Errorf("build %s: want a full commit hash, got %q", pkg, commit)
	}
	dir := filepath.Join(cacheDir, commit)
	bin := filepath.Join(dir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-")+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build %s of %s: %w", pkg, commit[:7], err)
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", fmt.Errorf("build %s of %s: %w", pkg, commit[:7], err)
	}
	defer os.RemoveAll(src)
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	archive.Dir = root
	tar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	var tarErr, gitErr bytes.Buffer
	tar.Stderr, archive.Stderr = &tarErr, &gitErr
	if tar.Stdin, err = archive.StdoutPipe(); err != nil {
		return "", err
	}
	if err := tar.Start(); err != nil {
		return "", fmt.Errorf("unpack %s: %w", commit[:7], err)
	}
	if err := archive.Run(); err != nil {
		_ = tar.Wait()
		return "", fmt.Errorf("git archive %s: %w: %s", commit[:7], err, gitErr.String())
	}
	if err := tar.Wait(); err != nil {
		return "", fmt.Errorf("unpack %s: %w: %s", commit[:7], err, tarErr.String())
	}
	tmp := bin + ".tmp-" + filepath.Base(src)
	args := []string{"build", "-o", tmp}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s of release %s: %w\n%s", pkg, commit[:7], err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("build %s of %s: %w", pkg, commit[:7], err)
	}
	return bin, nil
}

// CacheDir is where built releases are kept: $XDG_CACHE_HOME/shopstream/releases
// (or ~/.cache/…), as the Makefile keeps DynamoDB Local.
func CacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", errors.New("no cache directory: set XDG_CACHE_HOME or HOME")
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "shopstream", "releases"), nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
