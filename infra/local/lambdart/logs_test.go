package lambdart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/lambdart"
	"github.com/shopstream/shopstream/shared/wiring"
)

// TestAPILogsAreJSONWithBothRequestIDs runs the built api binary on a
// request and reads what it wrote: JSON lines (the LoggingConfig the
// functions are deployed with), each key once, Lambda's request id as
// requestId and API Gateway's as apiRequestId.
func TestAPILogsAreJSONWithBothRequestIDs(t *testing.T) {
	root := moduleRoot(t)
	bin, err := lambdart.Build(context.Background(), root, wiring.API, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := lambdart.Start("shopstream-test-api", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var out bytes.Buffer
	p, err := rt.Run(bin, localEnv(), &out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	event := firstEvent(t, wiring.API)
	var ev struct {
		RequestContext struct{ RequestID string } `json:"requestContext"`
	}
	if err := json.Unmarshal(event, &ev); err != nil || ev.RequestContext.RequestID == "" {
		t.Fatalf("sample event without a request id: %v", err)
	}
	res, err := rt.Invoke(ctx, event)
	p.Stop()
	if err != nil || res.Err != nil {
		t.Fatalf("invoke: %v %v\n%s", err, res.Err, out.String())
	}

	var seen bool
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		keys, err := objectKeys(line)
		if err != nil {
			t.Fatalf("not a JSON object: %q: %v", line, err)
		}
		for k, n := range keys {
			if n > 1 {
				t.Errorf("key %s %d times in %q", k, n, line)
			}
		}
		var rec map[string]any
		_ = json.Unmarshal([]byte(line), &rec)
		if rec["message"] != "request" {
			continue
		}
		seen = true
		if got := rec["requestId"]; got != "local-1" {
			t.Errorf("requestId: got %v, want Lambda's local-1", got)
		}
		if got := rec["apiRequestId"]; got != ev.RequestContext.RequestID {
			t.Errorf("apiRequestId: got %v, want the event's %s", got, ev.RequestContext.RequestID)
		}
	}
	if !seen {
		t.Errorf("no request log line in:\n%s", out.String())
	}
}

// objectKeys counts the top-level keys of the JSON object in line.
func objectKeys(line string) (map[string]int, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object, got %v (%v)", tok, err)
	}
	keys := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys[tok.(string)]++
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
