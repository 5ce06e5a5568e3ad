package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackedFiles are the repository's files as git tracks them, relative to root.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
}

// slug is the anchor GitHub gives a Markdown heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsStayInRepository: what users rely on is in the repository. No
// tracked file points outside it (the contract once lived beside the clone,
// cited as a section sign and a number), every Markdown link to a file of the
// repository finds it, and every link to a section of docs/contract.md names
// one of its headings.
func TestDocsStayInRepository(t *testing.T) {
	root := repoRoot(t)
	// Spelled in parts, so that this file does not match itself.
	banned := []string{".." + "/shared", "CONTRACT " + "§", "CONTRACT " + "section"}

	contract, err := os.ReadFile(filepath.Join(root, "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, line := range strings.Split(string(contract), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections[slug(h)] = true
		}
	}
	sectionRef := regexp.MustCompile(`contract\.md#([A-Za-z0-9_-]+)`)
	mdLink := regexp.MustCompile(`\]\(([^)\s]+)\)`)

	for _, file := range trackedFiles(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		for _, b := range banned {
			if strings.Contains(text, b) {
				t.Errorf("%s mentions %q: cite docs/contract.md instead", file, b)
			}
		}
		for _, m := range sectionRef.FindAllStringSubmatch(text, -1) {
			if !sections[m[1]] {
				t.Errorf("%s links docs/contract.md#%s, which is no section of it", file, m[1])
			}
		}
		if !strings.HasSuffix(file, ".md") {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(root, filepath.Dir(file), target)
			if rel, err := filepath.Rel(root, path); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", file, m[1])
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s: %v", file, m[1], err)
			}
		}
	}
}
