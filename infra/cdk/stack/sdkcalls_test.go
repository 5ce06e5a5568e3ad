package stack_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// dynamoActions maps the SDK's request literals to the IAM action they need
// (for TransactWriteItems, each item's own action: "Using IAM policies with
// DynamoDB transactions").
var dynamoActions = map[string]string{
	"dynamodb.GetItemInput":        "dynamodb:GetItem",
	"dynamodb.PutItemInput":        "dynamodb:PutItem",
	"dynamodb.UpdateItemInput":     "dynamodb:UpdateItem",
	"dynamodb.DeleteItemInput":     "dynamodb:DeleteItem",
	"dynamodb.QueryInput":          "dynamodb:Query",
	"dynamodb.ScanInput":           "dynamodb:Scan",
	"dynamodb.BatchGetItemInput":   "dynamodb:BatchGetItem",
	"dynamodb.BatchWriteItemInput": "dynamodb:BatchWriteItem",
	"types.Put":                    "dynamodb:PutItem",
	"types.Update":                 "dynamodb:UpdateItem",
	"types.Delete":                 "dynamodb:DeleteItem",
	"types.ConditionCheck":         "dynamodb:ConditionCheckItem",
	"types.Get":                    "dynamodb:GetItem",
}

// dynamicTables names the tables of the requests whose table the source does
// not spell out (a variable), by file, action and table expression. A new
// request of that kind fails the test until it is listed here.
var dynamicTables = map[string][]string{
	"functions/api/store/users.go dynamodb:UpdateItem update.TableName": {tables.Users},
	// ddbcall.BatchGet sends the requests its callers build (their
	// map[string]types.KeysAndAttributes literals name the tables).
	"shared/ddbcall/ddbcall.go dynamodb:BatchGetItem req":                                        {},
	"functions/counters/counting/counting.go dynamodb:UpdateItem aws.String(item.table)":         {tables.Users, tables.Products},
	"functions/counters/counting/counting.go dynamodb:ConditionCheckItem aws.String(item.table)": {tables.Users, tables.Products},
}

// sdkCalls reads the Go source of every package of this module that fn's
// binary is built from (go list -deps) and returns the DynamoDB actions its
// requests need, by table.
func sdkCalls(t *testing.T, fn string) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./functions/"+fn)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", fn, err)
	}
	byField := map[string]string{}
	for _, def := range tables.All() {
		byField[strings.TrimSuffix(stack.OutputTableName(def.Name), "TableName")] = def.Name
	}
	calls := map[string]map[string]bool{}
	add := func(table, action string) {
		if calls[table] == nil {
			calls[table] = map[string]bool{}
		}
		calls[table][action] = true
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // not this module
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			relFile := filepath.ToSlash(filepath.Join(rel, filepath.Base(f)))
			ast.Inspect(file, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if mt, ok := cl.Type.(*ast.MapType); ok {
					// A batch read's request, built where its tables are
					// named and sent by shared/ddbcall.BatchGet.
					if v, ok := mt.Value.(*ast.SelectorExpr); ok && v.Sel.Name == "KeysAndAttributes" {
						for _, e := range cl.Elts {
							kv, ok := e.(*ast.KeyValueExpr)
							if !ok {
								continue
							}
							if table, ok := byField[lastName(kv.Key)]; ok {
								add(table, "dynamodb:BatchGetItem")
								continue
							}
							t.Errorf("%s: a batch read of a table the source does not name (%s)", fset.Position(kv.Pos()), render(fset, kv.Key))
						}
					}
					return true
				}
				sel, ok := cl.Type.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				action, ok := dynamoActions[pkg.Name+"."+sel.Sel.Name]
				if !ok {
					return true
				}
				expr := tableExpr(cl)
				if table, ok := byField[lastName(expr)]; ok {
					add(table, action)
					return true
				}
				key := relFile + " " + action + " " + render(fset, expr)
				names, ok := dynamicTables[key]
				if !ok {
					t.Errorf("%s: %s on a table the source does not name (%s): list it in dynamicTables as %q", fset.Position(cl.Pos()), action, render(fset, expr), key)
				}
				for _, tn := range names {
					add(tn, action)
				}
				return true
			})
		}
	}
	res := map[string][]string{}
	for tn, acts := range calls {
		for a := range acts {
			res[tn] = append(res[tn], a)
		}
		sort.Strings(res[tn])
	}
	return res
}

// tableExpr is the expression naming a request's table: its TableName, or
// for a batch its RequestItems.
func tableExpr(cl *ast.CompositeLit) ast.Expr {
	for _, e := range cl.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "TableName" || k.Name == "RequestItems") {
			return kv.Value
		}
	}
	return nil
}

// lastName is the field an expression like aws.String(s.t.Products) or
// h.deps.Tables.CounterEvents ends with ("Products", "CounterEvents").
func lastName(e ast.Expr) string {
	if c, ok := e.(*ast.CallExpr); ok && len(c.Args) == 1 {
		e = c.Args[0]
	}
	if s, ok := e.(*ast.SelectorExpr); ok {
		return s.Sel.Name
	}
	return ""
}

func render(fset *token.FileSet, e ast.Expr) string {
	if e == nil {
		return "<none>"
	}
	var b strings.Builder
	if err := printer.Fprint(&b, fset, e); err != nil {
		return err.Error()
	}
	return b.String()
}

// TestGrantsMatchSDKCalls: each function may call, on each table, exactly
// the DynamoDB actions its code's requests need, read from the source of
// what its binary is built from: no grant the code never uses, no request
// the grants would refuse.
func TestGrantsMatchSDKCalls(t *testing.T) {
	for _, fn := range wiring.Functions() {
		t.Run(fn, func(t *testing.T) {
			a := stack.Accesses()[fn]
			want := sdkCalls(t, fn)
			got := map[string][]string{}
			for tn, acts := range a.TableActions {
				got[tn] = sorted(acts)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("granted actions by table differ from the SDK calls (-calls +granted):\n%s", d)
			}
			var names []string
			for tn := range a.TableActions {
				names = append(names, tn)
			}
			if d := cmp.Diff(sorted(a.Tables), sorted(names)); d != "" {
				t.Errorf("tables with grants differ from the tables it is given (-tables +grants):\n%s", d)
			}
		})
	}
}

func TestSDKCallScanSeesRequests(t *testing.T) {
	calls := sdkCalls(t, wiring.API)
	if got := fmt.Sprint(calls[tables.Products]); !strings.Contains(got, "dynamodb:BatchGetItem") || !strings.Contains(got, "dynamodb:Query") {
		t.Errorf("products: %s, want the API's batch reads and queries found", got)
	}
}

// TestTableGrantsInTemplates: the roles' DynamoDB statements in both stages'
// templates and in template.yaml grant each function exactly its
// TableActions, on the table and, for Query, its indexes; the counters'
// markers only under the facts' key prefixes (dynamodb:LeadingKeys).
func TestTableGrantsInTemplates(t *testing.T) {
	sam := loadSAM(t)
	samTables := map[string]string{} // logical id -> table
	for _, def := range tables.All() {
		id, _ := sam.byName("AWS::DynamoDB::Table", "TableName", def.Name)
		samTables[id] = def.Name
	}
	for fnName, a := range stack.Accesses() {
		t.Run(fnName, func(t *testing.T) {
			want := map[string][]string{}
			for tn, acts := range a.TableActions {
				want[tn] = sorted(acts)
			}
			// The CDK app, every stage.
			for _, name := range stageNames() {
				s := stages[name]
				cdkTables := map[string]string{}
				for tn, tb := range s.stack.Tables {
					cdkTables[s.logicalID(tb)] = tn
				}
				roleID := s.logicalID(s.stack.Functions[fnName].Role())
				got := map[string][]string{}
				for _, pol := range s.resources("AWS::IAM::Policy") {
					if !slices.Contains(refs(props(pol)["Roles"]), roleID) {
						continue
					}
					collectTableGrants(t, pol["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any), cdkTables, got, name)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s: table grants (-accesses +template):\n%s", name, d)
				}
			}
			// template.yaml.
			_, p := sam.byName("AWS::Serverless::Function", "FunctionName", fnName)
			got := map[string][]string{}
			pols, _ := p["Policies"].([]any)
			for _, pol := range pols {
				if sts, ok := pol.(map[string]any)["Statement"].([]any); ok {
					collectTableGrants(t, sts, samTables, got, "template.yaml")
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("template.yaml: table grants (-accesses +template):\n%s", d)
			}
		})
	}
}

// collectTableGrants adds the item actions of statements on tables (by
// logical id) to got, and checks the index resources and the markers'
// condition.
func collectTableGrants(t *testing.T, statements []any, byID map[string]string, got map[string][]string, where string) {
	t.Helper()
	for _, st := range statements {
		st := st.(map[string]any)
		var acts []string
		for _, act := range strs(st["Action"]) {
			switch act {
			case "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams":
				// stream reads of the event-source mappings
			default:
				if strings.HasPrefix(act, "dynamodb:") {
					acts = append(acts, act)
				}
			}
		}
		if len(acts) == 0 {
			continue
		}
		seen := map[string]bool{}
		for _, id := range refs(st["Resource"]) {
			tn, ok := byID[id]
			if !ok {
				t.Errorf("%s: %v on %s, not a table", where, acts, id)
				continue
			}
			if seen[tn] {
				continue // the table and its indexes
			}
			seen[tn] = true
			got[tn] = sorted(append(got[tn], acts...))
			res := fmt.Sprint(st["Resource"])
			if strings.Contains(res, "/index/*") {
				t.Errorf("%s: %s: %v on %s: every index by name, no wildcard", where, tn, acts, res)
			}
			def, _ := tables.ByName(tn)
			for _, ix := range append(slices.Clone(def.GlobalIndexes), def.LocalIndexes...) {
				if strings.Contains(res, "/index/"+ix.Name) != slices.Contains(acts, "dynamodb:Query") {
					t.Errorf("%s: %s: %v on %s: index %s granted exactly when Query is", where, tn, acts, res, ix.Name)
				}
			}
			cond := fmt.Sprint(st["Condition"])
			if tn == tables.CounterEvents {
				if !strings.Contains(cond, "dynamodb:LeadingKeys") {
					t.Errorf("%s: markers not bound to the facts' key prefixes: %s", where, cond)
				}
				for _, p := range facts.KeyPrefixes() {
					if !strings.Contains(cond, "["+p+"*") && !strings.Contains(cond, " "+p+"*") {
						t.Errorf("%s: markers not bound to the facts' key prefixes (%s*): %s", where, p, cond)
					}
				}
			}
		}
	}
}
