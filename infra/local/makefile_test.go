package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// phonyTargets returns the Makefile's .PHONY targets, continuation lines
// included.
func phonyTargets(t *testing.T, makefile string) []string {
	t.Helper()
	f, err := os.Open(makefile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, ".PHONY:"); ok {
			in, line = true, rest
		}
		if !in {
			continue
		}
		more := strings.HasSuffix(line, "\\")
		names = append(names, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		in = more
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestMakeHelpListsEveryTarget: every .PHONY target has its `## name:
// description` line, and `make help` prints each with its description.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	makefile := filepath.Join(dir, "Makefile")
	raw, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	phony := phonyTargets(t, makefile)
	if len(phony) < 10 {
		t.Fatalf("got %d .PHONY targets (%v), want the Makefile's list", len(phony), phony)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "help")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	for _, name := range phony {
		doc := regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(name) + `: \S`)
		if !doc.Match(raw) {
			t.Errorf("target %s: no `## %s: description` line in the Makefile", name, name)
		}
		listed := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` +\S`)
		if !listed.Match(out) {
			t.Errorf("target %s: not listed with a description by make help:\n%s", name, out)
		}
	}
}
