package httpapi_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/infra/local/samples"
)

// TestSampleEvents runs every events/api-*.json, in name order on one set of
// tables, through the handler and compares the status and problem type with
// testdata/events/<name>.golden (rewritten by -update).
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, f := range samples.Files(t, "api-*.json") {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		var ev events.APIGatewayV2HTTPRequest
		samples.Decode(t, f, &ev)
		r := e.send(ev)
		got := fmt.Sprintf("%d %s\n", r.StatusCode, r.str("type"))
		samples.Golden(t, filepath.Join("testdata", "events", name+".golden"), []byte(got))
	}
}
