package archiving_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

const bucket = "archive-test"

var removedAt = time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)

func setup(t testing.TB) (*archiving.Handler, *s3.Client) {
	t.Helper()
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Buckets: []string{bucket}})
	c := st.S3()
	return archiving.New(archiving.Deps{S3: c, Bucket: bucket, Tables: tables.Names{Orders: "x-orders", Carts: "x-carts"}}), c
}

var n int

func removal(table string, ttl bool, keys, item map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	n++
	r := events.DynamoDBEventRecord{EventID: fmt.Sprintf("ev-%04d", n), EventName: "REMOVE",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/x",
		Change: events.DynamoDBStreamRecord{Keys: keys, OldImage: item, SequenceNumber: fmt.Sprintf("%021d", n),
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: removedAt}}}
	if ttl {
		r.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	}
	return r
}

func order(id string) (map[string]events.DynamoDBAttributeValue, map[string]events.DynamoDBAttributeValue) {
	keys := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1"), "orderId": events.NewStringAttribute(id)}
	item := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1"), "orderId": events.NewStringAttribute(id),
		"status": events.NewStringAttribute("DELIVERED"), "totalCents": events.NewNumberAttribute("12345678901234567"),
		"lines": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"productId": events.NewStringAttribute("p1"), "quantity": events.NewNumberAttribute("2")})})}
	return keys, item
}

func objects(t testing.TB, c *s3.Client) map[string][]map[string]any {
	t.Helper()
	list, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for _, o := range list.Contents {
		obj, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(obj.Body)
		if err != nil {
			t.Fatalf("%s is not gzip: %v", *o.Key, err)
		}
		raw, _ := io.ReadAll(zr)
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var m map[string]any
			d := json.NewDecoder(strings.NewReader(l))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			out[*o.Key] = append(out[*o.Key], m)
		}
	}
	return out
}

func handle(t testing.TB, h *archiving.Handler, recs ...events.DynamoDBEventRecord) []string {
	t.Helper()
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestArchivesTTLRemovalsAsPlainJSONLines(t *testing.T) {
	h, c := setup(t)
	k1, i1 := order("o1")
	k2, i2 := order("o2")
	cartKeys := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u7")}
	cartItem := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u7"), "expiresAt": events.NewNumberAttribute("1795000000"),
		"lines": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"p1": events.NewNumberAttribute("3")})}
	userDelete := removal("x-orders", false, k2, i2)
	insert := removal("x-orders", true, k2, i2)
	insert.EventName = "INSERT"
	batch := []events.DynamoDBEventRecord{removal("x-orders", true, k1, i1), userDelete, removal("x-orders", true, k2, i2), insert, removal("x-carts", true, cartKeys, cartItem)}
	if f := handle(t, h, batch...); len(f) != 0 {
		t.Fatalf("failures: %v", f)
	}
	got := objects(t, c)
	if len(got) != 2 {
		t.Fatalf("objects: got %d (%v), want 2", len(got), got)
	}
	var orderKey, cartKey string
	for k := range got {
		switch {
		case strings.HasPrefix(k, "orders/year=2026/month=11/day=22/") && strings.HasSuffix(k, ".jsonl.gz"):
			orderKey = k
		case strings.HasPrefix(k, "carts/year=2026/month=11/day=22/") && strings.HasSuffix(k, ".jsonl.gz"):
			cartKey = k
		default:
			t.Errorf("unexpected key %s", k)
		}
	}
	lines := got[orderKey]
	if len(lines) != 2 {
		t.Fatalf("order lines: got %d, want 2 (user delete and insert left out)", len(lines))
	}
	l := lines[0]
	if l["eventId"] != batch[0].EventID || l["table"] != "orders" || l["removedAt"] != "2026-11-22T10:30:00Z" {
		t.Errorf("line: got %v", l)
	}
	item := l["item"].(map[string]any)
	if item["totalCents"] != json.Number("12345678901234567") || item["status"] != "DELIVERED" {
		t.Errorf("item: got %v, want plain JSON with exact numbers", item)
	}
	if keys := l["keys"].(map[string]any); keys["orderId"] != "o1" || keys["userId"] != "u1" {
		t.Errorf("keys: got %v", keys)
	}
	if cart := got[cartKey][0]["item"].(map[string]any); cart["lines"].(map[string]any)["p1"] != json.Number("3") {
		t.Errorf("cart item: got %v", cart)
	}

	// A retry of the same batch overwrites its objects: no new object, no duplicate line.
	handle(t, h, batch...)
	again := objects(t, c)
	if len(again) != 2 || len(again[orderKey]) != 2 {
		t.Errorf("after a retry: got %d objects, %d order lines; want 2 and 2", len(again), len(again[orderKey]))
	}
}

func TestFailedPutFailsItsRecords(t *testing.T) {
	st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1})
	h := archiving.New(archiving.Deps{S3: st.S3(), Bucket: "no-such-bucket", Tables: tables.Names{Orders: "x-orders"}})
	k, i := order("o9")
	r := removal("x-orders", true, k, i)
	stranger := removal("x-elsewhere", true, k, i)
	if f := handle(t, h, r, stranger); len(f) != 2 {
		t.Errorf("failures: got %v, want both records", f)
	}
}

// BenchmarkArchive reports objects and bytes per 1,000 expirations in batches of 100.
func BenchmarkArchive(b *testing.B) {
	h, c := setup(b)
	for i := 0; i < b.N; i++ {
		for batch := 0; batch < 10; batch++ {
			var recs []events.DynamoDBEventRecord
			for j := 0; j < 100; j++ {
				k, it := order(fmt.Sprintf("o-%d-%d-%d", i, batch, j))
				recs = append(recs, removal("x-orders", true, k, it))
			}
			handle(b, h, recs...)
		}
	}
	list, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for _, o := range list.Contents {
		bytes += aws.ToInt64(o.Size)
	}
	b.ReportMetric(float64(len(list.Contents))/float64(b.N), "objects/1000")
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/1000")
}

// TestMalformedRemovalsAreItemFailuresInStreamOrder: a removal that can
// never be archived is a batch item failure, and the others are archived.
func TestMalformedRemovalsAreItemFailuresInStreamOrder(t *testing.T) {
	h, c := setup(t)
	k, i := order("o-good")
	good := removal("x-orders", true, k, i)
	noImage := removal("x-orders", true, k, nil)
	noImage.Change.SequenceNumber = "99"
	noTime := removal("x-carts", true, k, i)
	noTime.Change.SequenceNumber = "100"
	noTime.Change.ApproximateCreationDateTime = events.SecondsEpochTime{}
	bad := removal("x-orders", true, k, map[string]events.DynamoDBAttributeValue{"orderId": {}})
	bad.Change.SequenceNumber = "101"
	tests := []struct {
		name string
		recs []events.DynamoDBEventRecord
		want []string
	}{
		{"each alone", []events.DynamoDBEventRecord{noImage}, []string{"99"}},
		// A record that can never be archived is reported alone, in
		// stream order, and the records around it are archived.
		{"stream order, not string order", []events.DynamoDBEventRecord{noImage, good, noTime, bad}, []string{"99", "100", "101"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := handle(t, h, tt.recs...); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("failures: got %v, want %v", got, tt.want)
			}
		})
	}
	var lines int
	for _, ls := range objects(t, c) {
		for _, l := range ls {
			if l["eventId"] != good.EventID {
				t.Errorf("archived %v, want only %s", l["eventId"], good.EventID)
			}
			lines++
		}
	}
	if lines != 1 {
		t.Errorf("archived lines: got %d, want 1", lines)
	}
}

// failingOnce fails the first PutObject of a key under prefix, as S3 does
// now and then (503 SlowDown).
type failingOnce struct {
	*s3.Client
	prefix string
	failed bool
}

func (f *failingOnce) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if !f.failed && strings.HasPrefix(aws.ToString(in.Key), f.prefix) {
		f.failed = true
		return nil, fmt.Errorf("SlowDown: please reduce your request rate")
	}
	return f.Client.PutObject(ctx, in, opts...)
}

// TestRetriesNeverPutAnEventInTwoObjects: a batch that crosses midnight
// and back (removals of day D, D+1, D), whose object of D+1 fails once, is
// retried by Lambda from the record reported first; a batch whose invocation
// failed after its objects were written is retried whole, then bisected.
// Every removal ends in exactly one object. The first case archived the
// third removal twice (in the object of the first run's records, and again
// under a new name in the retry), the third the first half of the batch.
func TestRetriesNeverPutAnEventInTwoObjects(t *testing.T) {
	newBatch := func(days ...int) []events.DynamoDBEventRecord {
		var recs []events.DynamoDBEventRecord
		for _, d := range days {
			k, it := order(fmt.Sprintf("o-%d", n))
			r := removal("x-orders", true, k, it)
			r.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: removedAt.AddDate(0, 0, d)}
			recs = append(recs, r)
		}
		return recs
	}
	// eventsIn counts each event id's lines across every object.
	eventsIn := func(t *testing.T, c *s3.Client) map[string]int {
		seen := map[string]int{}
		for _, ls := range objects(t, c) {
			for _, l := range ls {
				seen[l["eventId"].(string)]++
			}
		}
		return seen
	}
	check := func(t *testing.T, c *s3.Client, batch []events.DynamoDBEventRecord) {
		t.Helper()
		seen := eventsIn(t, c)
		for _, r := range batch {
			if seen[r.EventID] != 1 {
				t.Errorf("%s is in %d lines, want 1", r.EventID, seen[r.EventID])
			}
		}
		if len(seen) != len(batch) {
			t.Errorf("archived %d events, want %d", len(seen), len(batch))
		}
	}
	// retry is the batch Lambda sends again: from the first failure on.
	retry := func(batch []events.DynamoDBEventRecord, failures []string) []events.DynamoDBEventRecord {
		for i, r := range batch {
			if len(failures) > 0 && r.Change.SequenceNumber == failures[0] {
				return batch[i:]
			}
		}
		return nil
	}

	t.Run("a put that fails mid-batch", func(t *testing.T) {
		st := stacktest.Dedicated(t, endpoints.Config{TTLSweepInterval: -1, Buckets: []string{bucket}})
		c := st.S3()
		h := archiving.New(archiving.Deps{S3: &failingOnce{Client: c, prefix: "orders/year=2026/month=11/day=23/"}, Bucket: bucket, Tables: tables.Names{Orders: "x-orders"}})
		batch := newBatch(0, 1, 0)
		failures := handle(t, h, batch...)
		if len(failures) == 0 || failures[0] != batch[1].Change.SequenceNumber {
			t.Fatalf("failures: %v, want the second record first", failures)
		}
		if f := handle(t, h, retry(batch, failures)...); len(f) != 0 {
			t.Fatalf("failures of the retry: %v", f)
		}
		check(t, c, batch)
	})

	t.Run("a malformed record, retried and replayed", func(t *testing.T) {
		// Lambda retries from the malformed record until it gives up, and
		// make replay then drives the batch, and the records the function
		// did not name, again: the records after it are archived once, and
		// they are not held back behind it (it is named alone).
		h, c := setup(t)
		batch := newBatch(0, 0, 0, 0)
		batch[1].Change.OldImage = nil
		good := []events.DynamoDBEventRecord{batch[0], batch[2], batch[3]}
		for _, b := range [][]events.DynamoDBEventRecord{batch, batch[1:], batch[1:], batch[2:]} {
			holds := false
			for _, r := range b {
				holds = holds || r.EventID == batch[1].EventID
			}
			if f := handle(t, h, b...); holds != (len(f) == 1 && f[0] == batch[1].Change.SequenceNumber) || !holds && len(f) > 0 {
				t.Fatalf("failures of %d records: %v, want the malformed one alone when it is there", len(b), f)
			}
		}
		check(t, c, good)
	})

	t.Run("a batch sent again, then bisected", func(t *testing.T) {
		h, c := setup(t)
		batch := newBatch(0, 0, 0, 0)
		for _, b := range [][]events.DynamoDBEventRecord{batch, batch, batch[:2], batch[2:]} {
			if f := handle(t, h, b...); len(f) != 0 {
				t.Fatalf("failures: %v", f)
			}
		}
		check(t, c, batch)
	})
}
