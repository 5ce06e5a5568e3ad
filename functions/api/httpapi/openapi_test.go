package httpapi_test

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/shopstream/shopstream/functions/api/httpapi"
)

// TestOpenAPIMatchesRoutes fails when docs/openapi.yaml and the router
// disagree: a route without an operation, an operation without a route, a
// public route that the document says needs a token (or the reverse), or a
// problem type the document does not list.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI  string                                 `yaml:"openapi"`
		Security []map[string][]string                  `yaml:"security"`
		Paths    map[string]map[string]yaml.Node        `yaml:"paths"`
		Comps    struct{ Schemas map[string]yaml.Node } `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("got openapi %q, want 3.1.x", doc.OpenAPI)
	}
	documented := map[string]bool{} // pattern → public
	for path, ops := range doc.Paths {
		for method, node := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				Security *[]map[string][]string `yaml:"security"`
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			documented[strings.ToUpper(method)+" "+path] = op.Security != nil && len(*op.Security) == 0
		}
	}
	routed := map[string]bool{}
	for _, rt := range httpapi.Routes() {
		routed[rt.Pattern] = rt.Access == httpapi.Public
	}
	for p, public := range routed {
		docPublic, ok := documented[p]
		switch {
		case !ok:
			t.Errorf("route %s is not in docs/openapi.yaml", p)
		case docPublic != public:
			t.Errorf("route %s: public %v in the router, %v in docs/openapi.yaml", p, public, docPublic)
		}
	}
	for p := range documented {
		if _, ok := routed[p]; !ok {
			t.Errorf("docs/openapi.yaml documents %s, which no route serves", p)
		}
	}

	var problem struct {
		Properties struct {
			Type struct {
				Enum []string `yaml:"enum"`
			} `yaml:"type"`
		} `yaml:"properties"`
	}
	node := doc.Comps.Schemas["Problem"]
	if err := node.Decode(&problem); err != nil {
		t.Fatal(err)
	}
	types := []string{
		httpapi.TypeValidation, httpapi.TypeUnauthorized, httpapi.TypeForbidden, httpapi.TypeNotFound,
		httpapi.TypeConflict, httpapi.TypePreconditionFailed, httpapi.TypePayloadTooLarge, httpapi.TypeUnavailable,
	}
	got := slices.Clone(problem.Properties.Type.Enum)
	sort.Strings(got)
	sort.Strings(types)
	if !slices.Equal(got, types) {
		t.Errorf("got problem types %v in docs/openapi.yaml, want %v", got, types)
	}
}
