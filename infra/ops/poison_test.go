package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/ops/replay"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// putItem writes an item straight into a table, as no API would.
func (d *drill) putItem(table string, item any) {
	d.t.Helper()
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.sys.DynamoDB().PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(d.prefix + table), Item: av}); err != nil {
		d.t.Fatalf("put into %s: %v", table, err)
	}
}

// lambdaAPI is Lambda's Invoke API in front of the system's in-process
// handlers, so the stage's code path (the SDK's lambda:Invoke, function
// errors in X-Amz-Function-Error) runs against the local stack.
func lambdaAPI(t *testing.T, handlers replay.Handlers) *lambda.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/deployed-")
		name, _, _ = strings.Cut(name, "/")
		var ev events.DynamoDBEvent
		body, _ := io.ReadAll(r.Body)
		if !ok || r.Method != "POST" || json.Unmarshal(body, &ev) != nil {
			http.Error(w, `{"message":"bad invoke"}`, http.StatusBadRequest)
			return
		}
		resp, err := handlers.Invoke(r.Context(), name, ev)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			json.NewEncoder(w).Encode(map[string]string{"errorMessage": err.Error(), "errorType": "errorString"})
			return
		}
		json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	return lambda.NewFromConfig(endpoints.AWSConfig(), func(o *lambda.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// TestDrillPoisonStaysReportedWhileTheRestFlows: a review the counters can
// never apply sits between two good ones. The good ones flow; the poison
// alone lands in the failure bucket. Next to it lie objects that are no
// failure records (a note, a truncated object, a key of another layout, an
// object of a mapping this stage does not have). A replay reports each of
// those and skips it, replays the poison, which fails again, keeps it in a
// new object for the next run, and exits 1; a second replay, through
// lambda:Invoke this time, does the same to that object. Nothing crashes and
// the good reviews are counted once.
func TestDrillPoisonStaysReportedWhileTheRestFlows(t *testing.T) {
	d := startDrill(t, drillOptions{})
	for _, u := range []string{"u1", "u2", "u3"} {
		d.api(201, "POST", "/users", u, map[string]any{"name": u}, nil)
	}
	var p product
	d.api(201, "POST", "/products", "admin", map[string]any{"name": "Kettle", "description": "Boils", "category": "kitchen", "priceCents": 1000, "stock": 10}, &p)
	d.api(201, "PUT", "/products/"+p.ProductID+"/reviews/u1", "u1", map[string]any{"rating": 5, "title": "Fast", "body": "Boils fast"}, nil)
	d.putItem(tables.Reviews, map[string]any{"productId": p.ProductID, "userId": "u2", "rating": "four", "title": "Odd", "body": "Rated in words", "version": 1})
	d.api(201, "PUT", "/products/"+p.ProductID+"/reviews/u3", "u3", map[string]any{"rating": 3, "title": "Loud", "body": "Whistles"}, nil)
	eventually(t, "the poison in the failure bucket", func() string {
		if len(d.failed()["reviews-counters"]) == 0 {
			return "no failure object of reviews-counters"
		}
		return ""
	})
	d.settle()
	// The object holds the poison first; what follows it in its batch was
	// applied before the batch was given up on (the mapping retries from the
	// lowest failed record).
	poison := d.failed()["reviews-counters"]
	if len(poison) != 1 || poison[0].Payload.Records[0].Change.Keys["userId"].String() != "u2" {
		t.Fatalf("failure objects: got %+v, want one starting with the poison", poison)
	}
	n := len(poison[0].Payload.Records)
	counted := func() string {
		var got product
		d.api(200, "GET", "/products/"+p.ProductID, "", nil, &got)
		var u3 user
		d.api(200, "GET", "/users/u3", "u3", nil, &u3)
		if got.ReviewCount != 2 || got.RatingAverage == nil || *got.RatingAverage != 4 || u3.ReviewCount != 1 {
			return "reviews around the poison: got product " + string(mustJSON(got)) + ", u3 " + string(mustJSON(u3)) + "; want 2 reviews, average 4, u3 1"
		}
		return ""
	}
	eventually(t, "the records after the poison flowed", counted)

	// Objects that are no failure records.
	bucket := d.sys.FailureBucket
	id := failures.LocalMappingID("reviews-counters")
	d.put(bucket, "notes/incident-42.txt", []byte("the bucket is no notebook"))
	truncated := failures.NewKey(id, "shardId-1", time.Now()).String()
	d.put(bucket, truncated, []byte(`{"requestContext":{"requestId":"x","functionArn":"arn:aws:lambda:us-east-1:0:function:counters"`))
	d.put(bucket, failures.Prefix+id+"/README.json", []byte(`{}`))
	// A batch of another stage's mapping: its key's UUID and its function
	// are none of this stage's.
	other := poison[0]
	other.RequestContext.FunctionArn = "arn:aws:lambda:us-east-1:000000000000:function:shopstream-other-counters"
	body, err := other.Encode()
	if err != nil {
		t.Fatal(err)
	}
	stranger := failures.NewKey(failures.LocalMappingID("a-mapping-of-another-stage"), poison[0].Batch.ShardID, time.Now()).String()
	d.put(bucket, stranger, body)

	code, out := d.replay()
	if code != 1 {
		t.Errorf("replay: exit %d, want 1", code)
	}
	for _, want := range []string{
		"foreign  -                 notes/incident-42.txt",
		"skipped  reviews-counters  " + truncated + "  " + failures.ErrMalformed.Error(),
		"skipped  -                 " + failures.Prefix + id + "/README.json",
		"skipped  -                 " + stranger + "  no mapping of this stage",
		"failing  reviews-counters",
		fmt.Sprintf("%d records: %d succeeded, 1 still failing (partial batch response), kept in %s", n, n-1, failures.Prefix+id),
		fmt.Sprintf("%d records, %d succeeded, 1 still failing;", n, n-1),
		"; 3 skipped;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q", want)
		}
	}
	remainders := func() []failures.Object {
		var rs []failures.Object
		for _, o := range d.failed()["reviews-counters"] {
			if o.RequestContext.FunctionArn == poison[0].RequestContext.FunctionArn && o.Timestamp.After(poison[0].Timestamp) {
				rs = append(rs, o)
			}
		}
		return rs
	}
	if rs := remainders(); len(rs) != 1 || len(rs[0].Payload.Records) != 1 || rs[0].Payload.Records[0].EventID != poison[0].Payload.Records[0].EventID {
		t.Errorf("remainder objects: got %+v, want one holding the poison", rs)
	}
	if msg := counted(); msg != "" {
		t.Error(msg)
	}

	// Next run, through lambda:Invoke: the remainder is replayed and kept again.
	tg, err := target.Resolve(context.Background(), d.getenv())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := invoker(tg, env{logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, fn := range wiring.Functions() {
		names[fn] = "deployed-" + fn
	}
	var report strings.Builder
	res, err := replay.Run(context.Background(), replay.Config{Store: d.s3, Bucket: bucket, Target: tg, Out: &report,
		Invoker: &replay.Lambda{Client: lambdaAPI(t, inv.(replay.Handlers)), Names: names}})
	t.Logf("replay through lambda:Invoke:\n%s", report.String())
	if !errors.Is(err, target.ErrIncomplete) || res.Replayed != 1 || res.Failed != 1 || res.Skipped != 3 || res.Foreign != 1 {
		t.Errorf("second replay: got %+v, %v; want the remainder replayed, still failing, the 3 bad objects skipped", res, err)
	}
	if rs := remainders(); len(rs) != 2 {
		t.Errorf("remainder objects after the second run: got %d, want 2", len(rs))
	}
	// What was replayed is tagged for the lifecycle, the remainder still
	// failing is not: it stays until a replay applies it.
	var marked []string
	for _, k := range d.objects(failures.ReplayedPrefix) {
		marked = append(marked, strings.TrimPrefix(k, failures.ReplayedPrefix))
	}
	if tagged := d.replayedTagged(failures.Prefix); len(marked) != 2 || !slices.Equal(tagged, marked) {
		t.Errorf("objects tagged as replayed: got %v, want the 2 marked ones %v", tagged, marked)
	}
	if msg := counted(); msg != "" {
		t.Error(msg)
	}

	// The operator gives up on the poison's remainder and the junk: each
	// is tagged and marked with the reason, and the next replay has
	// nothing left to do.
	var left []string
	for _, k := range d.objects(failures.Prefix) {
		if !slices.Contains(marked, k) {
			left = append(left, k)
		}
	}
	if len(left) != 4 {
		t.Fatalf("objects neither replayed nor retired: got %v, want the remainder and the 3 skipped", left)
	}
	if code, _ := d.replay("-retire", left[0]); code != 2 {
		t.Errorf("retire without a reason: exit %d, want 2", code)
	}
	if code, _ := d.replay("-retire", "notes/incident-42.txt", "-reason", "not ours"); code != 2 {
		t.Errorf("retire of a foreign object: exit %d, want 2", code)
	}
	// The stranger's mapping is none of this stage's: it could be an
	// archiver's batch, so nothing is retired without -force.
	code, out = d.replay("-retire", strings.Join(left, " "), "-reason", "poison understood; junk")
	if code != 2 || strings.Contains(out, "\nretired ") {
		t.Errorf("retire of a batch of an unknown mapping without -force: exit %d, want 2 and nothing retired:\n%s", code, out)
	}
	code, out = d.replay("-retire", strings.Join(left, " "), "-reason", "poison understood; junk", "-force")
	if code != 0 || strings.Count(out, "\nretired ") != 4 {
		t.Errorf("retire: exit %d, want 0 and 4 objects retired", code)
	}
	if code, out := d.replay(); code != 0 || !strings.Contains(out, "; 0 replayed") || !strings.Contains(out, "; 0 skipped;") {
		t.Errorf("replay after the retirements: exit %d, want 0 with nothing replayed or skipped", code)
	}
	marked = marked[:0]
	for _, k := range d.objects(failures.ReplayedPrefix) {
		marked = append(marked, strings.TrimPrefix(k, failures.ReplayedPrefix))
	}
	if tagged := d.replayedTagged(failures.Prefix); len(marked) != 6 || !slices.Equal(tagged, marked) {
		t.Errorf("objects tagged after the retirements: got %v, want the 6 marked ones %v", tagged, marked)
	}
	if code, out := d.replay("-retire", left[0], "-reason", "again"); code != 0 || !strings.Contains(out, "already replayed or retired") {
		t.Errorf("retire twice: exit %d, want 0 and the object left alone", code)
	}
}

// syncBuffer is a buffer several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestCounterReplayOfAnyAgeIsExact: a batch is given up on after one of its
// records was applied (a malformed order before it fails the batch's
// remainder, which holds it). Markers are kept for the life of the fact, so
// a replay of any age finds the good order's marker and counts it once; the
// malformed order still fails and is kept for the next replay.
func TestCounterReplayOfAnyAgeIsExact(t *testing.T) {
	// The two orders are two writes: a batching window keeps a poll that
	// falls between them from splitting them into two batches.
	d := startDrill(t, drillOptions{mapping: func(m *wiring.Mapping) {
		if m.Name == "orders-counters" {
			m.BatchingWindow = time.Second
		}
	}})
	d.api(201, "POST", "/users", "u1", map[string]any{"name": "U1"}, nil)
	var p product
	d.api(201, "POST", "/products", "admin", map[string]any{"name": "Kettle", "description": "Boils", "category": "kitchen", "priceCents": 1000, "stock": 10}, &p)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	d.putItem(tables.Orders, map[string]any{"userId": "u1", "orderId": "01BADBADBADBADBADBADBADBAD", "status": "PLACED", "totalCents": 1000, "version": 1, "createdAt": now})
	d.putItem(tables.Orders, orders.Order{UserID: "u1", OrderID: "01GOODGOODGOODGOODGOODGOOD", Status: "PLACED", TotalCents: 2000, Version: 1, CreatedAt: now, UpdatedAt: now,
		Lines: []orders.Line{{ProductID: p.ProductID, ProductName: "Kettle", UnitPriceCents: 1000, Quantity: 2}}})
	eventually(t, "the batch given up on", func() string {
		if len(d.failed()["orders-counters"]) == 0 {
			return "no failure object of orders-counters"
		}
		return ""
	})
	d.settle()
	objs := d.failed()["orders-counters"]
	if len(objs) != 1 || len(objs[0].Payload.Records) != 2 {
		t.Fatalf("failure objects: got %d, want 1 holding both orders (the bad one first, in one batch)", len(objs))
	}
	applied := func() user {
		var u user
		d.api(200, "GET", "/users/u1", "u1", nil, &u)
		return u
	}
	if u := applied(); u.OrderCount != 1 || u.LifetimeSpendCents != 2000 {
		t.Fatalf("counters before the replay: got %+v, want the good order counted once", u)
	}
	tg, err := target.Resolve(context.Background(), d.getenv())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := invoker(tg, env{logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var report syncBuffer
	res, err := replay.Run(context.Background(), replay.Config{Store: d.s3, Bucket: d.sys.FailureBucket, Target: tg, Invoker: inv, Out: &report,
		Now: func() time.Time { return time.Now().Add(400 * 24 * time.Hour) }}) // a year and more later
	t.Logf("replay:\n%s", report.String())
	if !errors.Is(err, target.ErrIncomplete) || res.Replayed != 1 || res.Succeeded != 1 || res.Failed != 1 {
		t.Errorf("replay: got %+v, %v; want the batch replayed, the good order done, the malformed one still failing", res, err)
	}
	d.settle()
	if u := applied(); u.OrderCount != 1 || u.LifetimeSpendCents != 2000 {
		t.Errorf("counters after the replay: got %+v, want the good order counted once", u)
	}
	// Invoking the counters on the batch again changes nothing either.
	if _, err := inv.Invoke(context.Background(), wiring.Counters, objs[0].Payload); err != nil {
		t.Fatal(err)
	}
	if u := applied(); u.OrderCount != 1 || u.LifetimeSpendCents != 2000 {
		t.Errorf("counters after a second invocation: got %+v, want the good order counted once", u)
	}
}
