package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/ops/replay"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

type user struct {
	OrderCount         int64 `json:"orderCount"`
	LifetimeSpendCents int64 `json:"lifetimeSpendCents"`
	ReviewCount        int64 `json:"reviewCount"`
}

type product struct {
	ProductID     string   `json:"productId"`
	UnitsSold     int64    `json:"unitsSold"`
	ReviewCount   int64    `json:"reviewCount"`
	RatingAverage *float64 `json:"ratingAverage"`
	Version       int64    `json:"version"`
}

type order struct {
	OrderID    string `json:"orderId"`
	TotalCents int64  `json:"totalCents"`
}

// shop is the drill's traffic and what the counters, the index and the
// archive must say about it.
type shop struct {
	p1, p2     string
	o2, o3     string
	wantUsers  map[string]user
	wantUnits  map[string]int64
	wantReview map[string][2]int64 // product → review count, rating total
}

// traffic runs orders, a cancellation, a delivery, reviews and a cart that
// expires through the API: every mapping gets records.
func traffic(d *drill) shop {
	var s shop
	for _, u := range []string{"u1", "u2"} {
		d.api(201, "POST", "/users", u, map[string]any{"name": strings.ToUpper(u)}, nil)
	}
	var p product
	d.api(201, "POST", "/products", "admin", map[string]any{"name": "Kettle", "description": "Boils", "category": "kitchen", "priceCents": 1000, "stock": 100}, &p)
	s.p1 = p.ProductID
	d.api(201, "POST", "/products", "admin", map[string]any{"name": "Mug", "description": "Holds tea", "category": "kitchen", "priceCents": 250, "stock": 100}, &p)
	s.p2 = p.ProductID
	place := func(u, pid string, qty int) order {
		var o order
		d.api(201, "POST", "/users/"+u+"/orders", u, map[string]any{"items": []map[string]any{{"productId": pid, "quantity": qty}}}, &o)
		return o
	}
	place("u1", s.p1, 2)
	o2 := place("u1", s.p2, 1)
	d.api(200, "POST", "/users/u1/orders/"+o2.OrderID+"/cancel", "u1", nil, nil)
	o3 := place("u1", s.p1, 1)
	d.api(200, "PATCH", "/users/u1/orders/"+o3.OrderID, "admin", map[string]any{"status": "SHIPPED"}, nil)
	d.api(200, "PATCH", "/users/u1/orders/"+o3.OrderID, "admin", map[string]any{"status": "DELIVERED"}, nil)
	place("u2", s.p2, 4)
	s.o2, s.o3 = o2.OrderID, o3.OrderID
	d.api(201, "PUT", "/products/"+s.p1+"/reviews/u1", "u1", map[string]any{"rating": 5, "title": "Fast", "body": "Boils fast"}, nil)
	d.api(201, "PUT", "/products/"+s.p1+"/reviews/u2", "u2", map[string]any{"rating": 3, "title": "Loud", "body": "Whistles"}, nil)
	d.api(201, "PUT", "/products/"+s.p2+"/reviews/u2", "u2", map[string]any{"rating": 4, "title": "Fine", "body": "Holds tea"}, nil)
	d.api(200, "PUT", "/users/u2/cart/"+s.p1, "u2", map[string]any{"quantity": 1}, nil)
	s.wantUsers = map[string]user{"u1": {3, 3000, 1}, "u2": {1, 1000, 2}}
	s.wantUnits = map[string]int64{s.p1: 3, s.p2: 4}
	s.wantReview = map[string][2]int64{s.p1: {2, 8}, s.p2: {1, 4}}
	return s
}

// state is what the counters, the index and the archive say, in one string
// to compare, and what differs from what they must say ("" when exact).
func (d *drill) state(s shop) (snapshot, drift string) {
	var b, wrong strings.Builder
	for _, u := range []string{"u1", "u2"} {
		var got user
		d.api(200, "GET", "/users/"+u, u, nil, &got)
		fmt.Fprintf(&b, "%s %+v\n", u, got)
		if got != s.wantUsers[u] {
			fmt.Fprintf(&wrong, "user %s: got %+v, want %+v; ", u, got, s.wantUsers[u])
		}
	}
	for _, pid := range []string{s.p1, s.p2} {
		var got product
		d.api(200, "GET", "/products/"+pid, "", nil, &got)
		doc := d.doc(pid)
		fmt.Fprintf(&b, "%s units=%d reviews=%d doc=%s\n", pid, got.UnitsSold, got.ReviewCount, doc)
		want := s.wantReview[pid]
		if got.UnitsSold != s.wantUnits[pid] || got.ReviewCount != want[0] || got.RatingAverage == nil || *got.RatingAverage != float64(want[1])/float64(want[0]) {
			fmt.Fprintf(&wrong, "product %s: got units %d, reviews %d, rating %v; want %d, %d, %v; ", pid, got.UnitsSold, got.ReviewCount, got.RatingAverage, s.wantUnits[pid], want[0], float64(want[1])/float64(want[0]))
		}
		// The search document carries the catalog item's version; the API's
		// adds the stock buckets' (sales), which the indexer never sees.
		if wantDoc := fmt.Sprintf("v%d units=%d reviews=%d", d.catalogVersion(pid), got.UnitsSold, got.ReviewCount); !strings.HasPrefix(doc, wantDoc) {
			fmt.Fprintf(&wrong, "search document of %s: got %q, want %q…; ", pid, doc, wantDoc)
		}
	}
	arch := d.archived()
	fmt.Fprintf(&b, "archive %v\n", arch)
	for _, id := range []string{tables.Orders + "/" + s.o2 + "/u1", tables.Orders + "/" + s.o3 + "/u1", tables.Carts + "/u2"} {
		if len(arch[id]) != 1 {
			fmt.Fprintf(&wrong, "archive of %s: got %d lines, want 1; ", id, len(arch[id]))
		}
	}
	if len(arch) != 3 {
		fmt.Fprintf(&wrong, "archive: got %v, want 3 items; ", arch)
	}
	return b.String(), wrong.String()
}

// TestDrillReplayBringsEveryFunctionBack runs an incident that makes each of
// the three stream functions fail until their mappings give the batches up:
// the counters' writes are throttled (the DynamoDB fault hook), the search
// index is replaced by one that refuses every document, the archive bucket is
// gone. The batches land in the failure bucket with their payloads; counters,
// index and archive are behind. After the incident, a replay interrupted
// half-way and run again brings all three exact; another replay changes
// nothing; and replaying every object once more (markers removed, as after a
// replay killed before it could mark them) changes nothing either: the
// indexer, the archiver and the counters are idempotent under replay.
func TestDrillReplayBringsEveryFunctionBack(t *testing.T) {
	d := startDrill(t, drillOptions{env: map[string]string{"ORDER_RETENTION": "1s", "CART_TTL": "1s"}})
	archive := d.sys.Env["ARCHIVE_BUCKET"]
	ctx := context.Background()

	// The incident.
	d.fault(tables.CounterEvents, "TransactWriteItems", "ThrottlingException")
	if got, b := d.http("PUT", d.sys.SearchURL+"/"+productsearch.Index, "", map[string]any{"mappings": map[string]any{"dynamic": "strict"}}); got != 200 {
		t.Fatalf("create a refusing index: %d %s", got, b)
	}
	if _, err := d.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(archive)}); err != nil {
		t.Fatal(err)
	}
	s := traffic(d)
	eventually(t, "every mapping gave batches up", func() string {
		got := d.failed()
		for _, m := range wiring.Mappings() {
			if len(got[m.Name]) == 0 {
				return "no failure object of " + m.Name
			}
		}
		return ""
	})
	d.settle()

	// The objects hold the batches' records.
	records := map[string]int{}
	for name, objs := range d.failed() {
		for _, o := range objs {
			records[name] += len(o.Payload.Records)
			for _, r := range o.Payload.Records {
				if r.EventSource != "aws:dynamodb" || r.Change.SequenceNumber == "" || len(r.Change.Keys) == 0 {
					t.Errorf("%s: record without its stream data: %+v", name, r)
				}
			}
		}
	}
	// orders: 4 placed and 1 cancelled, and the 2 status changes when they
	// share a batch with one of those (alone they have no effect, and
	// succeed); reviews: 3; products: the 2 creations (sales and the
	// cancel's restock write stock buckets, not the catalog); archive: 2
	// orders, 1 cart.
	if records["orders-counters"] < 5 || records["orders-counters"] > 7 || records["reviews-counters"] != 3 || records["products-indexer"] != 2 ||
		records["orders-archiver"] != 2 || records["carts-archiver"] != 1 {
		t.Errorf("records in the failure bucket: got %v", records)
	}
	if _, drift := d.state(s); !strings.Contains(drift, "user u1") || !strings.Contains(drift, "search document") || !strings.Contains(drift, "archive") {
		t.Fatalf("counters, search and archive should be behind; drift: %s", drift)
	}

	// The incident ends: faults cleared, the index rebuilt, the bucket back.
	d.clearFaults()
	if got, b := d.http("DELETE", d.sys.SearchURL+"/"+productsearch.Index, "", nil); got != 200 {
		t.Fatalf("drop the refusing index: %d %s", got, b)
	}
	if got, b := d.http("PUT", d.sys.SearchURL+"/"+productsearch.Index, "", []byte(productsearch.Mapping)); got != 200 {
		t.Fatalf("recreate the index: %d %s", got, b)
	}
	if _, err := d.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(archive)}); err != nil {
		t.Fatal(err)
	}
	objects := len(d.objects(failures.Prefix))

	// A replay killed half-way: the third invocation's answer never arrives.
	// One object per invocation (Coalesce 1), so that two objects are done.
	tg, err := target.Resolve(ctx, d.getenv())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := invoker(tg, env{logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	killed, kill := context.WithCancel(ctx)
	defer kill()
	var calls atomic.Int32
	_, err = replay.Run(killed, replay.Config{Store: d.s3, Bucket: d.sys.FailureBucket, Target: tg, Concurrency: 1, Coalesce: 1,
		Invoker: invokerFunc(func(ctx context.Context, fn string, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			resp, err := inv.Invoke(ctx, fn, ev)
			if calls.Add(1) == 3 {
				kill()
			}
			return resp, err
		})})
	if err == nil {
		t.Fatal("interrupted replay: got nil error")
	}
	if marked := len(d.objects(failures.ReplayedPrefix)); marked != 2 {
		t.Errorf("objects marked by the interrupted replay: got %d, want 2", marked)
	}
	// Only what was replayed is tagged for the lifecycle: the batches not
	// replayed yet stay in the bucket however old they grow.
	var markedKeys []string
	for _, k := range d.objects(failures.ReplayedPrefix) {
		markedKeys = append(markedKeys, strings.TrimPrefix(k, failures.ReplayedPrefix))
	}
	if tagged := d.replayedTagged(failures.Prefix); !slices.Equal(tagged, markedKeys) {
		t.Errorf("objects tagged as replayed after the interrupted replay: got %v, want the marked ones %v", tagged, markedKeys)
	}

	// A replay whose calls the Lambda API refuses (here the first): the
	// function never saw the records, so nothing is marked and no remainder
	// written, and the run stops with the call's error (exit 2), not as
	// failing records (exit 1).
	_, err = replay.Run(ctx, replay.Config{Store: d.s3, Bucket: d.sys.FailureBucket, Target: tg, Concurrency: 2, Coalesce: 1,
		Invoker: invokerFunc(func(ctx context.Context, fn string, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			return events.DynamoDBEventResponse{}, fmt.Errorf("invoke %s: %w: TooManyRequestsException: Rate exceeded", fn, replay.ErrCall)
		})})
	if !errors.Is(err, replay.ErrCall) || errors.Is(err, target.ErrIncomplete) {
		t.Errorf("replay refused by the Lambda API: got %v, want an ErrCall that is not ErrIncomplete", err)
	}
	if marked := len(d.objects(failures.ReplayedPrefix)); marked != 2 {
		t.Errorf("objects marked after the refused replay: got %d, want the 2 of before", marked)
	}
	if now := len(d.objects(failures.Prefix)); now != objects {
		t.Errorf("failure objects after the refused replay: got %d, want %d (no remainder)", now, objects)
	}

	code, out := d.replay()
	if code != 0 {
		t.Fatalf("replay: exit %d, want 0", code)
	}
	if got := strings.Count(out, "\nreplayed "); got != objects-2 {
		t.Errorf("replay reported %d objects replayed, want %d", got, objects-2)
	}
	d.settle()
	var exact string
	eventually(t, "exact after the replay", func() string {
		snap, drift := d.state(s)
		exact = snap
		return drift
	})

	if tagged := len(d.replayedTagged(failures.Prefix)); tagged != objects {
		t.Errorf("objects tagged as replayed after the replay: got %d, want all %d", tagged, objects)
	}

	// A second replay does nothing.
	code, out = d.replay()
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d failure objects (%d replayed before); 0 replayed", objects, objects)) {
		t.Errorf("second replay: exit %d, output %s", code, out)
	}
	d.settle()
	if snap, drift := d.state(s); snap != exact || drift != "" {
		t.Errorf("second replay changed the state:\n%s\nwas\n%s\ndrift: %s", snap, exact, drift)
	}

	// Every object replayed once more, per mapping: idempotent.
	for _, key := range d.objects(failures.ReplayedPrefix) {
		d.remove(d.sys.FailureBucket, key)
	}
	for _, m := range []string{"products-indexer", "orders-archiver", "carts-archiver", "orders-counters", "reviews-counters"} {
		if code, _ := d.replay("-mapping", m); code != 0 {
			t.Errorf("replay of %s once more: exit %d", m, code)
		}
	}
	d.settle()
	if snap, drift := d.state(s); snap != exact || drift != "" {
		t.Errorf("replaying every object twice changed the state:\n%s\nwas\n%s\ndrift: %s", snap, exact, drift)
	}
	if got := len(d.objects(failures.Prefix)); got != objects {
		t.Errorf("failure objects: got %d, want %d (a replay that succeeds writes none)", got, objects)
	}

	// An archiver's batch is the only copy of what TTL removed: retiring
	// one takes -force.
	archived := d.failedKeys(failures.LocalMappingID("orders-archiver"))
	if len(archived) == 0 {
		t.Fatal("no failure object of orders-archiver")
	}
	if code, out := d.replay("-retire", archived[0], "-reason", "tried"); code != 2 || !strings.Contains(out, "archive for good") {
		t.Errorf("retire of an archiver's batch without -force: exit %d, want 2 and the loss named", code)
	}
	if code, out := d.replay("-retire", archived[0], "-reason", "tried", "-force"); code != 0 || !strings.Contains(out, "already replayed or retired") {
		t.Errorf("retire of a replayed archiver's batch with -force: exit %d, want 0, left alone", code)
	}
}

type invokerFunc func(context.Context, string, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

func (f invokerFunc) Invoke(ctx context.Context, fn string, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return f(ctx, fn, ev)
}
