package main

import (
	"strings"
	"testing"

	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/productsearch"
)

// TestReplaysAskForAReindexUntilOneFinishes: a replayed search-indexer batch
// that wrote a product deleted since asks for make reindex. A later replay,
// which finds that batch already replayed, asks again (the request is kept
// in the failure bucket, not only in the first run's output), and so does
// every replay until a reindex has finished; a replay of another mapping
// alone does not. Every record succeeded, so every run exits 0, as the
// contract says.
func TestReplaysAskForAReindexUntilOneFinishes(t *testing.T) {
	d := startDrill(t, drillOptions{})
	// The indexer fails until its mapping gives the product's creation up.
	if got, b := d.http("PUT", d.sys.SearchURL+"/"+productsearch.Index, "", map[string]any{"mappings": map[string]any{"dynamic": "strict"}}); got != 200 {
		t.Fatalf("create a refusing index: %d %s", got, b)
	}
	var p product
	d.api(201, "POST", "/products", "admin", map[string]any{"name": "Kettle", "description": "Boils", "category": "kitchen", "priceCents": 1000, "stock": 5}, &p)
	eventually(t, "the indexer gave the creation up", func() string {
		if len(d.failed()["products-indexer"]) == 0 {
			return "no failure object of products-indexer"
		}
		return ""
	})
	d.settle()
	// The incident ends; then the product is deleted.
	if got, b := d.http("DELETE", d.sys.SearchURL+"/"+productsearch.Index, "", nil); got != 200 {
		t.Fatalf("drop the refusing index: %d %s", got, b)
	}
	if got, b := d.http("PUT", d.sys.SearchURL+"/"+productsearch.Index, "", []byte(productsearch.Mapping)); got != 200 {
		t.Fatalf("recreate the index: %d %s", got, b)
	}
	d.api(204, "DELETE", "/products/"+p.ProductID, "admin", nil, nil)
	d.settle()

	if code, out := d.replay(); code != 0 || !strings.Contains(out, "run make reindex") {
		t.Fatalf("replay of a deleted product's creation: exit %d, want 0 and \"run make reindex\"", code)
	}
	needs := d.objects(failures.ReindexNeededPrefix)
	if len(needs) != 1 {
		t.Fatalf("requests for a reindex in the bucket: %v, want 1", needs)
	}
	code, out := d.replay()
	if code != 0 || !strings.Contains(out, "1 search indexer objects, replayed before this run") || !strings.Contains(out, "0 replayed") || !strings.Contains(out, "; 0 foreign objects") {
		t.Errorf("second replay, nothing left to replay: exit %d, want 0, the earlier run's request, and no foreign object", code)
	}
	if code, out := d.replay("-mapping", "orders-counters"); code != 0 || strings.Contains(out, "reindex") {
		t.Errorf("replay of orders-counters alone: exit %d, want 0 and no word of the index", code)
	}

	// At once: a reindex answers a request written in the very second its
	// start is recorded.
	if code, out := d.command("reindex"); code != 0 || !strings.Contains(out, "recorded as s3://") {
		t.Fatalf("reindex: exit %d, want 0 and its record in the failure bucket", code)
	}
	if got := d.doc(p.ProductID); got != "" {
		t.Errorf("the deleted product's document after the reindex: %q, want none", got)
	}
	if code, out := d.replay(); code != 0 || strings.Contains(out, "make reindex") {
		t.Errorf("replay after the reindex: exit %d, want 0 and no request for a reindex any more", code)
	}
}
