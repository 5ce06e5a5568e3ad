// Package samples gives tests the sample events of the repository's events/
// folder and keeps golden files of their outcomes (rewritten under -update).
package samples

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
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Dir is the repository's events/ folder, found above the working directory.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "events")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Files are the events/ files matching glob, sorted by name; none is a failure.
func Files(t testing.TB, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(t), glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("sample events %s: got %v, %v", glob, files, err)
	}
	return files
}

// Decode reads one sample file into v.
func Decode(t testing.TB, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TablePrefix starts the table names in the stream samples' eventSourceARNs:
// the samples come from the dev stage, whose tables template.yaml names
// shopstream-${Stage}-<table> (and `TABLE_PREFIX=shopstream-dev- make run`
// names alike).
const TablePrefix = "shopstream-dev-"

// Retable rewrites the eventSourceARN of every record of ev to name the table
// physical returns for the record's logical table (its name less TablePrefix),
// for tests whose tables are named otherwise.
func Retable(ev *events.DynamoDBEvent, physical func(logical string) string) {
	for i, r := range ev.Records {
		head, rest, ok := strings.Cut(r.EventSourceArn, ":table/")
		if !ok {
			continue
		}
		name, tail, _ := strings.Cut(rest, "/")
		ev.Records[i].EventSourceArn = head + ":table/" + physical(strings.TrimPrefix(name, TablePrefix)) + "/" + tail
	}
}

// Stream is one sample stream batch.
type Stream struct {
	Name  string // file name, such as counters-order-placed.json
	Event events.DynamoDBEvent
}

// Streams reads the stream batches matching glob in the order a stream
// delivers them: by their first record's sequence number.
func Streams(t testing.TB, glob string) []Stream {
	t.Helper()
	var out []Stream
	for _, file := range Files(t, glob) {
		var ev events.DynamoDBEvent
		Decode(t, file, &ev)
		if len(ev.Records) == 0 {
			t.Fatalf("%s: no records", file)
		}
		out = append(out, Stream{Name: filepath.Base(file), Event: ev})
	}
	slices.SortFunc(out, func(a, b Stream) int {
		return strings.Compare(a.Event.Records[0].Change.SequenceNumber, b.Event.Records[0].Change.SequenceNumber)
	})
	return out
}

// Golden compares got with the file at path (relative to the test's package),
// or writes it there when the test runs with -update.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (check, then run with -update):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// GoldenJSON is Golden on v as indented JSON.
func GoldenJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	Golden(t, path, append(b, '\n'))
}

// Updating reports whether the tests run with -update, for outputs kept
// elsewhere than a golden file of their own (a section of a document).
func Updating() bool { return *update }
