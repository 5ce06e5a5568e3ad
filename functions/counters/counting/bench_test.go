package counting_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// BenchmarkSkewedBatches: 1,000 order records in batches of 100, all by one
// user, over 10 products with a third of the records on one best seller, as
// one-line and as 3-line orders. It reports the counters' transactions per
// batch and their write units per 100 records against the naive design's
// (one update per record and counter item), both by AWS's rules.
func BenchmarkSkewedBatches(b *testing.B) {
	db := stacktest.DynamoDB(b)
	for _, lines := range []int{1, 3} {
		b.Run(fmt.Sprintf("%d-line", lines), func(b *testing.B) {
			w := costWorkload{name: fmt.Sprintf("%d-line orders", lines), records: 1000, batch: 100, lines: lines}
			for i := 0; i < b.N; i++ {
				units := map[string]float64{}
				var transactions int
				for _, design := range []string{"naive", "counters"} {
					f := newFixture(b, db, stacktest.Tables(b))
					seedCostItems(f)
					m := capacity.NewMeter(db, f.prefix)
					h := counting.New(counting.Deps{DB: m, Tables: f.tables})
					for _, recs := range costBatches(f, w) {
						if design == "naive" {
							if err := naive(context.Background(), f, m, recs); err != nil {
								b.Fatal(err)
							}
							continue
						}
						resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
						if err != nil || len(resp.BatchItemFailures) > 0 {
							b.Fatalf("handle: %v %v", resp.BatchItemFailures, err)
						}
					}
					if got := f.user("shopper")["orderCount"]; got != int64(w.records) {
						b.Fatalf("%s: orderCount %d, want %d", design, got, w.records)
					}
					units[design] = capacity.Sum(m.Calls()).Write
					if design == "counters" {
						transactions = len(m.Calls())
					}
				}
				b.ReportMetric(float64(transactions)*float64(w.batch)/float64(w.records), "transactions/batch")
				b.ReportMetric(units["counters"]*100/float64(w.records), "WRU/100records")
				b.ReportMetric(units["naive"]*100/float64(w.records), "naive-WRU/100records")
			}
		})
	}
}
