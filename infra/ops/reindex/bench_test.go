package reindex_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/ops/reindex"
	"github.com/shopstream/shopstream/shared/tables"
)

// BenchmarkReindex rebuilds a dropped index of 10,000 products.
func BenchmarkReindex(b *testing.B) {
	const n = 10000
	st := stacktest.Dedicated(b, endpoints.Config{TTLSweepInterval: -1})
	ctx := context.Background()
	db := st.DynamoDB()
	prefix := stacktest.OwnPrefix(b)
	if err := tables.Create(ctx, db, prefix); err != nil {
		b.Fatal(err)
	}
	words := []string{"copper", "kettle", "steel", "pan", "oak", "board", "glass", "jar", "towel", "skillet"}
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"productId": fmt.Sprintf("01BENCH%019d", i), "name": words[i%10] + " " + words[(i/10)%10],
			"description": "A " + words[(i/100)%10] + " for the kitchen", "category": words[i%7], "priceCents": 100 + i,
			"stock": 10, "reviewCount": i % 9, "ratingTotal": 3 * (i % 9), "unitsSold": i % 50, "version": 1 + i%4}
	}
	stacktest.Load(b, db, tables.Physical(prefix, tables.Products), items)
	search, err := opensearch.NewClient(opensearch.Config{Addresses: []string{st.SearchURL}})
	if err != nil {
		b.Fatal(err)
	}
	cfg := reindex.Config{DB: db, Search: search, Products: tables.Physical(prefix, tables.Products)}
	var elapsed time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		req, _ := http.NewRequest("DELETE", "/products", nil)
		if resp, err := search.Perform(req); err == nil {
			resp.Body.Close()
		}
		b.StartTimer()
		start := time.Now()
		rep, err := reindex.Run(ctx, cfg)
		elapsed += time.Since(start)
		if err != nil || rep.Indexed != n {
			b.Fatalf("got %+v, %v; want %d indexed", rep, err, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "docs/s")
}
