package search

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// benchDoc is a deterministic product with a few words of text.
func benchDoc(i int) string {
	adjectives := []string{"red", "blue", "light", "warm", "trail", "classic", "waterproof", "slim"}
	nouns := []string{"shoes", "jacket", "scarf", "shorts", "socks", "backpack", "cap", "gloves"}
	categories := []string{"shoes", "apparel", "accessories", "outdoor"}
	a, n := adjectives[i%len(adjectives)], nouns[(i/len(adjectives))%len(nouns)]
	return fmt.Sprintf(`{"name":"%s %s %d","description":"A %s %s for every day, model %d","category":%q,"priceCents":%d,"stock":%d,"createdAt":"2024-%02d-%02dT10:00:00Z"}`,
		a, n, i, a, n, i, categories[i%len(categories)], 500+(i*7919)%100000, i%50, 1+i%12, 1+i%28)
}

func benchBulkBody(from, n int) string {
	var nd strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&nd, `{"index":{"_id":"b%d"}}`+"\n%s\n", i, benchDoc(i))
	}
	return nd.String()
}

// BenchmarkBulkIndex measures bulk indexing through the client, 500
// documents a request, in memory and on disk.
func BenchmarkBulkIndex(b *testing.B) {
	const perRequest = 500
	for _, mode := range []string{"memory", "disk"} {
		b.Run(mode, func(b *testing.B) {
			dir := ""
			if mode == "disk" {
				dir = b.TempDir()
			}
			h := start(b, dir, nil)
			h.createIndex(b, "products", productsMapping)
			bodies := make([]string, b.N)
			for i := range bodies {
				bodies[i] = benchBulkBody(i*perRequest, perRequest)
			}
			b.ResetTimer()
			begin := time.Now()
			for i := 0; i < b.N; i++ {
				resp, err := h.client.Bulk(context.Background(), opensearchapi.BulkReq{Index: "products", Body: strings.NewReader(bodies[i])})
				if err != nil || resp.Errors {
					b.Fatalf("bulk: %v (errors=%v)", err, resp != nil && resp.Errors)
				}
			}
			// Until they are searchable: a refresh applies the writes to
			// what searches read.
			if code, body := h.raw(b, "POST", "/products/_refresh", ""); code != 200 {
				b.Fatalf("refresh: %d %v", code, body)
			}
			b.ReportMetric(float64(b.N*perRequest)/time.Since(begin).Seconds(), "docs/s")
		})
	}
}

// BenchmarkIndexDocument measures the latency of single-document writes
// with external versions, as a stream processor sends them.
func BenchmarkIndexDocument(b *testing.B) {
	for _, mode := range []string{"memory", "disk"} {
		b.Run(mode, func(b *testing.B) {
			dir := ""
			if mode == "disk" {
				dir = b.TempDir()
			}
			h := start(b, dir, nil)
			h.createIndex(b, "products", productsMapping)
			begin := time.Now()
			for i := 0; i < b.N; i++ {
				_, err := h.client.Index(context.Background(), opensearchapi.IndexReq{
					Index: "products", DocumentID: fmt.Sprintf("d%d", i%1000), Body: strings.NewReader(benchDoc(i)),
					Params: opensearchapi.IndexParams{Version: new(i + 1), VersionType: "external_gte"},
				})
				if err != nil {
					b.Fatalf("index: %v", err)
				}
			}
			b.ReportMetric(float64(time.Since(begin).Microseconds())/1000/float64(b.N), "ms/doc")
		})
	}
}

// BenchmarkSearch measures search latency on 20 000 documents.
func BenchmarkSearch(b *testing.B) {
	const docs = 20000
	h := start(b, "", nil)
	h.createIndex(b, "products", productsMapping)
	for from := 0; from < docs; from += 1000 {
		if resp := h.bulk(b, "products", benchBulkBody(from, 1000)); resp.Errors {
			b.Fatalf("seed: got errors")
		}
	}
	queries := map[string]string{
		"multi_match": `{"query":{"multi_match":{"query":"red waterproof shoes","fields":["name^3","description"]}}}`,
		"bool_filter_sort": `{"query":{"bool":{"must":{"match":{"description":"jacket"}},"filter":[{"term":{"category":"apparel"}},{"range":{"priceCents":{"lt":50000}}}]}},
			"sort":[{"priceCents":"asc"}],"from":20,"size":20}`,
		"match_all_total": `{"query":{"match_all":{}},"size":10,"track_total_hits":true}`,
	}
	for name, body := range queries {
		b.Run(name, func(b *testing.B) {
			begin := time.Now()
			for i := 0; i < b.N; i++ {
				resp := h.search(b, "products", body)
				if resp.Hits.Total.Value == 0 {
					b.Fatalf("no hits for %s", body)
				}
			}
			b.ReportMetric(float64(time.Since(begin).Microseconds())/1000/float64(b.N), "ms/search")
		})
	}
}
