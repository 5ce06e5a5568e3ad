package search

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// TestRejectedBulkItems: with the fault hook set, the next actions of _bulk
// requests answer 429 rejected_execution_exception and are not applied; the
// others of the same request are; the count left is reported.
func TestRejectedBulkItems(t *testing.T) {
	srv, err := New("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h := serve(t, srv)
	call := func(method, body string) (int, string) {
		req, _ := http.NewRequest(method, h.url+FaultsPath, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if got, _ := call("POST", `{"rejectBulkItems":0}`); got != http.StatusBadRequest {
		t.Fatalf("a fault of no items: %d, want 400", got)
	}
	if got, _ := call("POST", `{"rejectBulkItems":2}`); got != http.StatusNoContent {
		t.Fatalf("add fault: %d", got)
	}
	var nd strings.Builder
	for _, id := range []string{"a", "b", "c"} {
		nd.WriteString(`{"index":{"_id":"` + id + `","version":1,"version_type":"external"}}` + "\n" + `{"name":"` + id + `"}` + "\n")
	}
	resp := h.bulk(t, "products", nd.String())
	if !resp.Errors {
		t.Errorf("bulk with rejected items: errors false")
	}
	for i, want := range []int{429, 429, 201} {
		it := itemOf(t, resp.Items[i])
		if it.Status != want {
			t.Errorf("item %d: status %d, want %d", i, it.Status, want)
		}
		if want == 429 && (it.Error == nil || it.Error.Type != "rejected_execution_exception") {
			t.Errorf("item %d: error %+v, want rejected_execution_exception", i, it.Error)
		}
	}
	for id, want := range map[string]bool{"a": false, "b": false, "c": true} {
		_, err := h.client.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: "products", DocumentID: id})
		if found := err == nil; found != want {
			t.Errorf("document %s found: %v, want %v (%v)", id, found, want, err)
		}
	}
	_, left := call("GET", "")
	var n map[string]int
	if err := json.Unmarshal([]byte(left), &n); err != nil || n["rejectBulkItems"] != 0 {
		t.Errorf("faults left: %s, want 0", left)
	}

	// A request refused whole: 429, nothing applied.
	if got, _ := call("POST", `{"rejectBulkRequests":1}`); got != http.StatusNoContent {
		t.Fatalf("add fault: %d", got)
	}
	_, err = h.client.Bulk(context.Background(), opensearchapi.BulkReq{Index: "products",
		Body: strings.NewReader(`{"index":{"_id":"d","version":1,"version_type":"external"}}` + "\n" + `{"name":"d"}` + "\n")})
	if err == nil || !strings.Contains(err.Error(), "429") {
		t.Errorf("bulk refused whole: %v, want a 429", err)
	}
	if _, err := h.client.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: "products", DocumentID: "d"}); err == nil {
		t.Error("the refused request's document was written")
	}
	_, left = call("GET", "")
	if err := json.Unmarshal([]byte(left), &n); err != nil || n["rejectBulkRequests"] != 0 {
		t.Errorf("faults left: %s, want 0", left)
	}
}
