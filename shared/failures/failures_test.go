package failures

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/aws-shape.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTheAWSShape(t *testing.T) {
	o, err := Parse(sample(t))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if got, want := o.Function(), "shopstream-dev-counters"; got != want {
		t.Errorf("function: got %q, want %q", got, want)
	}
	if got, want := o.Table(), "shopstream-dev-reviews"; got != want {
		t.Errorf("table: got %q, want %q", got, want)
	}
	if got, want := len(o.Payload.Records), 2; got != want {
		t.Fatalf("records: got %d, want %d", got, want)
	}
	if got, want := o.Payload.Records[1].Change.OldImage["rating"].Number(), "2"; got != want {
		t.Errorf("old rating: got %s, want %s", got, want)
	}
	if got, want := o.Oldest(), time.Unix(1795338600, 0); !got.Equal(want) {
		t.Errorf("oldest: got %v, want %v", got, want)
	}
	if got, want := o.Timestamp, time.Date(2026, 11, 22, 9, 6, 41, 512e6, time.UTC); !got.Equal(want) {
		t.Errorf("timestamp: got %v, want %v", got, want)
	}
}

func TestEncodeRoundTrips(t *testing.T) {
	o, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.Encode()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("parse encoded: %v", err)
	}
	again, err := back.Encode()
	if err != nil {
		t.Fatalf("encode again: %v", err)
	}
	if diff := cmp.Diff(string(b), string(again)); diff != "" {
		t.Errorf("round trip (-first +second):\n%s", diff)
	}
	// The wire form is AWS's: field names and time formats.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"requestContext", "responseContext", "version", "timestamp", "DDBStreamBatchInfo", "payload"} {
		if _, ok := m[k]; !ok {
			t.Errorf("encoded object has no %q", k)
		}
	}
	if got, want := string(m["timestamp"]), `"2026-11-22T09:06:41.512Z"`; got != want {
		t.Errorf("timestamp: got %s, want %s", got, want)
	}
}

func TestPayloadAsAJSONString(t *testing.T) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(sample(t), &m); err != nil {
		t.Fatal(err)
	}
	s, _ := json.Marshal(string(m["payload"]))
	m["payload"] = s
	b, _ := json.Marshal(m)
	o, err := Parse(b)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if got, want := len(o.Payload.Records), 2; got != want {
		t.Errorf("records: got %d, want %d", got, want)
	}
}

// edit returns the sample with one change made to its decoded JSON.
func edit(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(sample(t), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(m map[string]any, k string) map[string]any { return m[k].(map[string]any) }

func records(m map[string]any) []any { return obj(m, "payload")["Records"].([]any) }

func TestMalformedObjectsAreErrors(t *testing.T) {
	cases := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("PK\x03\x04 a zip file")},
		{"a JSON array", []byte(`[1,2]`)},
		{"two values", append(sample(t), []byte(` {}`)...)},
		{"an S3 event", []byte(`{"Records":[{"eventSource":"aws:s3"}]}`)},
		{"an SQS destination's record (no payload)", edit(t, func(m map[string]any) { delete(m, "payload") })},
		{"no batch info", edit(t, func(m map[string]any) { delete(m, "DDBStreamBatchInfo") })},
		{"Kinesis batch info", edit(t, func(m map[string]any) {
			m["KinesisBatchInfo"] = m["DDBStreamBatchInfo"]
			delete(m, "DDBStreamBatchInfo")
		})},
		{"no request context", edit(t, func(m map[string]any) { delete(m, "requestContext") })},
		{"other version", edit(t, func(m map[string]any) { m["version"] = "2.0" })},
		{"bad timestamp", edit(t, func(m map[string]any) { m["timestamp"] = "yesterday" })},
		{"bad arrival", edit(t, func(m map[string]any) { obj(m, "DDBStreamBatchInfo")["approximateArrivalOfLastRecord"] = 12 })},
		{"unknown condition", edit(t, func(m map[string]any) { obj(m, "requestContext")["condition"] = "Bored" })},
		{"not a function ARN", edit(t, func(m map[string]any) { obj(m, "requestContext")["functionArn"] = "counters" })},
		{"not a stream ARN", edit(t, func(m map[string]any) {
			obj(m, "DDBStreamBatchInfo")["streamArn"] = "arn:aws:kinesis:us-east-1:1:stream/x"
		})},
		{"batch size differs", edit(t, func(m map[string]any) { obj(m, "DDBStreamBatchInfo")["batchSize"] = 3 })},
		{"sequence range differs", edit(t, func(m map[string]any) { obj(m, "DDBStreamBatchInfo")["startSequenceNumber"] = "1" })},
		{"no records", edit(t, func(m map[string]any) { obj(m, "payload")["Records"] = []any{} })},
		{"payload without Records", edit(t, func(m map[string]any) { m["payload"] = map[string]any{"records": records(m)} })},
		{"payload a number", edit(t, func(m map[string]any) { m["payload"] = 7 })},
		{"payload a string of garbage", edit(t, func(m map[string]any) { m["payload"] = "{not json" })},
		{"record without eventID", edit(t, func(m map[string]any) { delete(records(m)[0].(map[string]any), "eventID") })},
		{"record from elsewhere", edit(t, func(m map[string]any) { records(m)[1].(map[string]any)["eventSource"] = "aws:kinesis" })},
		{"bad attribute value", edit(t, func(m map[string]any) {
			obj(records(m)[0].(map[string]any), "dynamodb")["NewImage"] = map[string]any{"rating": map[string]any{"Q": "4"}}
		})},
		{"attribute value of two types", edit(t, func(m map[string]any) {
			obj(records(m)[0].(map[string]any), "dynamodb")["Keys"] = map[string]any{"k": map[string]any{"S": "a", "N": "1"}}
		})},
		{"too large", append(sample(t), []byte(strings.Repeat(" ", MaxObjectSize))...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.body)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("got %v, want an error wrapping ErrMalformed", err)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 6, 41, 700e6, time.UTC)
	k := NewKey(LocalMappingID("orders-counters"), "shardId-00000001795338000000-a1b2c3d4", at)
	s := k.String()
	if want := Prefix + LocalMappingID("orders-counters") + "/shardId-00000001795338000000-a1b2c3d4/2026/11/22/2026-11-22T09.06.41-"; !strings.HasPrefix(s, want) {
		t.Errorf("key: got %s, want prefix %s", s, want)
	}
	back, err := ParseKey(s)
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	if diff := cmp.Diff(k, back); diff != "" {
		t.Errorf("round trip (-made +parsed):\n%s", diff)
	}
	if NewKey("m", "s", at).ID == NewKey("m", "s", at).ID {
		t.Error("two new keys share their UUID")
	}
	if LocalMappingID("orders-counters") != LocalMappingID("orders-counters") || LocalMappingID("orders-counters") == LocalMappingID("reviews-counters") {
		t.Error("local mapping ids are not one per mapping")
	}
	seqs := []string{"12", "14"}
	r := RemainderKey(k, seqs)
	if r != RemainderKey(k, seqs) || r.ID == k.ID || RemainderKey(r, seqs).ID == r.ID || RemainderKey(k, seqs[:1]).ID == r.ID {
		t.Errorf("remainder keys: %v of %v is not deterministic and new", r, k)
	}
	if _, err := ParseKey(r.String()); err != nil {
		t.Errorf("remainder key %s: %v", r, err)
	}

	bad := []string{
		"",
		"archive/orders/x.json",
		Prefix,
		ReplayedPrefix + s,
		strings.Replace(s, "2026/11/22", "2026/11/23", 1),
		strings.Replace(s, "T09.06.41", "T09:06:41", 1),
		s + "/extra",
		s[:len(s)-1],
		strings.Replace(s, LocalMappingID("orders-counters"), "orders-counters", 1),
		Prefix + LocalMappingID("x") + "//2026/11/22/2026-11-22T09.06.41-" + k.ID,
	}
	for _, b := range bad {
		if _, err := ParseKey(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseKey(%q): got %v, want ErrMalformed", b, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/aws-shape.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"payload":"{\"Records\":[{}]}"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if _, err := o.Encode(); err != nil {
			t.Fatalf("a parsed object does not encode: %v", err)
		}
	})
}

// TestFunctionErrorOnTheWire: Lambda writes responseContext.functionError as
// "Unhandled" when the function threw and as null, not omitted, when it
// answered with batchItemFailures (recorded against AWS, 2025).
func TestFunctionErrorOnTheWire(t *testing.T) {
	o, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	unhandled := "Unhandled"
	for _, tc := range []struct {
		fe   *string
		want string
	}{
		{nil, `"functionError":null`},
		{&unhandled, `"functionError":"Unhandled"`},
	} {
		o.ResponseContext = ResponseContext{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: tc.fe}
		b, err := o.Encode()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if got := string(m["responseContext"]); !strings.Contains(got, tc.want) {
			t.Errorf("responseContext: got %s, want it to hold %s", got, tc.want)
		}
		back, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if (back.ResponseContext.FunctionError == nil) != (tc.fe == nil) {
			t.Errorf("parsed back: got %v, want %v", back.ResponseContext.FunctionError, tc.fe)
		}
	}
}

// TestCreationTimeAsLambdaWritesIt: a record's ApproximateCreationDateTime
// in the payload is a JSON number in Java's double notation, as Lambda
// writes it (1.795493734E9, recorded against AWS), and parses back to the
// same second.
func TestCreationTimeAsLambdaWritesIt(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{1795493734, "1.795493734E9"},
		{1795493734.5, "1.7954937345E9"},
		{1e9, "1.0E9"},
		{12.5, "12.5"},
		{0, "0.0"},
	} {
		if got := javaDouble(tc.f); got != tc.want {
			t.Errorf("javaDouble(%v): got %s, want %s", tc.f, got, tc.want)
		}
	}
	o, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m := creationTime.FindSubmatch(b)
	if m == nil || !strings.Contains(string(m[1]), "E") {
		t.Fatalf("payload's creation time: got %q, want Java's double notation", m)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Payload.Records[0].Change.ApproximateCreationDateTime.Unix(), o.Payload.Records[0].Change.ApproximateCreationDateTime.Unix(); got != want {
		t.Errorf("parsed back: got %d, want %d", got, want)
	}
}
