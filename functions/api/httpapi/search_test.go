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
	e := newEnv(t)
	url := stacktest.Stack(t).SearchURL
	index := strings.TrimSuffix(e.prefix, "-") + "-products"
	var bulk strings.Builder
	for i, d := range []struct{ name, category string }{
		{"Red kettle", "kitchen"}, {"Blue kettle", "kitchen"}, {"Kettle bell", "sport"}, {"Green mug", "kitchen"},
	} {
		fmt.Fprintf(&bulk, `{"index":{"_id":"p%d","version":1,"version_type":"external_gte"}}`+"\n", i)
		fmt.Fprintf(&bulk, `{"productId":"p%d","name":%q,"description":"","category":%q,"priceCents":100,"reviewCount":0,"unitsSold":0,"version":1}`+"\n", i, d.name, d.category)
	}
	// The index in the path: the stack, as the deployed domain, refuses one
	// named in the body.
	resp, err := http.Post(url+"/"+index+"/_bulk?refresh=true", "application/x-ndjson", strings.NewReader(bulk.String()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("bulk: got status %d", resp.StatusCode)
	}
	e.h = httpapi.New(httpapi.Deps{
		Store: e.st, Cursors: cursor.NewSigner([]byte(testSecret)),
		Search: &productsearch.Client{URL: url, Index: index},
	})

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
