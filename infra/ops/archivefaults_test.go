package main

import (
	"testing"

	"github.com/shopstream/shopstream/shared/wiring"
)

// deployedRetries gives a drill's mapping the retries the deployed one has
// (the drills retry once, to give up fast).
func deployedRetries(m *wiring.Mapping) {
	for _, w := range wiring.Mappings() {
		if w.Name == m.Name {
			m.RetryAttempts = w.RetryAttempts
		}
	}
}

// TestArchiverRidesOutS3Faults: S3 answers SlowDown under a burst. The
// archiver's writes of the orders and carts TTL removes meet seven of them,
// more than its SDK's attempts: its batch fails, the mapping retries it, and
// every removed item ends in the archive once, with nothing given up to the
// failure bucket.
func TestArchiverRidesOutS3Faults(t *testing.T) {
	d := startDrill(t, drillOptions{env: map[string]string{"ORDER_RETENTION": "1s", "CART_TTL": "1s"}, mapping: deployedRetries})
	d.s3Fault(d.sys.Env["ARCHIVE_BUCKET"], "PutObject", "SlowDown", 7)
	s := traffic(d)
	eventually(t, "the traffic counted, indexed and archived through S3's SlowDowns", func() string {
		_, drift := d.state(s)
		return drift
	})
	if left := d.s3Faults(); len(left) != 0 {
		t.Fatalf("faults left: %v; want all seven met by the archiver", left)
	}
	if f := d.failed(); len(f) != 0 {
		t.Errorf("failure objects: %v; want none (the retries archived everything)", f)
	}
}

// TestIndexerRidesOutRejections: a domain whose write queue is full rejects
// bulk actions with 429, or a whole bulk request. The indexer reports the
// records of the rejected actions (or of the whole batch) as failed, the
// mapping retries from the first of them, and the index ends with every
// product at its version, nothing given up.
func TestIndexerRidesOutRejections(t *testing.T) {
	d := startDrill(t, drillOptions{env: map[string]string{"ORDER_RETENTION": "1s", "CART_TTL": "1s"}, mapping: deployedRetries})
	d.searchRejects(5, 3)
	s := traffic(d)
	eventually(t, "the traffic counted, indexed and archived through the rejections", func() string {
		_, drift := d.state(s)
		return drift
	})
	if left := d.searchRejectsLeft(); left != 0 {
		t.Fatalf("%d rejections left; want all eight met by the indexer", left)
	}
	if f := d.failed(); len(f) != 0 {
		t.Errorf("failure objects: %v; want none", f)
	}
}
