package productsearch

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestPagesOfOneSearchAskTheSameCopies: every request of one search (its
// first page, the re-read of the last hit's score, the page after it) sends
// the same preference, another search another; a page after a hit asks for
// the hits after its score as read again; a hit without a product id in its
// sort values has no place, and fails nothing.
func TestPagesOfOneSearchAskTheSameCopies(t *testing.T) {
	var mu sync.Mutex
	var prefs []string
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(raw, &body)
		mu.Lock()
		prefs = append(prefs, r.URL.Query().Get("preference"))
		bodies = append(bodies, body)
		mu.Unlock()
		// Two hits: the first with its place, the second without a product id.
		io.WriteString(w, `{"hits":{"total":{"value":2},"hits":[`+
			`{"_id":"p1","_source":{"productId":"p1"},"sort":[2.5,"p1"]},`+
			`{"_id":"p2","_source":{"name":"x"},"sort":[1.5,null]}]}}`)
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL}
	ctx := context.Background()
	res, err := c.Search(ctx, Query{Text: "kettle", Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Places) != 2 || res.Places[0] == nil || *res.Places[0] != (Place{Score: 2.5, ProductID: "p1"}) || res.Places[1] != nil || res.Hits[1].ProductID != "p2" {
		t.Fatalf("places %v, hits %+v: want p1's place, none for the hit without a product id (p2 by its _id)", res.Places, res.Hits)
	}
	if _, err := c.Search(ctx, Query{Text: "kettle", Size: 2, After: &Place{Score: 9, ProductID: "p1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Search(ctx, Query{Text: "mug", Size: 2}); err != nil {
		t.Fatal(err)
	}
	if len(prefs) != 4 || prefs[0] == "" || prefs[1] != prefs[0] || prefs[2] != prefs[0] || prefs[3] == prefs[0] {
		t.Errorf("preferences %q: want one for kettle's three requests, another for mug", prefs)
	}
	// The page after p1 goes on after p1's score as read again (2.5), not
	// the cursor's (9).
	if after, _ := json.Marshal(bodies[2]["search_after"]); string(after) != `[2.5,"p1"]` {
		t.Errorf("search_after %s, want [2.5,\"p1\"]", after)
	}
}
