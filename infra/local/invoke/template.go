// Package invoke runs one function of template.yaml on one event the way
// `sam local invoke` does, without Docker: it reads the function from the
// template (Globals, Timeout, MemorySize, LoggingConfig and the variables it
// declares), gives it exactly the environment SAM would (values from the
// template, then the shell, then an --env-vars file), builds its bootstrap
// with the Makefile target `sam build` runs, and serves it the event through
// the local Lambda Runtime API (infra/local/lambdart). `make invoke` is its
// command (`go run ./infra/local invoke`).
package invoke

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/shopstream/shopstream/shared/cfntemplate"
)

// SAM's defaults for a function that sets no MemorySize or Timeout.
const (
	DefaultMemoryMiB = 128
	DefaultTimeout   = 3 * time.Second
)

// pseudoParams are the values SAM gives CloudFormation's pseudo parameters
// locally (samcli/lib/intrinsic_resolver/intrinsics_symbol_table.py).
var pseudoParams = map[string]string{
	"AWS::AccountId": "123456789012",
	"AWS::Partition": "aws",
	"AWS::Region":    "us-east-1",
	"AWS::StackName": "local",
	"AWS::StackId":   "arn:aws:cloudformation:us-east-1:123456789012:stack/local/51af3dc0-da77-11e4-872e-1234567db123",
	"AWS::URLSuffix": "localhost",
}

// Template is a SAM template read for local invocation.
type Template struct {
	// Dir is the template's folder; CodeUri is relative to it.
	Dir       string
	params    map[string]string
	resources map[string]map[string]any
	globals   map[string]any
}

// Function is one AWS::Serverless::Function of the template, Globals applied
// and intrinsic functions resolved as SAM resolves them locally.
type Function struct {
	// LogicalID is the resource's logical id (ApiFunction).
	LogicalID string
	// Name is the resolved FunctionName property; "" when the template sets none.
	Name string
	// CodeDir is the absolute CodeUri: where the Makefile of a makefile build is.
	CodeDir     string
	Handler     string
	Runtime     string
	BuildMethod string
	MemoryMiB   int
	Timeout     time.Duration
	// LogFormat is LoggingConfig.LogFormat (JSON or Text); LogLevel its
	// ApplicationLogLevel.
	LogFormat, LogLevel string
	// Variables are the declared environment variables with the template's
	// values: strings, numbers, booleans, or an unresolved intrinsic (a map).
	Variables map[string]any
}

// Load reads a SAM template. params overrides the template's parameter
// defaults (sam's --parameter-overrides); AWS::Region may be given there too.
func Load(path string, params map[string]string) (*Template, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	doc, err := cfntemplate.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", path, err)
	}
	t := &Template{Dir: dir, params: map[string]string{}, resources: map[string]map[string]any{}}
	for k, v := range pseudoParams {
		t.params[k] = v
	}
	declared, _ := doc["Parameters"].(map[string]any)
	for name, p := range declared {
		if p, ok := p.(map[string]any); ok {
			if def, ok := p["Default"]; ok {
				t.params[name] = stringify(def)
			}
		}
	}
	for k, v := range params {
		t.params[k] = v
	}
	res, _ := doc["Resources"].(map[string]any)
	for id, r := range res {
		if r, ok := r.(map[string]any); ok {
			t.resources[id] = r
		}
	}
	if g, ok := doc["Globals"].(map[string]any); ok {
		t.globals, _ = g["Function"].(map[string]any)
	}
	return t, nil
}

// Functions returns every AWS::Serverless::Function, by logical id.
func (t *Template) Functions() ([]*Function, error) {
	var ids []string
	for id, r := range t.resources {
		if r["Type"] == "AWS::Serverless::Function" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []*Function
	for _, id := range ids {
		f, err := t.function(id)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Function finds a function by logical id (ApiFunction), by its FunctionName
// (shopstream-dev-api), or by the folder under functions/ it is built from
// (api): the folder whose name ends its FunctionName.
func (t *Template) Function(name string) (*Function, error) {
	fns, err := t.Functions()
	if err != nil {
		return nil, err
	}
	for _, f := range fns {
		if f.LogicalID == name || (f.Name != "" && f.Name == name) {
			return f, nil
		}
	}
	var found []*Function
	for _, f := range fns {
		if name != "" && strings.HasSuffix(f.Name, "-"+name) && isFile(filepath.Join(f.CodeDir, "functions", name, "main.go")) {
			found = append(found, f)
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	var ids []string
	for _, f := range fns {
		ids = append(ids, f.LogicalID)
	}
	return nil, fmt.Errorf("no function %q in the template (one of %s, or its folder under functions/)", name, strings.Join(ids, ", "))
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func (t *Template) function(id string) (*Function, error) {
	r := t.resources[id]
	props, _ := r["Properties"].(map[string]any)
	props, _ = mergeGlobals(t.globals, props).(map[string]any)
	props, _ = t.resolve(props).(map[string]any)
	f := &Function{LogicalID: id, MemoryMiB: DefaultMemoryMiB, Timeout: DefaultTimeout, Variables: map[string]any{}}
	f.Name, _ = props["FunctionName"].(string)
	f.Handler, _ = props["Handler"].(string)
	f.Runtime, _ = props["Runtime"].(string)
	if meta, ok := r["Metadata"].(map[string]any); ok {
		f.BuildMethod, _ = meta["BuildMethod"].(string)
	}
	code, ok := props["CodeUri"].(string)
	if !ok {
		return nil, fmt.Errorf("function %s: CodeUri is not a local path", id)
	}
	f.CodeDir = filepath.Clean(filepath.Join(t.Dir, code))
	if v, ok := props["MemorySize"]; ok {
		n, err := wholeNumber(v)
		if err != nil {
			return nil, fmt.Errorf("function %s: MemorySize: %w", id, err)
		}
		f.MemoryMiB = n
	}
	if v, ok := props["Timeout"]; ok {
		n, err := wholeNumber(v)
		if err != nil {
			return nil, fmt.Errorf("function %s: Timeout: %w", id, err)
		}
		f.Timeout = time.Duration(n) * time.Second
	}
	if lc, ok := props["LoggingConfig"].(map[string]any); ok {
		f.LogFormat, _ = lc["LogFormat"].(string)
		f.LogLevel, _ = lc["ApplicationLogLevel"].(string)
	}
	if env, ok := props["Environment"].(map[string]any); ok {
		if vars, ok := env["Variables"].(map[string]any); ok {
			f.Variables = vars
		}
	}
	return f, nil
}

func wholeNumber(v any) (int, error) {
	switch n := v.(type) {
	case int:
		return n, nil
	case float64:
		if n == float64(int(n)) {
			return int(n), nil
		}
	case string:
		var i int
		if _, err := fmt.Sscan(n, &i); err == nil && fmt.Sprint(i) == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("got %v, want a whole number", v)
}

// mergeGlobals applies a Globals section to a resource's properties as SAM
// does: the resource's own scalar wins, maps merge key by key, and the
// entries of a global list come before the resource's.
func mergeGlobals(global, local any) any {
	switch g := global.(type) {
	case map[string]any:
		l, ok := local.(map[string]any)
		if local == nil {
			l, ok = map[string]any{}, true
		}
		if !ok || isIntrinsic(g) || isIntrinsic(l) {
			return local
		}
		out := map[string]any{}
		for k, v := range g {
			out[k] = v
		}
		for k, v := range l {
			if gv, ok := g[k]; ok {
				out[k] = mergeGlobals(gv, v)
			} else {
				out[k] = v
			}
		}
		return out
	case []any:
		l, ok := local.([]any)
		if !ok {
			if local == nil {
				return g
			}
			return local
		}
		return append(append([]any(nil), g...), l...)
	default:
		if local == nil {
			return global
		}
		return local
	}
}

func isIntrinsic(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::")
	}
	return false
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// resolve replaces Ref and Fn::Sub as SAM's local resolver does: a
// parameter's value, a pseudo parameter's local value, a resource's logical
// id. What it cannot resolve stays as it is (a map), which becomes "" in an
// environment variable, as in SAM.
func (t *Template) resolve(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if isIntrinsic(x) {
			if s, ok := t.intrinsic(x); ok {
				return s
			}
			return x
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = t.resolve(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = t.resolve(e)
		}
		return out
	default:
		return v
	}
}

func (t *Template) intrinsic(m map[string]any) (string, bool) {
	if name, ok := m["Ref"].(string); ok {
		return t.ref(name)
	}
	sub, ok := m["Fn::Sub"]
	if !ok {
		return "", false
	}
	var text string
	vars := map[string]any{}
	switch s := sub.(type) {
	case string:
		text = s
	case []any:
		if len(s) != 2 {
			return "", false
		}
		text, _ = s[0].(string)
		vars, _ = s[1].(map[string]any)
	default:
		return "", false
	}
	resolved := true
	out := subVar.ReplaceAllStringFunc(text, func(match string) string {
		name := match[2 : len(match)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		if v, ok := vars[name]; ok {
			if v, ok := t.resolve(v).(string); ok {
				return v
			}
			resolved = false
			return match
		}
		if v, ok := t.ref(name); ok {
			return v
		}
		resolved = false
		return match
	})
	return out, resolved
}

func (t *Template) ref(name string) (string, bool) {
	if v, ok := t.params[name]; ok {
		return v, true
	}
	if _, ok := t.resources[name]; ok {
		return name, true
	}
	return "", false
}
