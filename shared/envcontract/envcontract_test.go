package envcontract_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

func TestEveryFunctionHasAContract(t *testing.T) {
	var got []string
	for _, c := range envcontract.All() {
		got = append(got, c.Function)
		for _, tn := range append(append([]string(nil), c.Tables...), c.StreamTables...) {
			if _, err := tables.ByName(tn); err != nil {
				t.Errorf("%s: %v", c.Function, err)
			}
		}
	}
	if d := cmp.Diff(wiring.Functions(), got); d != "" {
		t.Errorf("functions (-wiring +contracts):\n%s", d)
	}
}

func TestReadTables(t *testing.T) {
	c := envcontract.Of(wiring.Archiver)
	env := map[string]string{"ORDERS_TABLE": "p-orders", "CARTS_TABLE": "p-carts", "USERS_TABLE": "p-users"}
	got, err := c.ReadTables(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	// The archiver's contract names orders and carts, not users.
	if want := (tables.Names{Orders: "p-orders", Carts: "p-carts"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	delete(env, "CARTS_TABLE")
	if _, err := c.ReadTables(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "CARTS_TABLE") {
		t.Errorf("got %v, want an error naming CARTS_TABLE", err)
	}
}

func TestOnlyHidesWhatTheContractLacks(t *testing.T) {
	getenv := envcontract.Of(wiring.StreamIndexer).Only(func(k string) string { return "set" })
	if got := getenv(envcontract.SearchURL); got != "set" {
		t.Errorf("%s: got %q, want set", envcontract.SearchURL, got)
	}
	if got := getenv(envcontract.ArchiveBucket); got != "" {
		t.Errorf("%s: got %q, want it hidden", envcontract.ArchiveBucket, got)
	}
}

// TestFunctionsReadOnlyTheirContract reads each function's code (its folder
// under functions/) and infra/streamfunctions, which builds the stream
// functions for the local stack and the replay, for the variables they read:
// getenv(…) or os.Getenv/os.LookupEnv(…) of a name, and a name passed beside
// getenv to a helper such as envcontract.Duration; and the contracts whose
// tables it reads, envcontract.Of(wiring.…). Each must be in the function's
// contract, or be its contract; a name the scan cannot resolve to a constant
// fails too.
func TestFunctionsReadOnlyTheirContract(t *testing.T) {
	consts := stringConstants(t, "envcontract.go")
	functions := stringConstants(t, filepath.Join("..", "wiring", "wiring.go"))
	streamReads := map[string]bool{}
	for _, c := range envcontract.All() {
		if c.Function != wiring.API {
			for _, v := range c.Reads() {
				streamReads[v] = true
			}
		}
	}
	check := func(dir string, allowed func(string) bool, own func(string) bool) {
		t.Helper()
		reads, contracts, unresolved := envReads(t, dir, consts, functions)
		if len(reads)+len(contracts) == 0 {
			t.Errorf("%s: no variable read found; is the scan blind?", dir)
		}
		for name, where := range reads {
			if !allowed(name) {
				t.Errorf("%s reads %s, not in its environment contract (shared/envcontract)", where, name)
			}
		}
		for fn, where := range contracts {
			if !own(fn) {
				t.Errorf("%s reads the environment contract of %s, not its own", where, fn)
			}
		}
		for _, where := range unresolved {
			t.Errorf("%s: a variable or contract named by an expression the scan cannot resolve; name it with an envcontract or wiring constant", where)
		}
	}
	for _, c := range envcontract.All() {
		check(filepath.Join("..", "..", "functions", c.Function), c.Allows, func(fn string) bool { return fn == c.Function })
	}
	check(filepath.Join("..", "..", "infra", "streamfunctions"), func(v string) bool { return streamReads[v] },
		func(fn string) bool { return fn != wiring.API })
}

// stringConstants returns the string constants a Go file declares, by name.
func stringConstants(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
		return true
	})
	return out
}

// envReads returns the variables the non-test Go files below dir read and the
// functions whose contracts they take, each with one place, and the places of
// reads it could not resolve.
func envReads(t *testing.T, dir string, consts, functions map[string]string) (reads, contracts map[string]string, unresolved []string) {
	t.Helper()
	reads, contracts = map[string]string{}, map[string]string{}
	fset := token.NewFileSet()
	isGetenv := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name == "getenv"
		case *ast.SelectorExpr:
			id, ok := x.X.(*ast.Ident)
			return ok && id.Name == "os" && (x.Sel.Name == "Getenv" || x.Sel.Name == "LookupEnv")
		}
		return false
	}
	name := func(e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				v, _ := strconv.Unquote(x.Value)
				return v, true
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "envcontract" {
				v, ok := consts[x.Sel.Name]
				return v, ok
			}
		}
		return "", false
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			where := fset.Position(call.Pos()).String()
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Of" && len(call.Args) == 1 {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "envcontract" {
					fn, ok := call.Args[0].(*ast.SelectorExpr)
					if v, found := "", false; ok {
						if pkg, ok := fn.X.(*ast.Ident); ok && pkg.Name == "wiring" {
							v, found = functions[fn.Sel.Name]
						}
						if found {
							contracts[v] = where
							return true
						}
					}
					unresolved = append(unresolved, where)
					return true
				}
			}
			if isGetenv(call.Fun) && len(call.Args) == 1 {
				if _, param := call.Args[0].(*ast.Ident); param {
					// A helper's parameter: its callers name the variable.
					return true
				}
				if v, ok := name(call.Args[0]); ok {
					reads[v] = where
				} else {
					unresolved = append(unresolved, where)
				}
				return true
			}
			if slices.ContainsFunc(call.Args, isGetenv) {
				for _, a := range call.Args {
					if v, ok := name(a); ok && v == strings.ToUpper(v) && v != "" {
						reads[v] = where
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return reads, contracts, unresolved
}
