package counting_test

import (
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/samples"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestSampleEvents feeds every events/counters-*.json through the handler, in
// the order a stream would deliver them, each twice, and compares the failed
// records and the counters after each with testdata/samples.golden.
func TestSampleEvents(t *testing.T) {
	batches := samples.Streams(t, "counters-*.json")

	f := newFixture(t, stacktest.DynamoDB(t), stacktest.Tables(t))
	f.put(f.tables.Users, map[string]types.AttributeValue{"userId": s("sample-user"), "version": n(1)})
	f.put(f.tables.Users, map[string]types.AttributeValue{"userId": s("other-user"), "version": n(1)})
	f.put(f.tables.Products, map[string]types.AttributeValue{"productId": s("sample-product"), "version": n(1)})
	type step struct {
		Event    string           `json:"event"`
		Failed   []string         `json:"failed"`
		User     map[string]int64 `json:"sample-user"`
		Product  map[string]int64 `json:"sample-product"`
		Repeated []string         `json:"failedWhenDeliveredAgain"`
	}
	var steps []step
	for _, b := range batches {
		ev := b.Event
		// The samples name the dev stage's tables; these tests use a prefix.
		samples.Retable(&ev, func(name string) string { return tables.Physical(f.prefix, name) })
		st := step{Event: b.Name, Failed: f.handle(ev.Records...)}
		st.User, st.Product = f.counters(f.tables.Users, "userId", "sample-user"), f.counters(f.tables.Products, "productId", "sample-product")
		st.Repeated = f.handle(ev.Records...)
		if again := f.counters(f.tables.Products, "productId", "sample-product"); !maps.Equal(again, st.Product) {
			t.Errorf("%s delivered again changed the product: got %v, want %v", b.Name, again, st.Product)
		}
		steps = append(steps, st)
	}
	samples.GoldenJSON(t, "testdata/samples.golden", steps)
}
