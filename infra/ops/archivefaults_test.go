package main

import (
	"testing"
)

// TestArchiverRidesOutS3Faults: S3 answers SlowDown under a burst. The
// archiver's writes of the orders and carts TTL removes meet seven of them,
// more than its SDK's attempts: its batch fails, the mapping retries it, and
// every removed item ends in the archive once, with nothing given up to the
// failure bucket.
func TestArchiverRidesOutS3Faults(t *testing.T) {
	d := startDrill(t, drillOptions{env: map[string]string{"ORDER_RETENTION": "1s", "CART_TTL": "1s"}})
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
