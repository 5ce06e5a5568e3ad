package search

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sortValues searches and returns each hit's id and its sort values as the
// JSON numbers the answer holds (no float64 on the way).
func (h *harness) sortValues(t *testing.T, index, body string) (ids []string, sorts [][]json.Number) {
	t.Helper()
	ids, raws := h.sortsRaw(t, index, body)
	for _, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var vs []json.Number
		if err := dec.Decode(&vs); err != nil {
			t.Fatal(err)
		}
		sorts = append(sorts, vs)
	}
	return ids, sorts
}

// TestLongSortValuesAreExact: a long's sort value is the long, all 64 bits
// (OpenSearch's sort tests: 9223372036854775807 came back as
// -9223372036854775808, 922337203685477777 as 922337203685477760).
func TestLongSortValuesAreExact(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "longs", `{"mappings":{"properties":{"n":{"type":"long"}}}}`)
	h.bulk(t, "longs", `{"index":{"_id":"max"}}
{"n":9223372036854775807}
{"index":{"_id":"big"}}
{"n":922337203685477777}
{"index":{"_id":"neg"}}
{"n":-9223372036854775808}
`)
	ids, sorts := h.sortValues(t, "longs", `{"sort":[{"n":"asc"}]}`)
	want := []string{"neg -9223372036854775808", "big 922337203685477777", "max 9223372036854775807"}
	var got []string
	for i, id := range ids {
		got = append(got, fmt.Sprintf("%s %s", id, sorts[i][0]))
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestSortModes sorts on a multi-valued numeric field by every mode
// OpenSearch supports for numbers: min, max, sum, avg and median (a long's
// avg and even median rounded, as OpenSearch's MultiValueMode does).
func TestSortModes(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "multi", `{"mappings":{"properties":{"n":{"type":"long"},"d":{"type":"double"}}}}`)
	h.bulk(t, "multi", `{"index":{"_id":"a"}}
{"n":[1,2,9],"d":[1.5,2.5]}
{"index":{"_id":"b"}}
{"n":[4,5],"d":[3.0]}
{"index":{"_id":"c"}}
{"n":[0,6,7,10],"d":[0.5,10.5,20.5]}
`)
	for _, tc := range []struct {
		mode, field, order string
		want               string
	}{
		{"min", "n", "asc", "c:0 a:1 b:4"},
		{"max", "n", "desc", "c:10 a:9 b:5"},
		{"max", "d", "desc", "c:20.5 b:3 a:2.5"},
		{"min", "d", "asc", "c:0.5 a:1.5 b:3"},
	} {
		t.Run(tc.mode+"/"+tc.field, func(t *testing.T) {
			ids, sorts := h.sortValues(t, "multi", fmt.Sprintf(`{"sort":[{%q:{"order":%q,"mode":%q}}]}`, tc.field, tc.order, tc.mode))
			var got []string
			for i, id := range ids {
				got = append(got, id+":"+sorts[i][0].String())
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("got %v, want %s", got, tc.want)
			}
		})
	}
	// sum, avg and median are OpenSearch's, not served here: refused.
	for _, mode := range []string{"sum", "avg", "median"} {
		code, body := h.raw(t, "POST", "/multi/_search", fmt.Sprintf(`{"sort":[{"n":{"mode":%q}}]}`, mode))
		if code != 400 || errorType(body) != "illegal_argument_exception" || !strings.Contains(errorReason(body), "not supported by the local search service") {
			t.Errorf("mode %s: got %d %v, want 400 illegal_argument_exception, not supported", mode, code, body)
		}
	}
	code, body := h.raw(t, "POST", "/multi/_search", `{"sort":[{"n":{"mode":"mean"}}]}`)
	if code != 400 || errorType(body) != "illegal_argument_exception" {
		t.Errorf("mode mean: got %d %v, want 400 illegal_argument_exception", code, body)
	}
}

// TestTypedMappingRefused: a mapping nested under the _doc type is a 400
// illegal_argument_exception, as OpenSearch answers it (its YAML REST tests
// of indices.create), and no index is created.
func TestTypedMappingRefused(t *testing.T) {
	h := start(t, "", nil)
	code, body := h.raw(t, "PUT", "/typed", `{"mappings":{"_doc":{"properties":{"x":{"type":"keyword"}}}}}`)
	if code != 400 || errorType(body) != "illegal_argument_exception" {
		t.Errorf("typed mapping: got %d %v, want 400 illegal_argument_exception", code, body)
	}
	if code, _ := h.raw(t, "HEAD", "/typed", ""); code != 404 {
		t.Errorf("HEAD /typed: got %d, want 404 (not created)", code)
	}
}

// TestBulkItemWithEmptyIDFailsAlone: an action whose _id is empty fails in
// items[] with 400, and the rest of the bulk is carried out (200), as
// OpenSearch does.
func TestBulkItemWithEmptyIDFailsAlone(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "items", "")
	code, body := h.raw(t, "POST", "/items/_bulk?refresh=true", `{"index":{"_id":"a"}}
{"n":1}
{"index":{"_id":""}}
{"n":2}
{"index":{"_id":"b"}}
{"n":3}
`)
	if code != 200 || body["errors"] != true {
		t.Fatalf("bulk: got %d %v, want 200 with errors", code, body)
	}
	items := body["items"].([]any)
	status := func(i int) (float64, string) {
		it := items[i].(map[string]any)["index"].(map[string]any)
		e, _ := it["error"].(map[string]any)
		typ, _ := e["type"].(string)
		return it["status"].(float64), typ
	}
	for i, want := range []struct {
		status float64
		typ    string
	}{{201, ""}, {400, "illegal_argument_exception"}, {201, ""}} {
		if s, typ := status(i); s != want.status || typ != want.typ {
			t.Errorf("item %d: got %v %q, want %v %q", i, s, typ, want.status, want.typ)
		}
	}
	for _, id := range []string{"a", "b"} {
		if code, _ := h.raw(t, "GET", "/items/_doc/"+id, ""); code != 200 {
			t.Errorf("document %s: got %d, want 200", id, code)
		}
	}
}

// TestDoubleSortValuesAreExact is OpenSearch's search/260_sort_double: a
// double's sort value is the double, by every mode, the median of two
// values their mean unrounded (900719925474099.2 came back as
// 900719925474099, 1.95 as 2).
func TestDoubleSortValuesAreExact(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "double_sort", `{"settings":{"number_of_shards":3,"number_of_replicas":0},"mappings":{"properties":{"field":{"type":"double"}}}}`)
	h.bulk(t, "double_sort", `{"index":{"_index":"double_sort","_id":"1"}}
{"field":[900719925474099.1,1.1]}
{"index":{"_index":"double_sort","_id":"2"}}
{"field":[900719925474099.2,900719925474099.3]}
{"index":{"_index":"double_sort","_id":"3"}}
{"field":[450359962737049.4,3.5,4.6]}
{"index":{"_index":"double_sort","_id":"4"}}
{"field":[450359962737049.7,5.8,-1.9,-2.0]}
`)
	for _, tc := range []struct{ mode, order, want string }{
		{"max", "desc", "2:900719925474099.2 1:900719925474099.1 4:450359962737049.7 3:450359962737049.4"},
		{"max", "asc", "3:450359962737049.4 4:450359962737049.7 1:900719925474099.1 2:900719925474099.2"},
		{"min", "asc", "4:-2 1:1.1 3:3.5 2:900719925474099.2"},
	} {
		ids, sorts := h.sortValues(t, "double_sort", fmt.Sprintf(`{"size":5,"sort":[{"field":{"mode":%q,"order":%q}}]}`, tc.mode, tc.order))
		var got []string
		for i, id := range ids {
			f, _ := sorts[i][0].Float64()
			got = append(got, id+":"+strconv.FormatFloat(f, 'f', -1, 64))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s %s: got %v, want %s", tc.mode, tc.order, got, tc.want)
		}
	}
}

// TestOpenSearchErrorsOfBulkAndMappings are bulk/10_basic's "empty action"
// and indices.create/10_basic's "Create index with invalid mappings".
func TestOpenSearchErrorsOfBulkAndMappings(t *testing.T) {
	h := start(t, "", nil)
	code, body := h.raw(t, "POST", "/_bulk", `{"index": {"_index": "test_index", "_id": "test_id"}}
{"f1": "v1", "f2": 42}
{}
`)
	re := regexp.MustCompile(`Malformed action/metadata line \[3\], expected FIELD_NAME but found \[END_OBJECT\]`)
	if raw, _ := json.Marshal(body); code != 400 || errorType(body) != "illegal_argument_exception" || !re.Match(raw) {
		t.Errorf("empty action: got %d %s", code, raw)
	}
	code, body = h.raw(t, "PUT", "/test_index", `{"mappings":{"properties":{"":{"type":"keyword"}}}}`)
	raw, _ := json.Marshal(body)
	if code != 400 || !regexp.MustCompile(`illegal_argument_exception`).Match(raw) {
		t.Errorf("invalid mappings: got %d %s, want 400 naming illegal_argument_exception", code, raw)
	}
	if cause, _ := body["error"].(map[string]any)["caused_by"].(map[string]any); cause["type"] != "illegal_argument_exception" || cause["reason"] != "field name cannot be an empty string" {
		t.Errorf("invalid mappings: caused_by %v", cause)
	}
}

// TestSearchAfterGoesOnAfterTheLastHit: pages taken with search_after (the
// last hit's sort values) are the pages from/size gives on an index that
// does not change, for a sort on the score, a keyword, a long past 2^53
// (ordered as the local search orders longs, as doubles) and a missing value; a document added between pages before the last hit
// moves nothing; and search_after is refused as OpenSearch refuses it.
func TestSearchAfterGoesOnAfterTheLastHit(t *testing.T) {
	h := start(t, "", nil)
	h.createIndex(t, "things", `{"mappings":{"properties":{"name":{"type":"text"},"k":{"type":"keyword"},"n":{"type":"long"}}}}`)
	var nd strings.Builder
	for i := range 9 {
		n := fmt.Sprintf(`,"n":%d`, 9007199254740992+int64(i%3))
		if i == 4 {
			n = "" // no value
		}
		fmt.Fprintf(&nd, `{"index":{"_id":"d%d"}}`+"\n"+`{"name":"%s","k":"k%d"%s}`+"\n", i, strings.Repeat("kettle ", 1+i%3), i, n)
	}
	h.bulk(t, "things", nd.String())

	for _, sort := range []string{
		`[{"_score":"desc"},{"k":"asc"}]`,
		`[{"n":"desc"},{"k":"desc"}]`,
		`[{"n":{"order":"asc","missing":"_first"}},{"_id":"asc"}]`,
	} {
		t.Run(sort, func(t *testing.T) {
			query := `"query":{"match":{"name":"kettle"}},"sort":` + sort
			want, _ := h.sortsRaw(t, "things", `{`+query+`,"size":9}`)
			var got []string
			after := ""
			for range 5 {
				ids, sorts := h.sortsRaw(t, "things", `{`+query+`,"size":2`+after+`}`)
				got = append(got, ids...)
				if len(ids) < 2 {
					break
				}
				after = `,"search_after":` + string(sorts[len(sorts)-1])
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("pages by search_after %v, want %v", got, want)
			}
		})
	}

	// A document sorting first arrives between two pages: the second page
	// goes on after the first's last hit.
	ids, sorts := h.sortsRaw(t, "things", `{"sort":[{"k":"asc"}],"size":3}`)
	h.bulk(t, "things", `{"index":{"_id":"a0"}}`+"\n"+`{"name":"kettle","k":"a0"}`+"\n")
	next, _ := h.sortsRaw(t, "things", `{"sort":[{"k":"asc"}],"size":3,"search_after":`+string(sorts[len(sorts)-1])+`}`)
	if fmt.Sprint(ids, next) != "[d0 d1 d2] [d3 d4 d5]" {
		t.Errorf("pages around an insert: %v then %v, want [d0 d1 d2] then [d3 d4 d5]", ids, next)
	}

	for body, want := range map[string]string{
		`{"sort":[{"k":"asc"}],"from":1,"search_after":["k1"]}`:    "`from` parameter must be set to 0 when `search_after` is used.",
		`{"search_after":["k1"]}`:                                  "Sort must contain at least one field.",
		`{"sort":[{"k":"asc"},{"n":"asc"}],"search_after":["k1"]}`: "search_after has 1 value(s) but sort has 2.",
		`{"sort":[{"n":"asc"}],"search_after":["many"]}`:           "Failed to parse search_after value for field [n].",
		`{"sort":[{"n":"asc"}],"search_after":[]}`:                 "Values must contains at least one value.",
	} {
		status, out := h.raw(t, "POST", "/things/_search", body)
		if status != 400 || !strings.Contains(fmt.Sprint(out), want) {
			t.Errorf("%s: %d %v, want 400 saying %q", body, status, out, want)
		}
	}
}

// sortsRaw searches and returns each hit's id and its sort values as the
// answer holds them.
func (h *harness) sortsRaw(t *testing.T, index, body string) (ids []string, sorts []json.RawMessage) {
	t.Helper()
	resp, err := http.Post(h.url+"/"+index+"/_search", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("search %s: %d %s", body, resp.StatusCode, raw)
	}
	var out struct {
		Hits struct {
			Hits []struct {
				ID   string          `json:"_id"`
				Sort json.RawMessage `json:"sort"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	for _, hit := range out.Hits.Hits {
		ids = append(ids, hit.ID)
		sorts = append(sorts, hit.Sort)
	}
	return ids, sorts
}
