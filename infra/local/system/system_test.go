package system_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/wiring"
)

// start runs a whole system of the test's own on the binary's DynamoDB Local.
func start(t *testing.T, env map[string]string, sweep time.Duration) *system.System {
	t.Helper()
	prefix := stacktest.OwnPrefix(t)
	sys, err := system.Start(context.Background(), system.Config{
		Stack: endpoints.Config{
			DynamoDBUpstream: stacktest.Stack(t).Upstream(),
			TTLSweepInterval: sweep,
			SweepTables:      func(name string) bool { return strings.HasPrefix(name, prefix) },
		},
		TablePrefix:  prefix,
		Env:          env,
		PollInterval: 100 * time.Millisecond,
		Logger:       testLogger(),
	})
	if err != nil {
		t.Fatalf("start system: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close system: %v", err)
		}
	})
	return sys
}

// testLogger shows the system's logs when STACK_DEBUG is set.
func testLogger() *slog.Logger {
	if os.Getenv("STACK_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type client struct {
	t    *testing.T
	base string
}

// call sends a request as sub (admin when sub is "admin", anonymous when "").
func (c client) call(method, path, sub string, body any, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if sub != "" {
		tok, err := apigw.Token([]byte(system.DefaultJWTSecret), sub, sub == "admin", time.Hour)
		if err != nil {
			c.t.Fatalf("token: %v", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

func (c client) must(status int, method, path, sub string, body any, out any) {
	c.t.Helper()
	var raw json.RawMessage
	got := c.call(method, path, sub, body, &raw)
	if got != status {
		c.t.Fatalf("%s %s: got %d %s, want %d", method, path, got, raw, status)
	}
	if out != nil {
		json.Unmarshal(raw, out)
	}
}

// eventually polls check until it returns "" or the deadline passes.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type product struct {
	ProductID     string   `json:"productId"`
	ReviewCount   int      `json:"reviewCount"`
	RatingAverage *float64 `json:"ratingAverage"`
	UnitsSold     int      `json:"unitsSold"`
	Version       int      `json:"version"`
}

type user struct {
	OrderCount         int   `json:"orderCount"`
	LifetimeSpendCents int64 `json:"lifetimeSpendCents"`
	ReviewCount        int   `json:"reviewCount"`
}

func setup(t *testing.T, c client, name string, stock int) (productID string) {
	t.Helper()
	var p product
	c.must(201, "POST", "/products", "admin", map[string]any{"name": name, "description": "A " + name + " for the kitchen", "category": "kitchen", "priceCents": 500, "stock": stock}, &p)
	// The page is read eventually consistent: a client sees a new product
	// shortly after its creation.
	eventually(t, "the new product's page", func() string {
		if code := c.call("GET", "/products/"+p.ProductID, "", nil, nil); code != 200 {
			return fmt.Sprintf("GET /products/%s: %d", p.ProductID, code)
		}
		return ""
	})
	return p.ProductID
}

func TestCountersConvergeThroughThePipeline(t *testing.T) {
	sys := start(t, nil, -1)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Kettle", 10)
	c.must(201, "POST", "/users", "u1", map[string]any{"email": "u1@example.com", "name": "U One"}, nil)

	var order struct {
		OrderID string `json:"orderId"`
	}
	c.must(201, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 3}}}, &order)
	c.must(201, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 1}}}, nil)
	c.must(201, "PUT", "/products/"+pid+"/reviews/u1", "u1", map[string]any{"rating": 4, "title": "Good", "body": "Boils fast"}, nil)

	check := func(wantUser user, wantUnits, wantReviews int, wantAvg *float64) func() string {
		return func() string {
			var u user
			var p product
			c.must(200, "GET", "/users/u1", "u1", nil, &u)
			c.must(200, "GET", "/products/"+pid, "", nil, &p)
			avgOK := (wantAvg == nil) == (p.RatingAverage == nil) && (wantAvg == nil || *wantAvg == *p.RatingAverage)
			if u != wantUser || p.UnitsSold != wantUnits || p.ReviewCount != wantReviews || !avgOK {
				return fmt.Sprintf("got user %+v, product units %d reviews %d avg %v; want %+v, %d, %d, %v", u, p.UnitsSold, p.ReviewCount, p.RatingAverage, wantUser, wantUnits, wantReviews, wantAvg)
			}
			return ""
		}
	}
	four, two := 4.0, 2.0
	eventually(t, "after two orders and a review", check(user{2, 2000, 1}, 4, 1, &four))

	c.must(200, "POST", "/users/u1/orders/"+order.OrderID+"/cancel", "u1", nil, nil)
	c.must(200, "PUT", "/products/"+pid+"/reviews/u1", "u1", map[string]any{"rating": 2, "title": "Meh", "body": "Loud"}, nil)
	eventually(t, "after a cancel and a replaced review", check(user{2, 500, 1}, 1, 1, &two))

	c.must(204, "DELETE", "/products/"+pid+"/reviews/u1", "u1", nil, nil)
	eventually(t, "after the review is deleted", check(user{2, 500, 0}, 1, 0, nil))
}

func TestSearchFollowsTheCatalog(t *testing.T) {
	sys := start(t, nil, -1)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Copper Kettle", 5)
	setup(t, c, "Steel Pan", 5)
	search := func(q string) []string {
		var res struct {
			Items []struct {
				ProductID string `json:"productId"`
				Name      string `json:"name"`
			} `json:"items"`
		}
		c.must(200, "GET", "/search?q="+q, "", nil, &res)
		var names []string
		for _, it := range res.Items {
			names = append(names, it.Name)
		}
		return names
	}
	eventually(t, "product indexed", func() string {
		if got := search("kettle"); len(got) != 1 || got[0] != "Copper Kettle" {
			return fmt.Sprintf("search kettle: got %v, want [Copper Kettle]", got)
		}
		return ""
	})
	c.must(200, "PATCH", "/products/"+pid, "admin", map[string]any{"name": "Copper Teapot", "description": "A teapot"}, nil)
	eventually(t, "rename indexed", func() string {
		if got := search("teapot"); len(got) != 1 || got[0] != "Copper Teapot" {
			return fmt.Sprintf("search teapot: got %v, want [Copper Teapot]", got)
		}
		if got := search("kettle"); len(got) != 0 {
			return fmt.Sprintf("search kettle: got %v, want none", got)
		}
		return ""
	})
	c.must(204, "DELETE", "/products/"+pid, "admin", nil, nil)
	eventually(t, "delete indexed", func() string {
		if got := search("teapot"); len(got) != 0 {
			return fmt.Sprintf("search teapot after delete: got %v, want none", got)
		}
		return ""
	})
}

type archiveLine struct {
	EventID   string          `json:"eventId"`
	Table     string          `json:"table"`
	Keys      map[string]any  `json:"keys"`
	Item      map[string]any  `json:"item"`
	RemovedAt string          `json:"removedAt"`
	Extra     json.RawMessage `json:"-"`
}

func archived(t *testing.T, sys *system.System, table string) []archiveLine {
	t.Helper()
	ctx := context.Background()
	c := sys.S3()
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(envcontract.LocalArchiveBucket), Prefix: aws.String(table + "/")})
	if err != nil {
		t.Fatalf("list archive: %v", err)
	}
	var out []archiveLine
	day := time.Now().UTC().Format("year=2006/month=01/day=02")
	for _, o := range list.Contents {
		key := aws.ToString(o.Key)
		if !strings.HasPrefix(key, table+"/"+day+"/") || !strings.HasSuffix(key, ".jsonl.gz") {
			t.Errorf("archive key %q: want %s/%s/<object>.jsonl.gz", key, table, day)
		}
		obj, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(envcontract.LocalArchiveBucket), Key: o.Key})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		zr, err := gzip.NewReader(obj.Body)
		if err != nil {
			t.Fatalf("gunzip %s: %v", key, err)
		}
		dec := json.NewDecoder(zr)
		for dec.More() {
			var l archiveLine
			if err := dec.Decode(&l); err != nil {
				t.Fatalf("decode line of %s: %v", key, err)
			}
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EventID < out[j].EventID })
	return out
}

func TestClosedOrdersAndExpiredCartsReachTheArchive(t *testing.T) {
	sys := start(t, map[string]string{"ORDER_RETENTION": "1s", "CART_TTL": "1s"}, 200*time.Millisecond)
	// Under prod's reservation, by default: five archiver invocations at
	// once for its two mappings' eight shards.
	if got, want := sys.Poller.Reserved(wiring.Archiver), wiring.ProdReservedConcurrency()[wiring.Archiver]; got != want {
		t.Fatalf("the archiver's reserved concurrency: got %d, want prod's %d", got, want)
	}
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Whisk", 10)
	c.must(201, "POST", "/users", "u2", map[string]any{"email": "u2@example.com", "name": "U Two"}, nil)
	c.must(200, "PUT", "/users/u2/cart/"+pid, "u2", map[string]any{"quantity": 2}, nil)
	var order struct {
		OrderID string `json:"orderId"`
	}
	c.must(201, "POST", "/users/u2/orders", "u2", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 1}}}, &order)
	for _, status := range []string{"SHIPPED", "DELIVERED"} {
		c.must(200, "PATCH", "/users/u2/orders/"+order.OrderID, "admin", map[string]any{"status": status}, nil)
	}
	eventually(t, "order and cart archived", func() string {
		if n, m := len(archived(t, sys, "orders")), len(archived(t, sys, "carts")); n != 1 || m != 1 {
			return fmt.Sprintf("archived orders %d, carts %d; want 1 and 1", n, m)
		}
		return ""
	})
	o := archived(t, sys, "orders")[0]
	if o.Table != "orders" || o.Keys["orderId"] != order.OrderID || o.Item["status"] != "DELIVERED" || o.EventID == "" {
		t.Errorf("order line: got %+v", o)
	}
	if _, err := time.Parse(time.RFC3339, o.RemovedAt); err != nil {
		t.Errorf("removedAt %q: %v", o.RemovedAt, err)
	}
	cart := archived(t, sys, "carts")[0]
	if cart.Table != "carts" || cart.Keys["userId"] != "u2" {
		t.Errorf("cart line: got %+v", cart)
	}
	// Archiving changes no counter.
	eventually(t, "the counters after archiving", func() string {
		var u user
		c.must(200, "GET", "/users/u2", "u2", nil, &u)
		if u.OrderCount != 1 || u.LifetimeSpendCents != 500 {
			return fmt.Sprintf("got %+v, want 1 order, 500 cents", u)
		}
		return ""
	})
	c.must(404, "GET", "/users/u2/orders/"+order.OrderID, "u2", nil, nil)
}

// BenchmarkWriteToVisible measures how long a review takes to show in the
// product's counters through stream, counters and API (p50 and p99).
func BenchmarkWriteToVisible(b *testing.B) {
	sys, err := system.Start(context.Background(), system.Config{
		Stack:        endpoints.Config{DynamoDBUpstream: stacktest.Stack(b).Upstream(), TTLSweepInterval: -1},
		TablePrefix:  stacktest.OwnPrefix(b),
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	var mu sync.Mutex
	var lat []time.Duration
	tok := func(sub string) string {
		s, _ := apigw.Token([]byte(system.DefaultJWTSecret), sub, sub == "admin", time.Hour)
		return "Bearer " + s
	}
	do := func(method, path, sub string, body any) (int, []byte) {
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequest(method, sys.APIURL+path, rd)
		req.Header.Set("Content-Type", "application/json")
		if sub != "" {
			req.Header.Set("Authorization", tok(sub))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	_, raw := do("POST", "/products", "admin", map[string]any{"name": "Bench", "description": "d", "category": "bench", "priceCents": 100, "stock": 1})
	var p product
	json.Unmarshal(raw, &p)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub := fmt.Sprintf("bench-%d", i)
		do("POST", "/users", sub, map[string]any{"email": sub + "@example.com", "name": sub})
		start := time.Now()
		if code, raw := do("PUT", "/products/"+p.ProductID+"/reviews/"+sub, sub, map[string]any{"rating": 5, "title": "t", "body": "b"}); code != 201 {
			b.Fatalf("review: %d %s", code, raw)
		}
		for {
			_, raw := do("GET", "/products/"+p.ProductID, "", nil)
			var got product
			json.Unmarshal(raw, &got)
			if got.ReviewCount >= i+1 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		lat = append(lat, time.Since(start))
		mu.Unlock()
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Milliseconds()), "p99-ms")
}

// TestCountersExactThroughFaults places orders while DynamoDB throttles the
// counters' transactions for a while: batches fail, Lambda's retries (the
// mapping emulation) redeliver them, and the counters end exact.
func TestCountersExactThroughFaults(t *testing.T) {
	sys := start(t, nil, -1)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Grinder", 100)
	c.must(201, "POST", "/users", "u3", map[string]any{"email": "u3@example.com", "name": "U Three"}, nil)
	// Only the counters write to counter-events: the API's own writes go through.
	remove := sys.Front.InjectFault(ddbfront.Fault{Table: sys.Env["COUNTER_EVENTS_TABLE"], Operation: "TransactWriteItems",
		Code: "ProvisionedThroughputExceededException", Times: 12})
	defer remove()
	for i := 0; i < 5; i++ {
		c.must(201, "POST", "/users/u3/orders", "u3", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": 2}}}, nil)
	}
	eventually(t, "counters after the throttling passed", func() string {
		var u user
		var p product
		c.must(200, "GET", "/users/u3", "u3", nil, &u)
		c.must(200, "GET", "/products/"+pid, "", nil, &p)
		if u.OrderCount != 5 || u.LifetimeSpendCents != 5000 || p.UnitsSold != 10 {
			return fmt.Sprintf("got user %+v, units %d; want 5 orders, 5000 cents, 10 units", u, p.UnitsSold)
		}
		return ""
	})
	if left := sys.Front.ActiveFaults(); len(left) != 0 {
		t.Errorf("fault not used up: %+v; the drill proved nothing", left)
	}
	// Settle, then check nothing was counted twice by a late redelivery.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sys.Poller.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	var u user
	c.must(200, "GET", "/users/u3", "u3", nil, &u)
	if u.OrderCount != 5 || u.LifetimeSpendCents != 5000 {
		t.Errorf("after settling: got %+v", u)
	}
	if f := sys.Poller.Failures("orders-counters"); len(f) != 0 {
		t.Errorf("failure destination: got %+v, want nothing (the fault was shorter than the retries)", f)
	}
}

// TestOrderOfAnUnknownProductIsAConflict: an order naming a product id that
// no product has (never created, or deleted) is 409 conflict naming it, as
// a cart line whose product was deleted; an id that is not a ULID is a 400
// naming the field (docs/openapi.yaml, placeOrder).
func TestOrderOfAnUnknownProductIsAConflict(t *testing.T) {
	sys := start(t, nil, -1)
	c := client{t, sys.APIURL}
	c.must(201, "POST", "/users", "u1", map[string]any{"name": "U One"}, nil)
	c.must(400, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": "not-a-ulid", "quantity": 1}}}, nil)
	for _, unknown := range []string{"01HZZZZZZZZZZZZZZZZZZZZZZ0"} {
		var problem struct {
			Type     string   `json:"type"`
			Detail   string   `json:"detail"`
			Products []string `json:"products"`
		}
		c.must(409, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": unknown, "quantity": 1}}}, &problem)
		if problem.Type != "conflict" || len(problem.Products) != 1 || problem.Products[0] != unknown || !strings.Contains(problem.Detail, unknown) {
			t.Errorf("got %+v, want type conflict naming %s", problem, unknown)
		}
	}
}

// TestEveryProcessorExactUnderDuplicateDelivery: with every batch delivered
// twice (Lambda's at-least-once delivery at its most), the counters stay
// exact through orders, a cancel and a review replaced, and the index
// follows a rename.
func TestEveryProcessorExactUnderDuplicateDelivery(t *testing.T) {
	prefix := stacktest.OwnPrefix(t)
	sys, err := system.Start(context.Background(), system.Config{
		Stack: endpoints.Config{DynamoDBUpstream: stacktest.Stack(t).Upstream(), TTLSweepInterval: -1,
			SweepTables: func(name string) bool { return strings.HasPrefix(name, prefix) }},
		TablePrefix: prefix, PollInterval: 100 * time.Millisecond, DuplicateEvery: 1, Logger: testLogger(),
	})
	if err != nil {
		t.Fatalf("start system: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close system: %v", err)
		}
	})
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Twice Kettle", 50)
	c.must(201, "POST", "/users", "u9", map[string]any{"email": "u9@example.com", "name": "U Nine"}, nil)
	idle := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sys.Poller.Idle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var first struct {
		OrderID string `json:"orderId"`
	}
	// One write at a time, each its own batch, delivered twice.
	for i := 0; i < 6; i++ {
		var o struct {
			OrderID string `json:"orderId"`
		}
		c.must(201, "POST", "/users/u9/orders", "u9", map[string]any{"items": []map[string]any{{"productId": pid, "quantity": i + 1}}}, &o)
		if i == 0 {
			first = o
		}
		idle()
	}
	c.must(200, "POST", "/users/u9/orders/"+first.OrderID+"/cancel", "u9", nil, nil)
	idle()
	status := 201 // the first PUT creates the review, the others replace it
	for _, r := range []int{5, 3, 1, 2} {
		c.must(status, "PUT", "/products/"+pid+"/reviews/u9", "u9", map[string]any{"rating": r, "title": "Again", "body": "Said twice"}, nil)
		status = 200
		idle()
	}
	c.must(200, "PATCH", "/products/"+pid, "admin", map[string]any{"name": "Twice Teapot"}, nil)
	idle()

	var u user
	var p product
	c.must(200, "GET", "/users/u9", "u9", nil, &u)
	c.must(200, "GET", "/products/"+pid, "", nil, &p)
	// Orders of 1..6 units at 500 cents, the first (1 unit) cancelled.
	if u.OrderCount != 6 || u.LifetimeSpendCents != 20*500 || u.ReviewCount != 1 {
		t.Errorf("user: got %+v, want 6 orders, %d cents, 1 review", u, 20*500)
	}
	if p.UnitsSold != 20 || p.ReviewCount != 1 || p.RatingAverage == nil || *p.RatingAverage != 2 {
		t.Errorf("product: got units %d, reviews %d, average %v; want 20, 1, 2", p.UnitsSold, p.ReviewCount, p.RatingAverage)
	}
	var res struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	// Search shows the rename once the index has refreshed, within a second.
	eventually(t, "search teapot", func() string {
		c.must(200, "GET", "/search?q=teapot", "", nil, &res)
		if len(res.Items) != 1 || res.Items[0].Name != "Twice Teapot" {
			return fmt.Sprintf("got %+v, want [Twice Teapot]", res.Items)
		}
		return ""
	})
	// Every batch twice: at least one a write above (6 orders and a cancel,
	// 4 reviews, a rename; the counters' own product updates add more).
	for m, least := range map[string]int64{"orders-counters": 7, "reviews-counters": 4, "products-indexer": 2} {
		if got := sys.Poller.Duplicated(m); got < least {
			t.Errorf("%s delivered %d batches twice, want at least %d: the test proved less than it says", m, got, least)
		}
	}
	if f := sys.Poller.Failures("orders-counters"); len(f) != 0 {
		t.Errorf("failure destination: got %d objects, want none", len(f))
	}
}

// TestConcurrentRequestsRunInEnvironmentsOfTheirOwn: the API function runs
// as Lambda runs it, one request at a time an environment: requests at once
// start environments of their own, each with its own memory.
func TestConcurrentRequestsRunInEnvironmentsOfTheirOwn(t *testing.T) {
	sys := start(t, nil, -1)
	c := client{t, sys.APIURL}
	pid := setup(t, c, "Kettle", 10)
	before := sys.APIEnvironments()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 5 {
				// A new environment reads the page eventually
				// consistent: within the replicas' lag of the
				// product's creation it may be a 404, as on AWS.
				if code := c.call("GET", "/products/"+pid, "", nil, nil); code != 200 && code != 404 {
					t.Errorf("GET /products/%s: %d", pid, code)
				}
			}
		})
	}
	wg.Wait()
	if got := sys.APIEnvironments(); got < 2 || got <= before {
		t.Fatalf("16 clients at once ran in %d environments (%d before); want more than one", got, before)
	}
}
