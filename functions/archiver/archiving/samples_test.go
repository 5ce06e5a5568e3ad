package archiving_test

import (
	"testing"

	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/samples"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestSampleEvents feeds every events/archiver-*.json through the handler, in
// stream order, each twice (a retry), and compares the failures and the
// archive's objects and lines after each with testdata/samples.golden.
func TestSampleEvents(t *testing.T) {
	batches := samples.Streams(t, "archiver-*.json")
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Buckets: []string{bucket}})
	c := st.S3()
	// The samples come from the dev stage's tables.
	h := archiving.New(archiving.Deps{S3: c, Bucket: bucket, Tables: tables.Names{Orders: samples.TablePrefix + "orders", Carts: samples.TablePrefix + "carts"}})
	type step struct {
		Event   string                      `json:"event"`
		Failed  []string                    `json:"failed"`
		Retried []string                    `json:"failedWhenDeliveredAgain"`
		Objects map[string][]map[string]any `json:"objects"`
	}
	var steps []step
	for _, b := range batches {
		s := step{Event: b.Name, Failed: handle(t, h, b.Event.Records...)}
		s.Retried = handle(t, h, b.Event.Records...)
		s.Objects = objects(t, c)
		steps = append(steps, s)
	}
	samples.GoldenJSON(t, "testdata/samples.golden", steps)
}
