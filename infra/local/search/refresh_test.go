package search

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// startClosable opens a search service on dir for a test that closes it
// itself (to open dir again).
func startClosable(t *testing.T, dir string) (*Server, *harness) {
	t.Helper()
	srv, err := New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, serve(t, srv)
}

// landed waits until a document is written (GET by id is real-time), up
// to 10 s.
func (h *harness) landed(t *testing.T, index, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if code, _ := h.raw(t, "GET", "/"+index+"/_doc/"+id, ""); code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s never landed", index, id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// count is the index's _count, as searches see it.
func (h *harness) count(t testing.TB, index string) int {
	t.Helper()
	code, body := h.raw(t, "GET", "/"+index+"/_count", "")
	if code != 200 {
		t.Fatalf("count %s: %d %v", index, code, body)
	}
	n, _ := body["count"].(float64)
	return int(n)
}

// TestRefreshMakesWritesSearchable: a write is searchable at the index's
// next refresh (every second by default), at once with ?refresh=true, and
// by the answer with ?refresh=wait_for; a GET by id sees it at once. An
// index with refresh_interval -1 shows a write only after POST _refresh.
func TestRefreshMakesWritesSearchable(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "items", `{"mappings":{"properties":{"name":{"type":"text"}}}}`)
	h.createIndex(t, "manual", `{"settings":{"index":{"refresh_interval":"-1"}},"mappings":{"properties":{"name":{"type":"text"}}}}`)
	ctx := context.Background()
	put := func(index, id, refresh string) *opensearchapi.IndexResp {
		t.Helper()
		resp, err := h.client.Index(ctx, opensearchapi.IndexReq{Index: index, DocumentID: id, Body: strings.NewReader(`{"name":"lamp ` + id + `"}`),
			Params: opensearchapi.IndexParams{Refresh: refresh}})
		if err != nil {
			t.Fatalf("index %s/%s: %v", index, id, err)
		}
		return resp
	}
	get := func(index, id string) int {
		t.Helper()
		code, _ := h.raw(t, "GET", "/"+index+"/_doc/"+id, "")
		return code
	}
	hits := func(index string) int {
		t.Helper()
		return h.search(t, index, `{"query":{"match":{"name":"lamp"}}}`).Hits.Total.Value
	}
	// eventually waits for a count, up to 5 s: the next scheduled refresh
	// comes within a second.
	eventually := func(index string, want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for h.count(t, index) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: count %d after 5 s, want %d", index, h.count(t, index), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	put("items", "a", "")
	if got := get("items", "a"); got != 200 {
		t.Errorf("GET right after the write: %d, want 200 (real-time)", got)
	}
	if n, m := h.count(t, "items"), hits("items"); n != 0 || m != 0 {
		t.Errorf("count %d and search hits %d right after a write without refresh, want 0 and 0", n, m)
	}
	eventually("items", 1)
	if got := hits("items"); got != 1 {
		t.Errorf("search after the refresh: %d hits, want 1", got)
	}

	if r := put("items", "b", "true"); !r.ForcedRefresh {
		t.Errorf("refresh=true: forced_refresh false in %+v", r)
	}
	if n := h.count(t, "items"); n != 2 {
		t.Errorf("count right after a write with refresh=true: %d, want 2", n)
	}
	put("items", "c", "wait_for")
	if n := h.count(t, "items"); n != 3 {
		t.Errorf("count right after a write with refresh=wait_for: %d, want 3", n)
	}

	code, _ := h.raw(t, "DELETE", "/items/_doc/a", "")
	if code != 200 || get("items", "a") != 404 {
		t.Fatalf("delete: %d, then GET %d; want 200 then 404", code, get("items", "a"))
	}
	if n := h.count(t, "items"); n != 3 {
		t.Errorf("count right after a delete without refresh: %d, want 3 (still searchable)", n)
	}
	eventually("items", 2)

	code, body := h.raw(t, "POST", "/items/_bulk?refresh=true", `{"index":{"_id":"d"}}
{"name":"lamp d"}
`)
	if items, _ := body["items"].([]any); code != 200 || len(items) != 1 || !strings.Contains(fmt.Sprint(items[0]), "forced_refresh:true") {
		t.Errorf("bulk with refresh=true: %d %v, want forced_refresh on its item", code, body)
	}
	if n := h.count(t, "items"); n != 3 {
		t.Errorf("count right after a bulk with refresh=true: %d, want 3", n)
	}
	if code, _ := h.raw(t, "POST", "/items/_bulk?refresh=soon", `{"index":{"_id":"e"}}
{"name":"lamp e"}
`); code != 400 || get("items", "e") != 404 {
		t.Errorf("bulk with refresh=soon: %d, then GET %d; want 400 and nothing written", code, get("items", "e"))
	}

	put("manual", "x", "")
	time.Sleep(defaultRefreshInterval + 200*time.Millisecond)
	if n := h.count(t, "manual"); n != 0 {
		t.Errorf("refresh_interval -1: count %d after a second, want 0", n)
	}
	if code, _ := h.raw(t, "POST", "/manual/_refresh", ""); code != 200 {
		t.Fatalf("_refresh: %d", code)
	}
	if n := h.count(t, "manual"); n != 1 {
		t.Errorf("refresh_interval -1: count %d after _refresh, want 1", n)
	}
	if code, body := h.raw(t, "PUT", "/bad", `{"settings":{"index":{"refresh_interval":"soon"}}}`); code != 400 {
		t.Errorf("refresh_interval soon: %d %v, want 400", code, body)
	}
}

// TestRestartRefreshes: a write acknowledged but not yet refreshed is
// searchable after a restart, as OpenSearch's recovery ends with a refresh.
func TestRestartRefreshes(t *testing.T) {
	dir := t.TempDir()
	srv, h := startClosable(t, dir)
	h.createIndex(t, "kept", `{"settings":{"index":{"refresh_interval":"-1"}},"mappings":{"properties":{"name":{"type":"text"}}}}`)
	if code, _ := h.raw(t, "PUT", "/kept/_doc/a", `{"name":"lamp"}`); code != 201 {
		t.Fatalf("put: %d", code)
	}
	if n := h.count(t, "kept"); n != 0 {
		t.Fatalf("count before the restart: %d, want 0", n)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	h2 := start(t, dir, nil)
	if n := h2.count(t, "kept"); n != 1 {
		t.Errorf("count after the restart: %d, want 1", n)
	}
	if got := h2.search(t, "kept", `{"query":{"match":{"name":"lamp"}}}`).Hits.Total.Value; got != 1 {
		t.Errorf("search after the restart: %d hits, want 1", got)
	}
}

// TestDeleteReleasesWaitingWrites: a write waiting for its index's refresh
// (?refresh=wait_for) is answered when the index is deleted meanwhile; the
// delete does not wait for the refresh.
func TestDeleteReleasesWaitingWrites(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "slow", `{"settings":{"index":{"refresh_interval":"1h"}}}`)
	done := make(chan int, 1)
	go func() {
		code, _ := h.raw(t, "PUT", "/slow/_doc/a?refresh=wait_for", `{"name":"lamp"}`)
		done <- code
	}()
	h.landed(t, "slow", "a") // written, now waiting for the refresh
	select {
	case code := <-done:
		t.Fatalf("wait_for answered %d before any refresh", code)
	case <-time.After(100 * time.Millisecond):
	}
	if code, body := h.raw(t, "DELETE", "/slow", ""); code != 200 {
		t.Fatalf("delete the index: %d %v", code, body)
	}
	select {
	case code := <-done:
		if code != 201 {
			t.Errorf("the waiting write: %d, want 201", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting write was not answered after its index was deleted")
	}
}

// TestWaitForOnAnIndexWithoutScheduledRefreshes: with refresh_interval -1,
// a write sent with ?refresh=wait_for is answered at the next refresh
// someone asks for; _flush is not one (OpenSearch's flush refreshes only
// its internal searcher).
func TestWaitForOnAnIndexWithoutScheduledRefreshes(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "manual", `{"settings":{"index":{"refresh_interval":"-1"}}}`)
	done := make(chan int, 1)
	go func() {
		code, _ := h.raw(t, "PUT", "/manual/_doc/a?refresh=wait_for", `{"name":"lamp"}`)
		done <- code
	}()
	h.landed(t, "manual", "a")
	if code, _ := h.raw(t, "POST", "/manual/_flush", ""); code != 200 {
		t.Fatalf("_flush: %d", code)
	}
	select {
	case code := <-done:
		t.Fatalf("wait_for answered %d with no refresh asked for", code)
	case <-time.After(300 * time.Millisecond):
	}
	if n := h.count(t, "manual"); n != 0 {
		t.Errorf("count after _flush: %d, want 0", n)
	}
	if code, _ := h.raw(t, "POST", "/_refresh", ""); code != 200 {
		t.Fatalf("_refresh: %d", code)
	}
	select {
	case code := <-done:
		if code != 201 {
			t.Errorf("the waiting write: %d, want 201", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting write was not answered after _refresh")
	}
	if n := h.count(t, "manual"); n != 1 {
		t.Errorf("count after _refresh: %d, want 1", n)
	}
}

// TestRestartRebuildsEveryDocument: a restart rebuilds the searchable view
// page by page (more documents than a page), and a document that no longer
// parses under its index's mapping (a field it did not index, mapped since
// with another type) does not stop the service from opening: it stays
// found by id.
func TestRestartRebuildsEveryDocument(t *testing.T) {
	dir := t.TempDir()
	srv, h := startClosable(t, dir)
	h.createIndex(t, "many", `{"mappings":{"properties":{"name":{"type":"text"}}}}`)
	var nd strings.Builder
	const n = 1234
	for i := range n {
		fmt.Fprintf(&nd, "{\"index\":{\"_id\":\"d%04d\"}}\n{\"name\":\"lamp %d\"}\n", i, i)
	}
	if code, body := h.raw(t, "POST", "/many/_bulk", nd.String()); code != 200 || body["errors"] != false {
		t.Fatalf("bulk: %d %v", code, body)
	}
	h.createIndex(t, "loose", `{"mappings":{"dynamic":false,"properties":{"name":{"type":"text"}}}}`)
	if code, _ := h.raw(t, "PUT", "/loose/_doc/1", `{"name":"lamp","n":"abc"}`); code != 201 {
		t.Fatalf("put: %d", code)
	}
	if code, body := h.raw(t, "PUT", "/loose/_mapping", `{"properties":{"n":{"type":"long"}}}`); code != 200 {
		t.Fatalf("put mapping: %d %v", code, body)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	h2 := start(t, dir, nil)
	if got := h2.count(t, "many"); got != n {
		t.Errorf("count after the restart: %d, want %d", got, n)
	}
	if got := h2.search(t, "many", `{"query":{"match":{"name":"1233"}}}`).Hits.Total.Value; got != 1 {
		t.Errorf("search of the last document after the restart: %d hits, want 1", got)
	}
	if got := h2.search(t, "loose", `{"query":{"ids":{"values":["1"]}}}`).Hits.Total.Value; got != 1 {
		t.Errorf("the document that no longer parses, by id after the restart: %d hits, want 1", got)
	}
}
