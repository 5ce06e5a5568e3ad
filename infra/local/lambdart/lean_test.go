package lambdart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

func moduleRoot(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// functions lists the functions that exist in this tree.
func functions(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, fn := range wiring.Functions() {
		if _, err := os.Stat(filepath.Join(moduleRoot(tb), "functions", fn, "main.go")); err == nil {
			out = append(out, fn)
		}
	}
	if len(out) == 0 {
		tb.Fatal("no function found under functions/")
	}
	return out
}

// TestFunctionsStayLean fails when a Lambda binary pulls in what it never runs:
// the CDK, the local stack, the search engine behind it.
func TestFunctionsStayLean(t *testing.T) {
	banned := []string{"github.com/aws/aws-cdk-go", "github.com/aws/jsii-runtime-go", "github.com/blevesearch/", "github.com/johannesboyne/gofakes3", "github.com/shopstream/shopstream/infra/"}
	for _, fn := range functions(t) {
		t.Run(fn, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "./functions/"+fn)
			cmd.Dir = moduleRoot(t)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, b := range banned {
					if strings.HasPrefix(dep, b) {
						t.Errorf("%s depends on %s", fn, dep)
					}
				}
			}
		})
	}
}

// localEnv is a whole function environment (Run passes on nothing else):
// JSON logs as the functions' LoggingConfig asks, endpoints that answer nothing.
func localEnv() []string {
	env := []string{"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"AWS_LAMBDA_LOG_FORMAT=JSON", "AWS_LAMBDA_FUNCTION_NAME=shopstream-test", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		"ARCHIVE_BUCKET=shopstream-archive", "SEARCH_URL=http://127.0.0.1:1", "SEARCH_ENDPOINT=http://127.0.0.1:1", "CURSOR_SECRET=cold-start-secret-0123456789"}
	for _, t := range tables.All() {
		env = append(env, t.EnvVar+"=cold-"+t.Name)
	}
	return env
}

func firstEvent(tb testing.TB, fn string) []byte {
	tb.Helper()
	if fn != wiring.API {
		return []byte(`{"Records":[]}`)
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot(tb), "events", "api-healthz.json"))
	if err != nil {
		tb.Fatalf("read healthz event: %v", err)
	}
	return b
}
