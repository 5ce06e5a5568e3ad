package indexing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/infra/local/search"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// searchService starts a search service of the test's own behind httptest.
func searchService(t *testing.T) *opensearchapi.Client {
	t.Helper()
	srv, err := search.New("", nil)
	if err != nil {
		t.Fatal(err)
	}
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
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "events", "indexer-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("sample events: got %v, %v", files, err)
	}
	evs := map[string]events.DynamoDBEvent{}
	var names []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil || len(ev.Records) == 0 {
			t.Fatalf("%s: %d records, %v", file, len(ev.Records), err)
		}
		name := filepath.Base(file)
		evs[name], names = ev, append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		return strings.Compare(evs[a].Records[0].Change.SequenceNumber, evs[b].Records[0].Change.SequenceNumber)
	})

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
	for _, ev := range evs {
		for _, r := range ev.Records {
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
			res, err := c.Document.Get(context.Background(), opensearchapi.DocumentGetReq{Index: indexing.Index, DocumentID: id})
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
	for _, name := range names {
		s := step{Event: name, Failed: handle(t, h, evs[name].Records...), Retried: handle(t, h, evs[name].Records...)}
		s.Products = state()
		steps = append(steps, s)
	}
	for _, name := range names {
		steps = append(steps, step{Event: name + " (late)", Failed: handle(t, h, evs[name].Records...), Products: state()})
	}
	b, err := json.MarshalIndent(steps, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", "samples.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, b, want)
	}
}
