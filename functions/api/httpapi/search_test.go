package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/productsearch"
)

func TestSearch(t *testing.T) {
	t.Parallel()
	e, url, index := searchEnv(t)
	var bulk strings.Builder
	for i, d := range []struct{ name, category string }{
		{"Red kettle", "kitchen"}, {"Blue kettle", "kitchen"}, {"Kettle bell", "sport"}, {"Green mug", "kitchen"},
	} {
		fmt.Fprintf(&bulk, `{"index":{"_id":"p%d","version":1,"version_type":"external_gte"}}`+"\n", i)
		fmt.Fprintf(&bulk, `{"productId":"p%d","name":%q,"description":"","category":%q,"priceCents":100,"reviewCount":0,"unitsSold":0,"version":1}`+"\n", i, d.name, d.category)
	}
	indexBulk(t, url, index, bulk.String())

	r := e.do("GET", "/search?q=kettle&limit=2", anonymous, nil)
	want(t, r, 200)
	if n := len(r.items()); n != 2 || r.str("nextCursor") == "" {
		t.Fatalf("got %s, want 2 hits and a cursor", r.Body)
	}
	r = e.do("GET", "/search?q=kettle&limit=2&cursor="+r.str("nextCursor"), anonymous, nil)
	want(t, r, 200)
	if n := len(r.items()); n != 1 || r.json["nextCursor"] != nil {
		t.Errorf("got %s, want the third hit and no cursor", r.Body)
	}
	r = e.do("GET", "/search?q=kettle&category=kitchen", anonymous, nil)
	want(t, r, 200)
	for _, it := range r.items() {
		if it["category"] != "kitchen" {
			t.Errorf("got %v, want kitchen only", it)
		}
	}
	if len(r.items()) != 2 {
		t.Errorf("got %d kitchen kettles, want 2", len(r.items()))
	}
	want(t, e.do("GET", "/search", anonymous, nil), 400, "validation")
	want(t, e.do("GET", "/search?q=kettle&category=sport&cursor="+e.do("GET", "/search?q=kettle&limit=1", anonymous, nil).str("nextCursor"), anonymous, nil), 400, "validation")
}

// TestSearchPagesNeverRepeatAHit: a product indexed between two pages, above
// the hits already shown, neither repeats the last hit of the first page on
// the second nor pushes a hit past both: the second page goes on after the
// last hit it was given (search_after on the score and the product id), not
// after a count of hits.
func TestSearchPagesNeverRepeatAHit(t *testing.T) {
	t.Parallel()
	e, url, index := searchEnv(t)
	bulk := func(docs ...string) {
		t.Helper()
		var b strings.Builder
		for _, d := range docs {
			b.WriteString(productLines(strings.ToLower(strings.ReplaceAll(d, " ", "-")), d))
		}
		indexBulk(t, url, index, b.String())
	}
	// Four hits of one score: the product id orders them.
	bulk("Kettle a", "Kettle b", "Kettle c", "Kettle d")
	first := e.do("GET", "/search?q=kettle&limit=2", anonymous, nil)
	want(t, first, 200)
	if got := hitIDs(first); fmt.Sprint(got) != "[kettle-a kettle-b]" {
		t.Fatalf("first page %v, want kettle-a and kettle-b (one score, by id)", got)
	}
	// A better match arrives before the second page.
	bulk("Kettle kettle")
	second := e.do("GET", "/search?q=kettle&limit=2&cursor="+first.str("nextCursor"), anonymous, nil)
	want(t, second, 200)
	if got := hitIDs(second); fmt.Sprint(got) != "[kettle-c kettle-d]" {
		t.Errorf("second page %v, want kettle-c and kettle-d: after the last hit shown, none repeated, none skipped", got)
	}

	// A hit of the first page is deleted before the second: nothing is
	// skipped (an offset would skip kettle-c).
	one := e.do("GET", "/search?q=kettle&limit=2", anonymous, nil)
	if got := hitIDs(one); fmt.Sprint(got) != "[kettle-kettle kettle-a]" {
		t.Fatalf("first page %v, want kettle-kettle and kettle-a", got)
	}
	indexBulk(t, url, index, `{"delete":{"_id":"kettle-kettle","version":2,"version_type":"external_gte"}}`+"\n")
	two := e.do("GET", "/search?q=kettle&limit=2&cursor="+one.str("nextCursor"), anonymous, nil)
	if got := hitIDs(two); fmt.Sprint(got) != "[kettle-b kettle-c]" {
		t.Errorf("page after a deletion %v, want kettle-b and kettle-c", got)
	}

	// A cursor of a release before 0.18.0 holds the offset alone, and still
	// goes on from it.
	old, err := cursor.NewSigner([]byte(testSecret)).Encode("GET /search\n/search\nq=kettle", map[string]int{"from": 3})
	if err != nil {
		t.Fatal(err)
	}
	three := e.do("GET", "/search?q=kettle&limit=2&cursor="+old, anonymous, nil)
	want(t, three, 200)
	if got := hitIDs(three); fmt.Sprint(got) != "[kettle-d]" || three.json["nextCursor"] != nil {
		t.Errorf("page of an offset cursor %v (%s), want kettle-d, the last", got, three.Body)
	}
}

// createIndex creates index with the mapping the indexer gives it.
func createIndex(t *testing.T, url, index string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", url+"/"+index, strings.NewReader(productsearch.Mapping))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("create index %s: got status %d", index, resp.StatusCode)
	}
}

// indexBulk sends ndjson to index's _bulk, refreshed. The index is in the
// path: the stack, as the deployed domain, refuses one named in the body.
func indexBulk(t *testing.T, url, index, ndjson string) {
	t.Helper()
	resp, err := http.Post(url+"/"+index+"/_bulk?refresh=true", "application/x-ndjson", strings.NewReader(ndjson))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("bulk: got status %d", resp.StatusCode)
	}
}

// TestSearchListsEveryHitOnce: paging on after hits shown and deleted since
// still reaches the last hit (the total then counts fewer hits than were
// shown), and a document without a productId (one written outside the
// indexer) neither fails its page nor stops the list.
func TestSearchListsEveryHitOnce(t *testing.T) {
	t.Parallel()
	e, url, index := searchEnv(t)
	var b strings.Builder
	for _, id := range []string{"pan-a", "pan-b", "pan-c", "pan-d", "pan-e"} {
		b.WriteString(productLines(id, "Pan"))
	}
	b.WriteString(`{"index":{"_id":"pan-x","version":1,"version_type":"external_gte"}}` + "\n" + `{"name":"Pan","category":"kitchen","version":1}` + "\n")
	indexBulk(t, url, index, b.String())
	var seen []string
	next := ""
	for page := range 8 {
		target := "/search?q=pan&limit=1"
		if page > 0 {
			if next == "" {
				break
			}
			target += "&cursor=" + next
		}
		r := e.do("GET", target, anonymous, nil)
		want(t, r, 200)
		for _, it := range r.items() {
			seen = append(seen, fmt.Sprint(it["productId"]))
		}
		next = r.str("nextCursor")
		if page == 2 {
			// Three hits shown; the first two are deleted: four are left
			// to count, and the fourth hit shown is the last they count.
			indexBulk(t, url, index, `{"delete":{"_id":"pan-a","version":2,"version_type":"external_gte"}}`+"\n"+
				`{"delete":{"_id":"pan-b","version":2,"version_type":"external_gte"}}`+"\n")
		}
	}
	if fmt.Sprint(seen) != "[pan-a pan-b pan-c pan-d pan-e pan-x]" {
		t.Errorf("listed %v, want every hit once: pan-a to pan-e, then the document without a productId (pan-x, by its _id)", seen)
	}
}

// TestSearchGoesOnWhenTheLastHitIsGone: the hit a page ended on is deleted,
// and another product indexed, before the next page: the next page goes on
// after the latest hit shown before it that is still there, as it ranks now.
func TestSearchGoesOnWhenTheLastHitIsGone(t *testing.T) {
	t.Parallel()
	e, url, index := searchEnv(t)
	var b strings.Builder
	for _, id := range []string{"pot-a", "pot-b", "pot-c", "pot-d"} {
		b.WriteString(productLines(id, "Pot"))
	}
	indexBulk(t, url, index, b.String())
	first := e.do("GET", "/search?q=pot&limit=2", anonymous, nil)
	want(t, first, 200)
	if got := hitIDs(first); fmt.Sprint(got) != "[pot-a pot-b]" {
		t.Fatalf("first page %v, want pot-a and pot-b", got)
	}
	// pot-b goes, and a longer document moves every score.
	indexBulk(t, url, index, `{"delete":{"_id":"pot-b","version":2,"version_type":"external_gte"}}`+"\n"+
		`{"index":{"_id":"pot-z","version":1,"version_type":"external_gte"}}`+"\n"+
		`{"productId":"pot-z","name":"Pot pot pot","description":"a pot with a lid and a long description of the pot","category":"kitchen","priceCents":100,"reviewCount":0,"unitsSold":0,"version":1}`+"\n")
	second := e.do("GET", "/search?q=pot&limit=2&cursor="+first.str("nextCursor"), anonymous, nil)
	want(t, second, 200)
	if got := hitIDs(second); fmt.Sprint(got) != "[pot-c pot-d]" {
		t.Errorf("page after the last hit shown was deleted: %v, want pot-c and pot-d", got)
	}

	// A page of one hit names no hits before it: when its hit is deleted
	// (which moves the others' scores above the one it had), the next page
	// starts at the hit that came after it.
	var more strings.Builder
	for _, d := range []struct{ id, name string }{{"pan-1", "Pan"}, {"pan-2", "Pan"}, {"pan-3", "Pan"}, {"pan-4", "Pan with a lid"}, {"pan-5", "Pan with a lid"}} {
		more.WriteString(productLines(d.id, d.name))
	}
	indexBulk(t, url, index, more.String())
	one := e.do("GET", "/search?q=pan&limit=1", anonymous, nil)
	if got := hitIDs(one); fmt.Sprint(got) != "[pan-1]" {
		t.Fatalf("first page of one: %v, want pan-1", got)
	}
	indexBulk(t, url, index, `{"delete":{"_id":"pan-1","version":2,"version_type":"external_gte"}}`+"\n")
	var rest []string
	for next := one.str("nextCursor"); next != ""; {
		r := e.do("GET", "/search?q=pan&limit=1&cursor="+next, anonymous, nil)
		want(t, r, 200)
		rest = append(rest, hitIDs(r)...)
		next = r.str("nextCursor")
		if len(rest) > 6 {
			break
		}
	}
	if fmt.Sprint(rest) != "[pan-2 pan-3 pan-4 pan-5]" {
		t.Errorf("pages of one after the first one's hit was deleted: %v, want pan-2 to pan-5", rest)
	}
}

// searchEnv is an API whose search reads an index of its own, created with
// the indexer's mapping: its URL and name are returned with it.
func searchEnv(t *testing.T) (*env, string, string) {
	t.Helper()
	e := newEnv(t)
	url := stacktest.Stack(t).SearchURL
	index := strings.TrimSuffix(e.prefix, "-") + "-products"
	createIndex(t, url, index)
	e.h = httpapi.New(httpapi.Deps{
		Store: e.st, Cursors: cursor.NewSigner([]byte(testSecret)),
		Search: &productsearch.Client{URL: url, Index: index},
	})
	return e, url, index
}

// hitIDs are the product ids of a search page, in order.
func hitIDs(r response) []string {
	var out []string
	for _, it := range r.items() {
		out = append(out, fmt.Sprint(it["productId"]))
	}
	return out
}

// productLines are the _bulk lines that index product id named name.
func productLines(id, name string) string {
	return fmt.Sprintf(`{"index":{"_id":%q,"version":1,"version_type":"external_gte"}}`+"\n"+
		`{"productId":%q,"name":%q,"description":"","category":"kitchen","priceCents":100,"reviewCount":0,"unitsSold":0,"version":1}`+"\n", id, id, name)
}
