package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// harness is a search server on 127.0.0.1 and a real client talking to it.
type harness struct {
	srv    *Server
	url    string
	client *opensearchapi.Client
}

func start(t testing.TB, dir string, configure func(*Server)) *harness {
	t.Helper()
	srv, err := New(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New(%q): %v", dir, err)
	}
	if configure != nil {
		configure(srv)
	}
	h := serve(t, srv)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// serve exposes srv over HTTP until the test ends; the caller owns srv.
func serve(t testing.TB, srv *Server) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{ts.URL}}})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return &harness{srv: srv, url: ts.URL, client: client}
}

const productsMapping = `{
  "settings": {"index": {"number_of_shards": 1}},
  "mappings": {"properties": {
    "name":        {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
    "description": {"type": "text"},
    "category":    {"type": "keyword"},
    "priceCents":  {"type": "long"},
    "stock":       {"type": "integer"},
    "rating":      {"type": "float"},
    "active":      {"type": "boolean"},
    "createdAt":   {"type": "date"}
  }}
}`

type product struct {
	id, name, description, category string
	priceCents                      int
	createdAt                       string
}

func catalogue() []product {
	return []product{
		{"p1", "Red Running Shoes", "Lightweight shoes for road running", "shoes", 8999, "2024-01-05T10:00:00Z"},
		{"p2", "Blue Walking Shoes", "Comfortable shoes for long walks", "shoes", 5999, "2024-02-01T10:00:00Z"},
		{"p3", "Running Shorts", "Breathable shorts for running in the heat", "apparel", 2999, "2024-03-10T10:00:00Z"},
		{"p4", "Red Wool Scarf", "A warm scarf, red as a fire truck", "apparel", 1999, "2024-04-15T10:00:00Z"},
		{"p5", "Trail Running Shoes", "Grippy shoes for trail running", "shoes", 10999, "2024-05-20T10:00:00Z"},
	}
}

func (p product) source() string {
	b, _ := json.Marshal(map[string]any{
		"name": p.name, "description": p.description, "category": p.category,
		"priceCents": p.priceCents, "stock": 10, "active": p.priceCents < 10000, "createdAt": p.createdAt,
	})
	return string(b)
}

// seed creates the products index and indexes the catalogue.
func (h *harness) seed(t testing.TB) {
	t.Helper()
	h.createIndex(t, "products", productsMapping)
	var nd strings.Builder
	for _, p := range catalogue() {
		fmt.Fprintf(&nd, `{"index":{"_id":%q}}`+"\n%s\n", p.id, p.source())
	}
	resp := h.bulk(t, "products", nd.String())
	if resp.Errors {
		t.Fatalf("seed bulk: got errors in %+v", resp.Items)
	}
}

func (h *harness) createIndex(t testing.TB, name, body string) {
	t.Helper()
	req := opensearchapi.IndicesCreateReq{Index: name}
	if body != "" {
		req.Body = strings.NewReader(body)
	}
	if _, err := h.client.Indices.Create(context.Background(), req); err != nil {
		t.Fatalf("create index %s: %v", name, err)
	}
}

func (h *harness) bulk(t testing.TB, index, ndjson string) *opensearchapi.BulkResp {
	t.Helper()
	resp, err := h.client.Bulk(context.Background(), opensearchapi.BulkReq{Index: index, Body: strings.NewReader(ndjson), Params: opensearchapi.BulkParams{Refresh: "true"}})
	if err != nil {
		t.Fatalf("bulk: %v", err)
	}
	return resp
}

func (h *harness) search(t testing.TB, index, body string) *opensearchapi.SearchResp {
	t.Helper()
	resp, err := h.client.Search(context.Background(), &opensearchapi.SearchReq{Indices: []string{index}, Body: strings.NewReader(body)})
	if err != nil {
		t.Fatalf("search %s: %v", body, err)
	}
	return resp
}

// raw sends a request without the client and decodes the JSON answer.
func (h *harness) raw(t testing.TB, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	if method == http.MethodHead {
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: got Content-Type %q, want application/json", method, path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, b, err)
	}
	return resp.StatusCode, out
}

func hitIDs(resp *opensearchapi.SearchResp) []string {
	ids := make([]string, len(resp.Hits.Hits))
	for i, h := range resp.Hits.Hits {
		ids[i] = h.ID
	}
	return ids
}

// itemOf returns the single action result of a bulk item.
func itemOf(t testing.TB, item map[string]opensearchapi.BulkRespItem) opensearchapi.BulkRespItem {
	t.Helper()
	if len(item) != 1 {
		t.Fatalf("bulk item: got %d actions, want 1", len(item))
	}
	for _, v := range item {
		return v
	}
	return opensearchapi.BulkRespItem{}
}

// structErr extracts the OpenSearch error the client decoded.
func structErr(t testing.TB, err error) *opensearch.StructError {
	t.Helper()
	var se *opensearch.StructError
	if !errors.As(err, &se) {
		t.Fatalf("error: got %T %v, want *opensearch.StructError", err, err)
	}
	return se
}

func TestClusterInfoAndHealth(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	info, err := h.client.Info(ctx, nil)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Version.Distribution != "opensearch" {
		t.Errorf("distribution: got %q, want %q", info.Version.Distribution, "opensearch")
	}
	if info.Version.Number != "2.19.0" {
		t.Errorf("version: got %q, want %q", info.Version.Number, "2.19.0")
	}
	health, err := h.client.Cluster.Health(ctx, nil)
	if err != nil {
		t.Fatalf("Cluster.Health: %v", err)
	}
	if health.Status != "green" {
		t.Errorf("health: got %q, want %q", health.Status, "green")
	}
}

func TestIndexLifecycle(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	exists := func(name string) int {
		t.Helper()
		resp, err := h.client.Indices.Exists(ctx, opensearchapi.IndicesExistsReq{Indices: []string{name}})
		if resp == nil {
			t.Fatalf("Exists(%s): %v", name, err)
		}
		return resp.StatusCode
	}
	if got := exists("products"); got != http.StatusNotFound {
		t.Errorf("exists before create: got %d, want %d", got, http.StatusNotFound)
	}
	h.createIndex(t, "products", productsMapping)
	if got := exists("products"); got != http.StatusOK {
		t.Errorf("exists after create: got %d, want %d", got, http.StatusOK)
	}

	_, err := h.client.Indices.Create(ctx, opensearchapi.IndicesCreateReq{Index: "products"})
	se := structErr(t, err)
	if se.Status != http.StatusBadRequest || se.Err.Type != "resource_already_exists_exception" {
		t.Errorf("create twice: got %d %s, want 400 resource_already_exists_exception", se.Status, se.Err.Type)
	}

	got, err := h.client.Indices.Get(ctx, opensearchapi.IndicesGetReq{Indices: []string{"products"}})
	if err != nil {
		t.Fatalf("Indices.Get: %v", err)
	}
	var mapping struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal((*got.IndicesGetRespData)["products"].Mappings, &mapping); err != nil {
		t.Fatalf("decode mapping: %v", err)
	}
	for field, want := range map[string]string{"name": "text", "category": "keyword", "priceCents": "long", "createdAt": "date", "active": "boolean"} {
		if mapping.Properties[field].Type != want {
			t.Errorf("mapping of %s: got %q, want %q", field, mapping.Properties[field].Type, want)
		}
	}

	if _, err := h.client.Indices.Delete(ctx, opensearchapi.IndicesDeleteReq{Indices: []string{"products"}}); err != nil {
		t.Fatalf("Indices.Delete: %v", err)
	}
	if got := exists("products"); got != http.StatusNotFound {
		t.Errorf("exists after delete: got %d, want %d", got, http.StatusNotFound)
	}
	_, err = h.client.Indices.Delete(ctx, opensearchapi.IndicesDeleteReq{Indices: []string{"products"}})
	se = structErr(t, err)
	if se.Status != http.StatusNotFound || se.Err.Type != "index_not_found_exception" {
		t.Errorf("delete twice: got %d %s, want 404 index_not_found_exception", se.Status, se.Err.Type)
	}
}

func TestBulkIndexAndDelete(t *testing.T) {
	h := start(t, "", nil)
	h.seed(t)
	resp := h.bulk(t, "", `{"delete":{"_index":"products","_id":"p2"}}
{"index":{"_index":"products","_id":"p1"}}
{"name":"Red Running Shoes v2","category":"shoes","priceCents":7999}
{"create":{"_index":"products","_id":"p6"}}
{"name":"Green Socks","category":"apparel","priceCents":499}
{"delete":{"_index":"products","_id":"missing"}}
`)
	want := []struct {
		action, result  string
		status, version int
	}{
		{"delete", "deleted", 200, 2},
		{"index", "updated", 200, 2},
		{"create", "created", 201, 1},
		{"delete", "not_found", 404, 1},
	}
	if len(resp.Items) != len(want) {
		t.Fatalf("items: got %d, want %d", len(resp.Items), len(want))
	}
	for i, w := range want {
		item := resp.Items[i][w.action]
		if item.Result != w.result || item.Status != w.status || item.Version != w.version {
			t.Errorf("item %d (%s): got %s/%d/v%d, want %s/%d/v%d", i, w.action, item.Result, item.Status, item.Version, w.result, w.status, w.version)
		}
	}
	if resp.Errors {
		t.Errorf("errors: got true, want false (a missing delete is not an error)")
	}
	all := h.search(t, "products", `{"query":{"match_all":{}},"size":100}`)
	if got, want := all.Hits.Total.Value, 5; got != want {
		t.Errorf("hits.total.value: got %v, want %v", got, want)
	}
	if ids := hitIDs(all); slices.Contains(ids, "p2") || !slices.Contains(ids, "p6") {
		t.Errorf("ids after bulk: got %v, want p6 and not p2", ids)
	}

	// Indexing into a missing index creates it with dynamic mapping.
	resp = h.bulk(t, "", `{"index":{"_index":"reviews","_id":"r1"}}
{"productId":"p1","stars":5,"text":"great shoes","createdAt":"2024-06-01T12:00:00Z","verified":true,"score":4.5}
`)
	if item := itemOf(t, resp.Items[0]); item.Status != http.StatusCreated {
		t.Fatalf("auto-create: got status %d, want 201", item.Status)
	}
	status, body := h.raw(t, http.MethodGet, "/reviews/_mapping", "")
	if status != http.StatusOK {
		t.Fatalf("GET mapping: got %d, want 200", status)
	}
	props := body["reviews"].(map[string]any)["mappings"].(map[string]any)["properties"].(map[string]any)
	for field, want := range map[string]string{"productId": "text", "stars": "long", "createdAt": "date", "verified": "boolean", "score": "float"} {
		if got := props[field].(map[string]any)["type"]; got != want {
			t.Errorf("dynamic mapping of %s: got %v, want %v", field, got, want)
		}
	}
	// Dynamic strings get a keyword sub-field for exact matches.
	exact := h.search(t, "reviews", `{"query":{"term":{"productId.keyword":"p1"}}}`)
	if got := hitIDs(exact); !slices.Equal(got, []string{"r1"}) {
		t.Errorf("term on dynamic keyword: got %v, want [r1]", got)
	}
}

func TestExternalVersioning(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "products", productsMapping)
	steps := []struct {
		name        string
		version     int
		versionType string
		price       int
		wantStatus  int
	}{
		{"first write", 5, "external", 100, http.StatusCreated},
		{"older version rejected", 3, "external", 200, http.StatusConflict},
		{"equal version rejected by external", 5, "external", 300, http.StatusConflict},
		{"equal version accepted by external_gte", 5, "external_gte", 400, http.StatusOK},
		{"older version rejected by external_gte", 4, "external_gte", 500, http.StatusConflict},
		{"newer version wins", 7, "external", 600, http.StatusOK},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			nd := fmt.Sprintf(`{"index":{"_id":"p1","version":%d,"version_type":%q}}`+"\n"+`{"name":"Shoe","priceCents":%d}`+"\n", st.version, st.versionType, st.price)
			resp := h.bulk(t, "products", nd)
			item := itemOf(t, resp.Items[0])
			if item.Status != st.wantStatus {
				t.Fatalf("status: got %d, want %d", item.Status, st.wantStatus)
			}
			if st.wantStatus == http.StatusConflict {
				if !resp.Errors {
					t.Errorf("errors: got false, want true")
				}
				if item.Error == nil || item.Error.Type != "version_conflict_engine_exception" {
					t.Errorf("error: got %+v, want version_conflict_engine_exception", item.Error)
				}
				return
			}
			if resp.Errors {
				t.Errorf("errors: got true, want false")
			}
			if item.Version != st.version {
				t.Errorf("_version: got %d, want %d", item.Version, st.version)
			}
		})
	}
	doc, err := h.client.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: "products", DocumentID: "p1"})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	var src struct {
		PriceCents int `json:"priceCents"`
	}
	if err := json.Unmarshal(doc.Source, &src); err != nil {
		t.Fatalf("decode source: %v", err)
	}
	if doc.Version != 7 || src.PriceCents != 600 {
		t.Errorf("final document: got v%d price %d, want v7 price 600", doc.Version, src.PriceCents)
	}

	// The single-document API takes the same parameters.
	_, err = h.client.Index(context.Background(), opensearchapi.IndexReq{
		Index: "products", DocumentID: "p1", Body: strings.NewReader(`{"priceCents":1}`),
		Params: opensearchapi.IndexParams{Version: new(6), VersionType: "external_gte"},
	})
	if se := structErr(t, err); se.Status != http.StatusConflict || se.Err.Type != "version_conflict_engine_exception" {
		t.Errorf("PUT _doc with older version: got %d %s, want 409 version_conflict_engine_exception", se.Status, se.Err.Type)
	}
	ok, err := h.client.Index(context.Background(), opensearchapi.IndexReq{
		Index: "products", DocumentID: "p1", Body: strings.NewReader(`{"priceCents":2}`),
		Params: opensearchapi.IndexParams{Version: new(8), VersionType: "external_gte"},
	})
	if err != nil {
		t.Fatalf("PUT _doc with newer version: %v", err)
	}
	if ok.Version != 8 || ok.Result != "updated" {
		t.Errorf("PUT _doc with newer version: got v%d %s, want v8 updated", ok.Version, ok.Result)
	}

	// Internal versioning counts up, and a version without a type is refused as by OpenSearch.
	status, body := h.raw(t, http.MethodPut, "/products/_doc/p9", `{"name":"x"}`)
	status2, body2 := h.raw(t, http.MethodPut, "/products/_doc/p9", `{"name":"y"}`)
	if status != http.StatusCreated || body["_version"] != 1.0 || status2 != http.StatusOK || body2["_version"] != 2.0 {
		t.Errorf("internal versions: got %d v%v then %d v%v, want 201 v1 then 200 v2", status, body["_version"], status2, body2["_version"])
	}
	status, body = h.raw(t, http.MethodPut, "/products/_doc/p9?version=3", `{"name":"z"}`)
	if status != http.StatusBadRequest || errorType(body) != "action_request_validation_exception" {
		t.Errorf("internal version with version param: got %d %s, want 400 action_request_validation_exception", status, errorType(body))
	}
}

func errorType(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

func errorReason(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["reason"].(string)
	return s
}

func TestTombstones(t *testing.T) {
	const window = 3 * time.Second // the checks inside it take a few ms; a loaded machine may pause for more
	h := start(t, "", func(s *Server) { s.GCDeletes = window })
	h.createIndex(t, "products", productsMapping)
	write := func(action string, version int) opensearchapi.BulkRespItem {
		t.Helper()
		nd := fmt.Sprintf(`{%q:{"_id":"p1","version":%d,"version_type":"external"}}`+"\n", action, version)
		if action != "delete" {
			nd += `{"name":"Shoe"}` + "\n"
		}
		return itemOf(t, h.bulk(t, "products", nd).Items[0])
	}
	if got := write("index", 1).Status; got != http.StatusCreated {
		t.Fatalf("index v1: got %d, want 201", got)
	}
	deletedAt := time.Now()
	if got := write("delete", 3); got.Status != http.StatusOK || got.Result != "deleted" {
		t.Fatalf("delete v3: got %d %s, want 200 deleted", got.Status, got.Result)
	}
	if got := write("index", 2).Status; got != http.StatusConflict {
		t.Errorf("older index within gc_deletes: got %d, want 409", got)
	}
	if got := write("delete", 2).Status; got != http.StatusConflict {
		t.Errorf("older delete within gc_deletes: got %d, want 409", got)
	}
	if time.Since(deletedAt) >= window {
		t.Fatalf("the checks within the window took %v, longer than the %v window", time.Since(deletedAt), window)
	}
	time.Sleep(window - time.Since(deletedAt) + 50*time.Millisecond)
	if got := write("index", 2); got.Status != http.StatusCreated || got.Version != 2 {
		t.Errorf("older index after gc_deletes: got %d v%d, want 201 v2 (resurrected)", got.Status, got.Version)
	}

	// A delete of a document never seen still leaves a tombstone.
	resp := h.bulk(t, "products", `{"delete":{"_id":"p2","version":10,"version_type":"external"}}`+"\n"+
		`{"index":{"_id":"p2","version":9,"version_type":"external"}}`+"\n"+`{"name":"late"}`+"\n")
	if got := itemOf(t, resp.Items[0]); got.Status != http.StatusNotFound || got.Result != "not_found" {
		t.Errorf("delete of unseen doc: got %d %s, want 404 not_found", got.Status, got.Result)
	}
	if got := itemOf(t, resp.Items[1]).Status; got != http.StatusConflict {
		t.Errorf("older index after delete of unseen doc: got %d, want 409", got)
	}

	// An index's own index.gc_deletes setting wins over the server default.
	h.createIndex(t, "nogc", `{"settings":{"index":{"gc_deletes":"0s"}}}`)
	resp = h.bulk(t, "nogc", `{"index":{"_id":"a","version":5,"version_type":"external"}}`+"\n{}\n"+
		`{"delete":{"_id":"a","version":6,"version_type":"external"}}`+"\n"+
		`{"index":{"_id":"a","version":1,"version_type":"external"}}`+"\n{}\n")
	if got := itemOf(t, resp.Items[2]).Status; got != http.StatusCreated {
		t.Errorf("index.gc_deletes=0s: got %d, want 201", got)
	}
}

func TestSearch(t *testing.T) {
	h := start(t, "", nil)
	h.seed(t)
	tests := []struct {
		name  string
		body  string
		want  []string
		total int
	}{
		{"multi_match ranks the best match first", `{"query":{"multi_match":{"query":"red running shoes","fields":["name^3","description"]}},"size":3}`, []string{"p1"}, 5},
		{"match with operator and", `{"query":{"match":{"name":{"query":"running shoes","operator":"and"}}},"sort":["_id"]}`, []string{"p1", "p5"}, 2},
		{"match is stemmed", `{"query":{"match":{"description":"walk"}}}`, []string{"p2"}, 1},
		{"term on keyword", `{"query":{"term":{"category":"apparel"}},"sort":[{"priceCents":"asc"}]}`, []string{"p4", "p3"}, 2},
		{"term on keyword is exact", `{"query":{"term":{"category":"Apparel"}}}`, []string{}, 0},
		{"terms", `{"query":{"terms":{"_id":["p2","p4","nope"]}},"sort":["_id"]}`, []string{"p2", "p4"}, 2},
		{"range on long", `{"query":{"range":{"priceCents":{"gte":2999,"lt":8999}}},"sort":[{"priceCents":"asc"}]}`, []string{"p3", "p2"}, 2},
		{"range on date", `{"query":{"range":{"createdAt":{"gte":"2024-03-01","lte":"2024-04-30"}}},"sort":["_id"]}`, []string{"p3", "p4"}, 2},
		{"term on boolean", `{"query":{"term":{"active":false}}}`, []string{"p5"}, 1},
		{"bool must filter must_not", `{"query":{"bool":{
			"must":[{"match":{"description":"running"}}],
			"filter":[{"term":{"category":"shoes"}}],
			"must_not":[{"range":{"priceCents":{"gte":10000}}}]}}}`, []string{"p1"}, 1},
		{"bool should with filter is optional", `{"query":{"bool":{
			"filter":{"term":{"category":"shoes"}},
			"should":[{"match":{"name":"trail"}}]}}}`, []string{"p5"}, 3},
		{"bool should alone needs one match", `{"query":{"bool":{"should":[{"term":{"category":"nope"}},{"match":{"name":"scarf"}}]}}}`, []string{"p4"}, 1},
		{"must on an unmapped field matches nothing", `{"query":{"bool":{"must":[{"term":{"nope":"x"}}],"should":[{"match_all":{}}]}}}`, []string{}, 0},
		{"exists", `{"query":{"bool":{"must_not":{"exists":{"field":"createdAt"}}}}}`, []string{}, 0},
		{"match_phrase", `{"query":{"match_phrase":{"description":"trail running"}}}`, []string{"p5"}, 1},
		{"fuzzy match", `{"query":{"match":{"name":{"query":"scraf","fuzziness":"AUTO"}}}}`, []string{"p4"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.search(t, "products", tt.body)
			got := hitIDs(resp)
			if len(tt.want) == 0 {
				if len(got) != 0 {
					t.Errorf("hits: got %v, want none", got)
				}
			} else if !slices.Equal(got[:min(len(got), len(tt.want))], tt.want) {
				t.Errorf("hits: got %v, want %v first", got, tt.want)
			}
			if resp.Hits.Total.Value != tt.total || resp.Hits.Total.Relation != "eq" {
				t.Errorf("hits.total: got %v %s, want %v eq", resp.Hits.Total.Value, resp.Hits.Total.Relation, tt.total)
			}
		})
	}

	t.Run("scores are ordered and max_score is the first", func(t *testing.T) {
		resp := h.search(t, "products", `{"query":{"multi_match":{"query":"red running shoes","fields":["name^3","description"]}}}`)
		for i := 1; i < len(resp.Hits.Hits); i++ {
			if resp.Hits.Hits[i].Score > resp.Hits.Hits[i-1].Score {
				t.Errorf("hit %d score %v above hit %d score %v", i, resp.Hits.Hits[i].Score, i-1, resp.Hits.Hits[i-1].Score)
			}
		}
		if resp.Hits.MaxScore == nil || *resp.Hits.MaxScore != resp.Hits.Hits[0].Score {
			t.Errorf("max_score: got %v, want %v", resp.Hits.MaxScore, resp.Hits.Hits[0].Score)
		}
	})

	t.Run("source filtering", func(t *testing.T) {
		resp := h.search(t, "products", `{"query":{"ids":{"values":["p1"]}},"_source":["name","price*"]}`)
		var src map[string]any
		if err := json.Unmarshal(resp.Hits.Hits[0].Source, &src); err != nil {
			t.Fatalf("decode: %v", err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range src {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(keys, []string{"name", "priceCents"}) {
			t.Errorf("_source keys: got %v, want [name priceCents]", keys)
		}
	})

	t.Run("count", func(t *testing.T) {
		status, body := h.raw(t, http.MethodPost, "/products/_count", `{"query":{"term":{"category":"shoes"}}}`)
		if status != http.StatusOK || body["count"] != 3.0 {
			t.Errorf("_count: got %d %v, want 200 3", status, body["count"])
		}
	})
}

func TestPagingAndSort(t *testing.T) {
	h := start(t, "", nil)
	h.seed(t)
	byPrice := []string{"p4", "p3", "p2", "p1", "p5"}
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"first page", `{"sort":[{"priceCents":"asc"},"_score"],"from":0,"size":2}`, byPrice[0:2]},
		{"second page", `{"sort":[{"priceCents":"asc"},"_score"],"from":2,"size":2}`, byPrice[2:4]},
		{"last page", `{"sort":[{"priceCents":"asc"},"_score"],"from":4,"size":2}`, byPrice[4:]},
		{"past the end", `{"sort":[{"priceCents":"asc"}],"from":10,"size":2}`, []string{}},
		{"descending with order object", `{"sort":{"priceCents":{"order":"desc"}},"size":3}`, []string{"p5", "p1", "p2"}},
		{"keyword then number", `{"sort":[{"category":"asc"},{"priceCents":"desc"}]}`, []string{"p3", "p4", "p5", "p1", "p2"}},
		{"date descending", `{"sort":[{"createdAt":"desc"}],"size":1}`, []string{"p5"}},
		{"default size is 10", `{"query":{"match_all":{}},"sort":["_id"]}`, []string{"p1", "p2", "p3", "p4", "p5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.search(t, "products", tt.body)
			if got := hitIDs(resp); !slices.Equal(got, tt.want) {
				t.Errorf("hits: got %v, want %v", got, tt.want)
			}
			if resp.Hits.Total.Value != 5 {
				t.Errorf("hits.total.value: got %v, want %v", resp.Hits.Total.Value, 5)
			}
		})
	}

	t.Run("sort values and scores", func(t *testing.T) {
		resp := h.search(t, "products", `{"sort":[{"priceCents":"asc"}],"size":1}`)
		hit := resp.Hits.Hits[0]
		if len(hit.Sort) != 1 || hit.Sort[0] != 1999.0 {
			t.Errorf("sort values: got %v, want [1999]", hit.Sort)
		}
		if resp.Hits.MaxScore != nil {
			t.Errorf("max_score when sorting by a field: got %v, want null", *resp.Hits.MaxScore)
		}
	})

	t.Run("track_total_hits", func(t *testing.T) {
		resp := h.search(t, "products", `{"track_total_hits":2,"size":0}`)
		if resp.Hits.Total.Value != 2 || resp.Hits.Total.Relation != "gte" || len(resp.Hits.Hits) != 0 {
			t.Errorf("track_total_hits 2: got %v %s and %d hits, want 2 gte and 0 hits", resp.Hits.Total.Value, resp.Hits.Total.Relation, len(resp.Hits.Hits))
		}
	})

	t.Run("sorting a text field is refused", func(t *testing.T) {
		status, body := h.raw(t, http.MethodPost, "/products/_search", `{"sort":["description"]}`)
		if status != http.StatusBadRequest || errorType(body) != "illegal_argument_exception" {
			t.Errorf("sort on text: got %d %s, want 400 illegal_argument_exception", status, errorType(body))
		}
	})
}

func TestGetDocument(t *testing.T) {
	h := start(t, "", nil)
	h.seed(t)
	ctx := context.Background()
	doc, err := h.client.Document.Get(ctx, opensearchapi.DocumentGetReq{Index: "products", DocumentID: "p3"})
	if err != nil {
		t.Fatalf("get p3: %v", err)
	}
	if !doc.Found || doc.ID != "p3" || doc.Index != "products" || doc.Version != 1 {
		t.Errorf("get p3: got found=%v id=%s index=%s v%d, want found p3 products v1", doc.Found, doc.ID, doc.Index, doc.Version)
	}
	if want := catalogue()[2].source(); string(doc.Source) != want {
		t.Errorf("_source: got %s, want %s", doc.Source, want)
	}

	status, body := h.raw(t, http.MethodGet, "/products/_doc/nope", "")
	if status != http.StatusNotFound || body["found"] != false || body["_id"] != "nope" {
		t.Errorf("get missing: got %d %v, want 404 found=false", status, body)
	}
	if _, err := h.client.Document.Get(ctx, opensearchapi.DocumentGetReq{Index: "products", DocumentID: "nope"}); err == nil {
		t.Errorf("client get missing: got no error, want one")
	}
	status, body = h.raw(t, http.MethodGet, "/nothere/_doc/p1", "")
	if status != http.StatusNotFound || errorType(body) != "index_not_found_exception" {
		t.Errorf("get in missing index: got %d %s, want 404 index_not_found_exception", status, errorType(body))
	}
	if status, _ := h.raw(t, http.MethodHead, "/products/_doc/p1", ""); status != http.StatusOK {
		t.Errorf("HEAD existing doc: got %d, want 200", status)
	}

	// A document id may hold characters that need escaping.
	if status, _ := h.raw(t, http.MethodPut, "/products/_doc/a%2Fb%20c", `{"name":"odd"}`); status != http.StatusCreated {
		t.Fatalf("PUT odd id: got %d, want 201", status)
	}
	doc, err = h.client.Document.Get(ctx, opensearchapi.DocumentGetReq{Index: "products", DocumentID: "a/b c"})
	if err != nil || doc.ID != "a/b c" {
		t.Errorf("get odd id: got %v %v, want a/b c", doc.ID, err)
	}
}

func TestBadRequests(t *testing.T) {
	h := start(t, "", nil)
	h.seed(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		errType                  string
		reasonHas                string
	}{
		{"bulk action is not JSON", "POST", "/_bulk", "not json\n", 400, "illegal_argument_exception", "Malformed action/metadata line [1]"},
		{"bulk without trailing newline", "POST", "/_bulk", `{"index":{"_index":"products","_id":"1"}}` + "\n{}", 400, "illegal_argument_exception", "terminated by a newline"},
		{"bulk unknown action", "POST", "/_bulk", `{"upsert":{"_index":"products"}}` + "\n{}\n", 400, "illegal_argument_exception", "[upsert]"},
		{"bulk without index", "POST", "/_bulk", `{"index":{"_id":"1"}}` + "\n{}\n", 400, "action_request_validation_exception", "index is missing"},
		{"bulk empty", "POST", "/products/_bulk", "\n", 400, "action_request_validation_exception", "no requests added"},
		{"search body is not JSON", "POST", "/products/_search", `{"query":`, 400, "json_parse_exception", ""},
		{"unknown query", "POST", "/products/_search", `{"query":{"frobnicate":{}}}`, 400, "parsing_exception", "unknown query [frobnicate]"},
		{"unsupported query", "POST", "/products/_search", `{"query":{"geo_distance":{"distance":"1km"}}}`, 400, "illegal_argument_exception", "geo_distance"},
		{"unsupported aggregation", "POST", "/products/_search", `{"aggs":{"c":{"terms":{"field":"category"}}}}`, 400, "illegal_argument_exception", "aggs"},
		{"two queries in one object", "POST", "/products/_search", `{"query":{"match_all":{},"term":{"a":"b"}}}`, 400, "parsing_exception", ""},
		{"negative size", "POST", "/products/_search", `{"size":-1}`, 400, "illegal_argument_exception", "size"},
		{"result window too large", "POST", "/products/_search", `{"from":9990,"size":20}`, 400, "illegal_argument_exception", "Result window is too large"},
		{"bad number in range", "POST", "/products/_search", `{"query":{"range":{"priceCents":{"gte":"cheap"}}}}`, 400, "query_shard_exception", ""},
		{"sort on unmapped field", "POST", "/products/_search", `{"sort":["nope"]}`, 400, "query_shard_exception", "No mapping found for [nope]"},
		{"index name with capitals", "PUT", "/Products", "", 400, "invalid_index_name_exception", "lowercase"},
		{"create body is not JSON", "PUT", "/other", `{"mappings":`, 400, "json_parse_exception", ""},
		{"unsupported field type", "PUT", "/other", `{"mappings":{"properties":{"loc":{"type":"geo_point"}}}}`, 400, "illegal_argument_exception", "geo_point"},
		{"document is not an object", "PUT", "/products/_doc/x", `[1,2]`, 400, "mapper_parsing_exception", "failed to parse"},
		{"value does not fit the mapping", "PUT", "/products/_doc/x", `{"priceCents":"cheap"}`, 400, "mapper_parsing_exception", "priceCents"},
		{"search of a missing index", "POST", "/nothere/_search", `{}`, 404, "index_not_found_exception", "no such index [nothere]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := h.raw(t, tt.method, tt.path, tt.body)
			if status != tt.status {
				t.Errorf("status: got %v, want %v (body %v)", status, tt.status, body)
			}
			if got := errorType(body); got != tt.errType {
				t.Errorf("error.type: got %v, want %v", got, tt.errType)
			}
			if got := body["status"]; got != float64(tt.status) {
				t.Errorf("status field: got %v, want %v", got, tt.status)
			}
			if !strings.Contains(errorReason(body), tt.reasonHas) {
				t.Errorf("error.reason: got %q, want it to contain %q", errorReason(body), tt.reasonHas)
			}
			rc, _ := body["error"].(map[string]any)["root_cause"].([]any)
			if len(rc) != 1 {
				t.Errorf("root_cause: got %v, want one entry", rc)
			}
		})
	}

	t.Run("a bad document line fails only its item", func(t *testing.T) {
		resp := h.bulk(t, "products", `{"index":{"_id":"ok"}}`+"\n"+`{"name":"fine"}`+"\n"+`{"index":{"_id":"bad"}}`+"\n"+`{"name":`+"\n")
		if !resp.Errors {
			t.Errorf("errors: got false, want true")
		}
		if got := itemOf(t, resp.Items[0]).Status; got != http.StatusCreated {
			t.Errorf("good item: got %d, want 201", got)
		}
		bad := itemOf(t, resp.Items[1])
		if bad.Status != http.StatusBadRequest || bad.Error == nil || bad.Error.Type != "mapper_parsing_exception" {
			t.Errorf("bad item: got %d %+v, want 400 mapper_parsing_exception", bad.Status, bad.Error)
		}
	})

	t.Run("the client sees a structured error", func(t *testing.T) {
		_, err := h.client.Search(context.Background(), &opensearchapi.SearchReq{Indices: []string{"products"}, Body: strings.NewReader(`{"query":{"nested":{}}}`)})
		se := structErr(t, err)
		if se.Status != http.StatusBadRequest || !strings.Contains(se.Err.Reason, "nested") {
			t.Errorf("got %d %q, want 400 naming nested", se.Status, se.Err.Reason)
		}
	})
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	first, err := New(dir, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	first.GCDeletes = time.Hour
	h := serve(t, first)
	h.seed(t)
	resp := h.bulk(t, "products", `{"index":{"_id":"p1","version":10,"version_type":"external"}}`+"\n"+`{"name":"Red Running Shoes","priceCents":8000,"category":"shoes"}`+"\n"+
		`{"delete":{"_id":"p2","version":20,"version_type":"external"}}`+"\n"+
		`{"index":{"_index":"dynamic","_id":"d1"}}`+"\n"+`{"title":"made on the fly","n":3}`+"\n")
	if resp.Errors {
		t.Fatalf("bulk: got errors %+v", resp.Items)
	}
	if _, err := h.client.Indices.Create(context.Background(), opensearchapi.IndicesCreateReq{Index: "dropped"}); err != nil {
		t.Fatalf("create dropped: %v", err)
	}
	if _, err := h.client.Indices.Delete(context.Background(), opensearchapi.IndicesDeleteReq{Indices: []string{"dropped"}}); err != nil {
		t.Fatalf("delete dropped: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	second, err := New(dir, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	second.GCDeletes = time.Hour
	t.Cleanup(func() { _ = second.Close() })
	h = serve(t, second)

	doc, err := h.client.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: "products", DocumentID: "p1"})
	if err != nil {
		t.Fatalf("get p1 after restart: %v", err)
	}
	if doc.Version != 10 || !strings.Contains(string(doc.Source), `"priceCents":8000`) {
		t.Errorf("p1 after restart: got v%d %s, want v10 priceCents 8000", doc.Version, doc.Source)
	}
	tests := []struct {
		name       string
		ndjson     string
		wantStatus int
	}{
		{"older version still rejected", `{"index":{"_id":"p1","version":9,"version_type":"external"}}` + "\n{}\n", http.StatusConflict},
		// OpenSearch keeps a delete's tombstone in memory only: after a
		// restart an older version of the deleted p2 is a document again.
		{"tombstone forgotten", `{"index":{"_id":"p2","version":19,"version_type":"external"}}` + "\n{}\n", http.StatusCreated},
		{"newer version still wins", `{"index":{"_id":"p2","version":21,"version_type":"external"}}` + "\n{\"name\":\"back\"}\n", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := itemOf(t, h.bulk(t, "products", tt.ndjson).Items[0]).Status; got != tt.wantStatus {
				t.Errorf("status: got %v, want %v", got, tt.wantStatus)
			}
		})
	}
	search := h.search(t, "products", `{"query":{"bool":{"filter":{"term":{"category":"shoes"}}}},"sort":["_id"]}`)
	if got := hitIDs(search); !slices.Equal(got, []string{"p1", "p5"}) {
		t.Errorf("search after restart: got %v, want [p1 p5]", got)
	}
	dyn := h.search(t, "dynamic", `{"query":{"range":{"n":{"gt":2}}}}`)
	if got := hitIDs(dyn); !slices.Equal(got, []string{"d1"}) {
		t.Errorf("dynamic mapping after restart: got %v, want [d1]", got)
	}
	if status, _ := h.raw(t, http.MethodHead, "/dropped", ""); status != http.StatusNotFound {
		t.Errorf("dropped index after restart: got %d, want 404", status)
	}
	// Sequence numbers keep growing across the restart.
	status, body := h.raw(t, http.MethodPut, "/products/_doc/p7", `{"name":"new"}`)
	if status != http.StatusCreated || body["_seq_no"].(float64) < 8 {
		t.Errorf("seq_no after restart: got %d %v, want 201 and >= 8", status, body["_seq_no"])
	}
}

func TestConcurrentWriters(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "products", productsMapping)
	const writers, rounds, docs = 6, 10, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				var nd strings.Builder
				for d := range docs {
					v := r*writers + w
					fmt.Fprintf(&nd, `{"index":{"_id":"d%d","version":%d,"version_type":"external_gte"}}`+"\n"+`{"name":"writer %d","priceCents":%d}`+"\n", d, v, w, v)
				}
				resp, err := h.client.Bulk(context.Background(), opensearchapi.BulkReq{Index: "products", Body: strings.NewReader(nd.String())})
				if err != nil {
					t.Errorf("bulk: %v", err)
					return
				}
				for _, it := range resp.Items {
					if s := it["index"].Status; s != http.StatusOK && s != http.StatusCreated && s != http.StatusConflict {
						t.Errorf("bulk item: got status %d, want 200, 201 or 409", s)
					}
				}
				if _, err := h.client.Search(context.Background(), &opensearchapi.SearchReq{Indices: []string{"products"}, Body: strings.NewReader(`{"query":{"match":{"name":"writer"}}}`)}); err != nil {
					t.Errorf("search: %v", err)
				}
			}
		})
	}
	wg.Wait()
	want := (rounds-1)*writers + writers - 1
	for d := range docs {
		doc, err := h.client.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: "products", DocumentID: fmt.Sprintf("d%d", d)})
		if err != nil {
			t.Fatalf("get d%d: %v", d, err)
		}
		if doc.Version != want || !strings.Contains(string(doc.Source), fmt.Sprintf(`"priceCents":%d`, want)) {
			t.Errorf("d%d: got v%d %s, want v%d", d, doc.Version, doc.Source, want)
		}
	}
}

func TestMoreAPIs(t *testing.T) {
	h := start(t, "", nil)
	h.seed(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		check                    func(body map[string]any) (got, want any)
	}{
		{"strict mapping refuses new fields", "PUT", "/strict", `{"mappings":{"dynamic":"strict","properties":{"a":{"type":"keyword"}}}}`, 200, nil},
		{"strict mapping error", "PUT", "/strict/_doc/1", `{"a":"x","b":1}`, 400, func(b map[string]any) (any, any) {
			return errorType(b), "strict_dynamic_mapping_exception"
		}},
		{"create of an existing document", "PUT", "/products/_create/p1", `{"name":"dup"}`, 409, func(b map[string]any) (any, any) {
			return errorReason(b), "[p1]: version conflict, document already exists (current version [1])"
		}},
		{"POST _doc makes an id", "POST", "/products/_doc", `{"name":"auto"}`, 201, func(b map[string]any) (any, any) {
			id, _ := b["_id"].(string)
			return len(id) > 0, true
		}},
		{"_source endpoint", "GET", "/products/_source/p4", "", 200, func(b map[string]any) (any, any) {
			return b["name"], "Red Wool Scarf"
		}},
		{"_source=false", "POST", "/products/_search", `{"query":{"ids":{"values":["p1"]}},"_source":false}`, 200, func(b map[string]any) (any, any) {
			hit := b["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)
			_, has := hit["_source"]
			return has, false
		}},
		{"rest_total_hits_as_int", "POST", "/products/_search?rest_total_hits_as_int=true", `{"size":0,"query":{"term":{"category":"shoes"}}}`, 200, func(b map[string]any) (any, any) {
			return b["hits"].(map[string]any)["total"], 3.0
		}},
		{"URL sort and size", "GET", "/products/_search?sort=priceCents:desc&size=1", "", 200, func(b map[string]any) (any, any) {
			return b["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["_id"], "p5"
		}},
		{"date range", "POST", "/products/_search", `{"size":0,"query":{"range":{"createdAt":{"gte":"2024-05-20","lt":"2024-05-21"}}}}`, 200, func(b map[string]any) (any, any) {
			return b["hits"].(map[string]any)["total"].(map[string]any)["value"], 1.0
		}},
		{"minimum_should_match", "POST", "/products/_search", `{"query":{"match":{"name":{"query":"red wool shoes","minimum_should_match":2}}}}`, 200, func(b map[string]any) (any, any) {
			return b["hits"].(map[string]any)["total"].(map[string]any)["value"], 2.0
		}},
		{"version in hits", "POST", "/products/_search", `{"query":{"ids":{"values":["p2"]}},"version":true}`, 200, func(b map[string]any) (any, any) {
			return b["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["_version"], 1.0
		}},
		{"settings are nested strings", "GET", "/products/_settings", "", 200, func(b map[string]any) (any, any) {
			return b["products"].(map[string]any)["settings"].(map[string]any)["index"].(map[string]any)["number_of_shards"], "1"
		}},
		{"unknown endpoint", "GET", "/_cat/indices", "", 400, func(b map[string]any) (any, any) {
			return strings.Contains(errorReason(b), "not supported"), true
		}},
		{"wrong method", "PATCH", "/products", "", 405, func(b map[string]any) (any, any) {
			return b["status"], 405.0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := h.raw(t, tt.method, tt.path, tt.body)
			if status != tt.status {
				t.Fatalf("status: got %v, want %v (body %v)", status, tt.status, body)
			}
			if tt.check != nil {
				if got, want := tt.check(body); got != want {
					t.Errorf("got %v, want %v", got, want)
				}
			}
		})
	}

	t.Run("compressed request bodies", func(t *testing.T) {
		client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{h.url}, CompressRequestBody: true}})
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		resp, err := client.Bulk(context.Background(), opensearchapi.BulkReq{Index: "products", Body: strings.NewReader(`{"index":{"_id":"gz"}}` + "\n" + `{"name":"Zipped Cap"}` + "\n")})
		if err != nil {
			t.Fatalf("bulk: %v", err)
		}
		if got := itemOf(t, resp.Items[0]).Status; got != http.StatusCreated {
			t.Errorf("status: got %v, want %v", got, http.StatusCreated)
		}
	})
}

// TestUnservedFeaturesRefused: what OpenSearch has and nothing shopstream
// sends uses (docs/decisions.md, "Local search") is refused with a 400
// naming it, as OpenSearch shapes errors, never answered differently: the
// update API, date math, the prefix, wildcard, regexp, fuzzy, constant_score
// and dis_max queries (sort modes sum, avg and median: TestSortModes).
func TestUnservedFeaturesRefused(t *testing.T) {
	h := start(t, "", nil)
	h.seed(t)
	tests := []struct{ name, method, path, body, reasonHas string }{
		{"update", "POST", "/products/_update/p1", `{"doc":{"stock":3}}`, "update API"},
		{"upsert", "POST", "/products/_update/p9", `{"doc":{"name":"Hat"},"doc_as_upsert":true}`, "update API"},
		{"date math from now", "POST", "/products/_search", `{"query":{"range":{"createdAt":{"lt":"now+1d"}}}}`, "date math"},
		{"date math from a date", "POST", "/products/_search", `{"query":{"range":{"createdAt":{"gte":"2024-05-20||/d"}}}}`, "date math"},
		{"date math in a term", "POST", "/products/_search", `{"query":{"term":{"createdAt":"now"}}}`, "date math"},
		{"prefix", "POST", "/products/_search", `{"query":{"prefix":{"name.keyword":"Red"}}}`, "[prefix]"},
		{"wildcard", "POST", "/products/_search", `{"query":{"wildcard":{"category":"sho*"}}}`, "[wildcard]"},
		{"regexp", "POST", "/products/_search", `{"query":{"regexp":{"category":"sh.*"}}}`, "[regexp]"},
		{"fuzzy", "POST", "/products/_search", `{"query":{"fuzzy":{"name":"scraf"}}}`, "[fuzzy]"},
		{"constant_score", "POST", "/products/_search", `{"query":{"constant_score":{"filter":{"term":{"category":"apparel"}}}}}`, "[constant_score]"},
		{"dis_max", "POST", "/products/_search", `{"query":{"dis_max":{"queries":[{"term":{"category":"apparel"}}]}}}`, "[dis_max]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := h.raw(t, tt.method, tt.path, tt.body)
			if status != http.StatusBadRequest || errorType(body) != "illegal_argument_exception" || body["status"] != 400.0 {
				t.Fatalf("got %d %v, want 400 illegal_argument_exception", status, body)
			}
			if r := errorReason(body); !strings.Contains(r, tt.reasonHas) || !strings.Contains(r, "not supported by the local search service") {
				t.Errorf("reason: got %q, want it to name %s as not supported", r, tt.reasonHas)
			}
		})
	}
}

// TestExplicitIndexRefusedAsTheDeployedDomain: with RefuseExplicitIndex (the
// stack's setting, as the domain's rest.action.multi.allow_explicit_index
// false) a bulk request naming an _index in an action line is refused whole
// and writes nothing; the index named in the path is what such a domain
// takes. OpenSearch's default accepts both.
func TestExplicitIndexRefusedAsTheDeployedDomain(t *testing.T) {
	h := start(t, "", func(s *Server) { s.RefuseExplicitIndex = true })
	h.seed(t)
	for _, path := range []string{"/_bulk", "/products/_bulk"} {
		code, body := h.raw(t, "POST", path, `{"index":{"_id":"p1"}}
{"name":"fine"}
{"index":{"_index":"products","_id":"p9"}}
{"name":"named its index"}
`)
		if b := fmt.Sprint(body); code != 400 || !strings.Contains(b, "illegal_argument_exception") || !strings.Contains(b, "explicit index in bulk is not allowed") {
			t.Errorf("POST %s with an _index: got %d %s, want 400 explicit index in bulk is not allowed", path, code, body)
		}
	}
	if code, _ := h.raw(t, "GET", "/products/_doc/p9", ""); code != 404 {
		t.Errorf("refused bulk wrote p9: GET got %d, want 404", code)
	}
	code, body := h.raw(t, "POST", "/products/_bulk", `{"index":{"_id":"p9"}}
{"name":"in the path's index"}
`)
	if code != 200 || body["errors"] != false {
		t.Errorf("POST /products/_bulk without _index: got %d %s, want 200 without errors", code, body)
	}
}
