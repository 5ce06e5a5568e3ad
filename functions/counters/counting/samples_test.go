package counting_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/tables"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestSampleEvents feeds every events/counters-*.json through the handler, in
// the order a stream would deliver them, each twice, and compares the failed
// records and the counters after each with testdata/samples.golden.
func TestSampleEvents(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "events", "counters-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("sample events: got %v, %v", files, err)
	}
	// Stream order: by the first record's sequence number.
	first := map[string]string{}
	samples := map[string]events.DynamoDBEvent{}
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
		first[file], samples[file] = ev.Records[0].Change.SequenceNumber, ev
	}
	slices.SortFunc(files, func(a, b string) int { return strings.Compare(first[a], first[b]) })

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
	for _, file := range files {
		ev := samples[file]
		// The samples name the tables as `make run` does; these tests use a prefix.
		for i, r := range ev.Records {
			name := ddbstream.TableName(r)
			ev.Records[i].EventSourceArn = strings.Replace(r.EventSourceArn, ":table/"+name+"/", ":table/"+tables.Physical(f.prefix, name)+"/", 1)
		}
		st := step{Event: filepath.Base(file), Failed: f.handle(ev.Records...)}
		st.User, st.Product = f.counters(f.tables.Users, "userId", "sample-user"), f.counters(f.tables.Products, "productId", "sample-product")
		st.Repeated = f.handle(ev.Records...)
		if again := f.counters(f.tables.Products, "productId", "sample-product"); !maps.Equal(again, st.Product) {
			t.Errorf("%s delivered again changed the product: got %v, want %v", file, again, st.Product)
		}
		steps = append(steps, st)
	}
	got, err := json.MarshalIndent(steps, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "samples.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("sample outcomes differ from %s (run with -update after checking):\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}
