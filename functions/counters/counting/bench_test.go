package counting_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/stacktest"
)

// BenchmarkSkewedBatches: 1,000 order records over 10 products in batches of
// 100, a third of them on one best seller, all by one user. It reports counter
// transactions per batch against records per batch, and the writes a
// one-update-per-record design would make.
func BenchmarkSkewedBatches(b *testing.B) {
	db := stacktest.DynamoDB(b)
	for i := 0; i < b.N; i++ {
		f := newFixture(b, db, stacktest.Tables(b))
		for p := 0; p < 10; p++ {
			f.put(f.tables.Products, map[string]types.AttributeValue{"productId": s(fmt.Sprintf("sku-%d", p)), "version": n(1)})
		}
		var batches, records, contributions int
		before := f.tx.calls.Load()
		for batch := 0; batch < 10; batch++ {
			var recs []events.DynamoDBEventRecord
			for r := 0; r < 100; r++ {
				sku := fmt.Sprintf("sku-%d", (r*r+batch)%10)
				if r%3 == 0 {
					sku = "sku-0" // a best seller
				}
				recs = append(recs, f.record(f.tables.Orders, "INSERT", nil, orderImage("u1", fmt.Sprintf("o%d-%d", batch, r), "PLACED", 100, line{sku, 1})))
				contributions += 2 // the user and the product
			}
			f.deliver(recs...)
			batches++
			records += len(recs)
		}
		writes := f.tx.calls.Load() - before
		b.ReportMetric(float64(records)/float64(batches), "records/batch")
		b.ReportMetric(float64(writes)/float64(batches), "counter-writes/batch")
		b.ReportMetric(float64(contributions)/float64(batches), "per-record-writes/batch")
		if got := f.user("u1")["orderCount"]; got != int64(records) {
			b.Fatalf("orderCount: got %d, want %d", got, records)
		}
	}
}
