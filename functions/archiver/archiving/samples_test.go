package archiving_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/infra/local/stack"
	"github.com/shopstream/shopstream/infra/local/stacktest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// samples reads events/<glob> in stream order (by first sequence number).
func samples(t *testing.T, glob string) ([]string, map[string]events.DynamoDBEvent) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "events", glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("sample events %s: got %v, %v", glob, files, err)
	}
	evs := map[string]events.DynamoDBEvent{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(ev.Records) == 0 {
			t.Fatalf("%s: no records", file)
		}
		evs[filepath.Base(file)] = ev
	}
	names := slices.Collect(func(yield func(string) bool) {
		for name := range evs {
			if !yield(name) {
				return
			}
		}
	})
	slices.SortFunc(names, func(a, b string) int {
		return strings.Compare(evs[a].Records[0].Change.SequenceNumber, evs[b].Records[0].Change.SequenceNumber)
	})
	return names, evs
}

// golden compares got with testdata/<name>, or rewrites it under -update.
func golden(t *testing.T, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", name)
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

// TestSampleEvents feeds every events/archiver-*.json through the handler, in
// stream order, each twice (a retry), and compares the failures and the
// archive's objects and lines after each with testdata/samples.golden.
func TestSampleEvents(t *testing.T) {
	names, evs := samples(t, "archiver-*.json")
	st := stacktest.Dedicated(t, stack.Config{TTLSweepInterval: -1, Buckets: []string{bucket}})
	c := st.S3()
	// The samples come from tables named as in `make run`.
	h := archiving.New(archiving.Deps{S3: c, Bucket: bucket, Tables: map[string]string{"orders": "orders", "carts": "carts"}})
	type step struct {
		Event   string                      `json:"event"`
		Failed  []string                    `json:"failed"`
		Retried []string                    `json:"failedWhenDeliveredAgain"`
		Objects map[string][]map[string]any `json:"objects"`
	}
	var steps []step
	for _, name := range names {
		s := step{Event: name, Failed: handle(t, h, evs[name].Records...)}
		s.Retried = handle(t, h, evs[name].Records...)
		s.Objects = objects(t, c)
		steps = append(steps, s)
	}
	golden(t, "samples.golden", steps)
}
