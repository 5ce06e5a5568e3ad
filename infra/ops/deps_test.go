package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOpsLinksNoEmulator: the command an operator runs against a stage
// links no part of the local stack and no search engine (it had 72 bleve
// packages, gofakes3 and DynamoDB Local's launcher through one call).
func TestOpsLinksNoEmulator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "github.com/shopstream/shopstream/infra/local"),
			strings.Contains(pkg, "blevesearch"),
			strings.Contains(pkg, "gofakes3"):
			bad = append(bad, pkg)
		}
	}
	if len(bad) > 0 {
		t.Errorf("infra/ops links %d emulator packages, want none: %v", len(bad), bad)
	}
}
