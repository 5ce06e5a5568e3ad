package indexing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/infra/local/search"
	"github.com/shopstream/shopstream/shared/productsearch"
)

var seq int

func record(name string, old, new map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	seq++
	return events.DynamoDBEventRecord{EventID: fmt.Sprintf("e%d", seq), EventName: name,
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/products/stream/x",
		Change: events.DynamoDBStreamRecord{OldImage: old, NewImage: new, SequenceNumber: fmt.Sprintf("%021d", seq),
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Now()}}}
}

func productImage(id, name string, version, reviews, ratingTotal int) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		"productId": events.NewStringAttribute(id), "name": events.NewStringAttribute(name),
		"description": events.NewStringAttribute("about " + name), "category": events.NewStringAttribute("kitchen"),
		"priceCents": events.NewNumberAttribute("500"), "stock": events.NewNumberAttribute("3"),
		"version": events.NewNumberAttribute(strconv.Itoa(version)), "reviewCount": events.NewNumberAttribute(strconv.Itoa(reviews)),
		"ratingTotal": events.NewNumberAttribute(strconv.Itoa(ratingTotal)), "unitsSold": events.NewNumberAttribute("2"),
	}
}

func get(t *testing.T, c *opensearchapi.Client, id string) (productsearch.Document, bool) {
	t.Helper()
	res, err := c.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: productsearch.Index, DocumentID: id})
	if err != nil {
		if res != nil && !res.Found {
			return productsearch.Document{}, false
		}
		t.Fatalf("get %s: %v", id, err)
	}
	var d productsearch.Document
	if err := json.Unmarshal(res.Source, &d); err != nil {
		t.Fatal(err)
	}
	return d, res.Found
}

func handle(t *testing.T, h *indexing.Handler, recs ...events.DynamoDBEventRecord) []string {
	t.Helper()
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if err != nil {
		t.Fatalf("handle: %v", err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestIndexFollowsProducts(t *testing.T) {
	c := searchService(t)
	h := indexing.New(indexing.Deps{Search: c})
	v1 := record("INSERT", nil, productImage("p1", "Kettle", 1, 0, 0))
	v2 := record("MODIFY", productImage("p1", "Kettle", 1, 0, 0), productImage("p1", "Copper Kettle", 2, 2, 9))
	if f := handle(t, h, v1, v2); len(f) != 0 {
		t.Fatalf("failures: %v", f)
	}
	d, ok := get(t, c, "p1")
	if !ok || d.Name != "Copper Kettle" || d.Version != 2 || d.RatingAverage == nil || *d.RatingAverage != 4.5 {
		t.Fatalf("after v2: got %+v (found %v)", d, ok)
	}
	// An old change delivered late never wins, and is not a failure.
	if f := handle(t, h, v1); len(f) != 0 {
		t.Fatalf("replay of v1: failures %v, want none", f)
	}
	if d, _ := get(t, c, "p1"); d.Name != "Copper Kettle" {
		t.Errorf("after replaying v1: got %q, want the newer name", d.Name)
	}
	del := record("REMOVE", productImage("p1", "Copper Kettle", 2, 2, 9), nil)
	if f := handle(t, h, del); len(f) != 0 {
		t.Fatalf("delete: failures %v", f)
	}
	if _, ok := get(t, c, "p1"); ok {
		t.Errorf("after delete: still found")
	}
	// A late MODIFY of the deleted version does not bring it back.
	handle(t, h, v2)
	if _, ok := get(t, c, "p1"); ok {
		t.Errorf("after a late v2: resurrected")
	}
}

func TestRatingAverageNullWithoutReviews(t *testing.T) {
	c := searchService(t)
	h := indexing.New(indexing.Deps{Search: c})
	handle(t, h, record("INSERT", nil, productImage("p2", "Pan", 1, 0, 0)))
	res, err := c.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: productsearch.Index, DocumentID: "p2"})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	json.Unmarshal(res.Source, &raw)
	if v, present := raw["ratingAverage"]; !present || v != nil {
		t.Errorf("ratingAverage: got %v (present %v), want null", v, present)
	}
}

func TestMalformedRecordIsAnItemFailure(t *testing.T) {
	c := searchService(t)
	h := indexing.New(indexing.Deps{Search: c})
	good := record("INSERT", nil, productImage("p3", "Whisk", 1, 0, 0))
	bad := record("INSERT", nil, map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute("p4"), "version": events.NewStringAttribute("one")})
	f := handle(t, h, good, bad)
	if len(f) != 1 || f[0] != bad.Change.SequenceNumber {
		t.Errorf("failures: got %v, want [%s]", f, bad.Change.SequenceNumber)
	}
	if _, ok := get(t, c, "p3"); !ok {
		t.Errorf("the good record was not indexed")
	}
}

// TestUnreadableCounterIsIndexedAsNoneCounted: a catalog item whose counter
// is not an integer (a hand edit) is indexed with that counter as none
// counted, as the API shows it, not failed: failed, every later change of
// the product would fail as well, and a replay of the batch could never
// succeed.
func TestUnreadableCounterIsIndexedAsNoneCounted(t *testing.T) {
	c := searchService(t)
	h := indexing.New(indexing.Deps{Search: c})
	img := productImage("p5", "Sieve", 3, 2, 9)
	img["unitsSold"] = events.NewStringAttribute("lots")
	img["reviewCount"] = events.NewNumberAttribute("1.5")
	if f := handle(t, h, record("MODIFY", nil, img)); len(f) != 0 {
		t.Fatalf("failures: %v, want none", f)
	}
	d, ok := get(t, c, "p5")
	if !ok || d.Name != "Sieve" || d.Version != 3 || d.UnitsSold != 0 || d.ReviewCount != 0 || d.RatingAverage != nil {
		t.Errorf("document: %+v (found %v), want Sieve at version 3 with the unreadable counters as none counted", d, ok)
	}
}

func TestUnreachableSearchFailsTheBatch(t *testing.T) {
	c, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{"http://127.0.0.1:1"}, MaxRetries: 1}})
	if err != nil {
		t.Fatal(err)
	}
	h := indexing.New(indexing.Deps{Search: c})
	r1, r2 := record("INSERT", nil, productImage("p5", "A", 1, 0, 0)), record("INSERT", nil, productImage("p6", "B", 1, 0, 0))
	if f := handle(t, h, r1, r2); len(f) != 2 {
		t.Errorf("failures: got %v, want both", f)
	}
}

// TestDeleteOutlivesTheDefaultTombstone: the search service forgets deletes
// after a millisecond unless the index says otherwise; the indexer's index
// does, so a write redelivered long after the delete stays dead.
func TestDeleteOutlivesTheDefaultTombstone(t *testing.T) {
	srv, err := search.New("", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.GCDeletes = time.Millisecond
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{hs.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	h := indexing.New(indexing.Deps{Search: c})
	v3 := record("MODIFY", productImage("p7", "Mug", 2, 0, 0), productImage("p7", "Mug", 3, 0, 0))
	handle(t, h, v3, record("REMOVE", productImage("p7", "Mug", 3, 0, 0), nil))
	time.Sleep(20 * time.Millisecond)
	tests := []struct {
		name string
		rec  events.DynamoDBEventRecord
	}{
		{"the deleted version", v3},
		{"an older version", record("MODIFY", productImage("p7", "Mug", 1, 0, 0), productImage("p7", "Mug", 2, 0, 0))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f := handle(t, h, tt.rec); len(f) != 0 {
				t.Errorf("failures: got %v, want none (a conflict is success)", f)
			}
			if d, ok := get(t, c, "p7"); ok {
				t.Errorf("got %+v, want p7 to stay deleted", d)
			}
		})
	}
}

// TestItemErrorsAreItemFailures: a document the index refuses fails its own
// record only; a version conflict in the same batch is success.
func TestItemErrorsAreItemFailures(t *testing.T) {
	c := searchService(t)
	// An index made elsewhere with a category the products do not fit.
	if _, err := c.Indices.Create(context.Background(), opensearchapi.IndicesCreateReq{Index: productsearch.Index,
		Body: strings.NewReader(`{"mappings":{"properties":{"category":{"type":"long"}}}}`)}); err != nil {
		t.Fatal(err)
	}
	h := indexing.New(indexing.Deps{Search: c})
	fits := productImage("p8", "Tray", 2, 0, 0)
	fits["category"] = events.NewStringAttribute("42")
	refused := productImage("p9", "Jug", 1, 0, 0)
	stale := productImage("p8", "Tray", 1, 0, 0)
	stale["category"] = events.NewStringAttribute("42")
	ok, bad, old := record("INSERT", nil, fits), record("INSERT", nil, refused), record("MODIFY", nil, stale)
	if f := handle(t, h, ok, bad, old); fmt.Sprint(f) != fmt.Sprint([]string{bad.Change.SequenceNumber}) {
		t.Errorf("failures: got %v, want [%s]", f, bad.Change.SequenceNumber)
	}
	if d, found := get(t, c, "p8"); !found || d.Version != 2 {
		t.Errorf("p8: got %+v (found %v), want version 2", d, found)
	}
}
