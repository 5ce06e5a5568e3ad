package indexing_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/infra/local/samples"
	"github.com/shopstream/shopstream/infra/local/search"
	"github.com/shopstream/shopstream/shared/productsearch"
)

// searchService starts a search service of the test's own behind httptest,
// answering bulk requests as the deployed domain does: one that names an
// _index in its body is refused (rest.action.multi.allow_explicit_index
// false), so every test here checks that the indexer names it in the path.
func searchService(t *testing.T) *opensearchapi.Client {
	t.Helper()
	srv, err := search.New("", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.RefuseExplicitIndex = true
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{hs.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSampleEvents feeds every events/indexer-*.json through the handler, in
// stream order, each twice, then every one again late (after the last), and
// compares the failures and the indexed document after each with
// testdata/samples.golden.
func TestSampleEvents(t *testing.T) {
	batches := samples.Streams(t, "indexer-*.json")

	c := searchService(t)
	h := indexing.New(indexing.Deps{Search: c})
	type doc struct {
		Version int64           `json:"_version"`
		Source  json.RawMessage `json:"_source"`
	}
	type step struct {
		Event    string          `json:"event"`
		Failed   []string        `json:"failed"`
		Retried  []string        `json:"failedWhenDeliveredAgain,omitempty"`
		Products map[string]*doc `json:"products"`
	}
	ids := map[string]bool{}
	for _, b := range batches {
		for _, r := range b.Event.Records {
			for _, img := range []map[string]events.DynamoDBAttributeValue{r.Change.NewImage, r.Change.OldImage} {
				if v, ok := img["productId"]; ok {
					ids[v.String()] = true
				}
			}
		}
	}
	state := func() map[string]*doc {
		out := map[string]*doc{}
		for id := range ids {
			res, err := c.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: productsearch.Index, DocumentID: id})
			if err != nil && (res == nil || res.Found) {
				t.Fatalf("get %s: %v", id, err)
			}
			if res.Found {
				out[id] = &doc{Version: int64(res.Version), Source: res.Source}
			} else {
				out[id] = nil
			}
		}
		return out
	}
	var steps []step
	for _, b := range batches {
		s := step{Event: b.Name, Failed: handle(t, h, b.Event.Records...), Retried: handle(t, h, b.Event.Records...)}
		s.Products = state()
		steps = append(steps, s)
	}
	for _, b := range batches {
		steps = append(steps, step{Event: b.Name + " (late)", Failed: handle(t, h, b.Event.Records...), Products: state()})
	}
	samples.GoldenJSON(t, "testdata/samples.golden", steps)
}
