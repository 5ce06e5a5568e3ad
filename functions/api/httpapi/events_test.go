package httpapi_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/events")

// TestSampleEvents runs every events/api-*.json, in name order on one set of
// tables, through the handler and compares the status and problem type with
// testdata/events/<name>.golden (rewritten by -update).
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../../events/api-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample events: %v", err)
	}
	e := newEnv(t)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		r := e.send(ev)
		got := fmt.Sprintf("%d %s\n", r.StatusCode, r.str("type"))
		golden := filepath.Join("testdata", "events", name+".golden")
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		wantRaw, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%s: %v (run with -update)", name, err)
		}
		if got != string(wantRaw) {
			t.Errorf("%s: got %q, want %q", name, got, wantRaw)
		}
	}
}
