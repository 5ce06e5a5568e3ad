package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/shopstream/shopstream/"

// goPackage is one package of the module as go list gives it: its direct
// imports and everything it links, test files left out.
type goPackage struct {
	path          string // relative to the module
	name          string
	imports, deps []string
}

func listPackages(t *testing.T, root string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Name}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list: a line of %d fields: %q", len(f), line)
		}
		pkgs = append(pkgs, goPackage{path: strings.TrimPrefix(f[0], module), name: f[1], imports: strings.Fields(f[2]), deps: strings.Fields(f[3])})
	}
	return pkgs
}

// isStd says whether an import path is the standard library's: its first
// element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// houseRow is one row of docs/house.md's table of rooms.
type houseRow struct {
	rooms   []string // as written, in backticks
	imports string   // the imports column as written
}

func houseRows(t *testing.T, root string) []houseRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "docs", "house.md"))
	if err != nil {
		t.Fatal(err)
	}
	ticked := regexp.MustCompile("`([^`]+)`")
	var rows []houseRow
	in := false
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "| room | holds | imports |"):
			in = true
			continue
		case !in || strings.HasPrefix(line, "|---"):
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/house.md: a row of %d cells, want 3: %q", len(cells), line)
		}
		var r houseRow
		for _, m := range ticked.FindAllStringSubmatch(cells[0], -1) {
			r.rooms = append(r.rooms, m[1])
		}
		r.imports = strings.TrimSpace(cells[2])
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("docs/house.md: no table of rooms")
	}
	return rows
}

// roomPackages are the packages a room names: a path and the packages
// under it; `functions/<fn>/main.go` is every function's main package;
// `x/*` is x and everything under it.
func roomPackages(room string, pkgs []goPackage) []goPackage {
	var out []goPackage
	for _, p := range pkgs {
		var in bool
		switch {
		case strings.Contains(room, "<fn>"):
			dir, rest, _ := strings.Cut(p.path, "/")
			in = dir == "functions" && !strings.Contains(rest, "/") && p.name == "main"
		case strings.HasSuffix(room, "/*"):
			base := strings.TrimSuffix(room, "/*")
			in = p.path == base || strings.HasPrefix(p.path, base+"/")
		default:
			in = p.path == room || strings.HasPrefix(p.path, room+"/")
		}
		if in {
			out = append(out, p)
		}
	}
	return out
}

// names says whether claim names import path imp: a module path
// ("shared/routes", "shared/*" for any under shared), or an outside one,
// whole, by a parent ("golang.org/x/text") or by its last elements
// ("aws-lambda-go/events").
func names(claim, imp string) bool {
	rel, ours := strings.CutPrefix(imp, module)
	switch {
	case strings.HasSuffix(claim, "/*"):
		return strings.HasPrefix(rel, strings.TrimSuffix(claim, "*"))
	case rel == claim, strings.HasPrefix(rel, claim+"/"):
		return true
	}
	return !ours && strings.HasSuffix(imp, "/"+claim)
}

// importedBy says whether some package of pkgs imports (deps: links) a
// package that claim names.
func importedBy(claim string, pkgs []goPackage, deps bool) bool {
	for _, p := range pkgs {
		list := p.imports
		if deps {
			list = p.deps
		}
		if slices.ContainsFunc(list, func(imp string) bool { return names(claim, imp) }) {
			return true
		}
	}
	return false
}

// TestHouseMatchesTheCode: docs/house.md's rooms are the module's packages,
// what it says each room imports is so, and its arrows point the one way
// it says. Every package is in a room; every path in a room's imports
// column is imported by the room; after "no", by none of it, through any
// chain; a room of "standard library" imports nothing else but what its
// row names; "SDKs" means an AWS SDK package.
func TestHouseMatchesTheCode(t *testing.T) {
	root := repoRoot(t)
	pkgs := listPackages(t, root)
	rows := houseRows(t, root)
	ticked := regexp.MustCompile("(no )?`([^`]+)`")

	housed := map[string]bool{}
	for _, r := range rows {
		var room []goPackage
		for _, name := range r.rooms {
			ps := roomPackages(name, pkgs)
			if len(ps) == 0 {
				t.Errorf("docs/house.md: room %q holds no package", name)
			}
			room = append(room, ps...)
		}
		for _, p := range room {
			housed[p.path] = true
		}
		var named []string
		for _, m := range ticked.FindAllStringSubmatch(r.imports, -1) {
			claim := m[2]
			if m[1] != "" {
				if importedBy(claim, room, true) {
					t.Errorf("docs/house.md: %v links %s, and the row says it does not", r.rooms, claim)
				}
				continue
			}
			named = append(named, claim)
			if !importedBy(claim, room, false) {
				t.Errorf("docs/house.md: %v imports no %s, and the row says it does", r.rooms, claim)
			}
		}
		if strings.Contains(r.imports, "SDKs") && !slices.ContainsFunc(room, func(p goPackage) bool {
			return slices.ContainsFunc(p.imports, func(imp string) bool { return strings.HasPrefix(imp, "github.com/aws/aws-sdk-go-v2/") })
		}) {
			t.Errorf("docs/house.md: %v imports no AWS SDK package, and the row says it does", r.rooms)
		}
		if strings.HasPrefix(r.imports, "standard library") {
			for _, p := range room {
				for _, imp := range p.imports {
					if isStd(imp) || slices.ContainsFunc(named, func(n string) bool { return names(n, imp) }) {
						continue
					}
					t.Errorf("docs/house.md: %s imports %s; its row allows the standard library and %v only", p.path, imp, named)
				}
			}
		}
	}
	for _, p := range pkgs {
		if !housed[p.path] {
			t.Errorf("docs/house.md: package %s is in no room", p.path)
		}
	}

	// The arrows.
	for _, p := range pkgs {
		top, _, _ := strings.Cut(p.path, "/")
		for _, imp := range p.imports {
			rel, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			switch {
			case top == "shared" && (strings.HasPrefix(rel, "functions/") || strings.HasPrefix(rel, "infra/")):
				t.Errorf("%s imports %s: shared imports neither functions nor infra", p.path, rel)
			case top == "functions" && strings.HasPrefix(rel, "functions/") && fnOf(rel) != fnOf(p.path):
				t.Errorf("%s imports %s: no function imports another", p.path, rel)
			case top == "functions" && strings.HasPrefix(rel, "infra/"):
				t.Errorf("%s imports %s: functions import shared only", p.path, rel)
			case strings.HasPrefix(p.path, "infra/cdk") && !strings.HasPrefix(rel, "shared/") && !strings.HasPrefix(rel, "infra/cdk"):
				t.Errorf("%s imports %s: the CDK app imports shared only", p.path, rel)
			case strings.HasPrefix(p.path, "infra/local") && (strings.HasPrefix(rel, "infra/ops") || strings.HasPrefix(rel, "infra/cdk")):
				t.Errorf("%s imports %s: the local stack imports neither the operator commands nor the CDK app", p.path, rel)
			case (strings.HasPrefix(p.path, "infra/ops") || p.path == "infra/streamfunctions") && strings.HasPrefix(rel, "infra/local"):
				t.Errorf("%s imports %s: operator commands run no part of the local stack", p.path, rel)
			}
		}
	}
}

// fnOf is the function a path under functions/ belongs to.
func fnOf(path string) string {
	parts := strings.SplitN(path, "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}
