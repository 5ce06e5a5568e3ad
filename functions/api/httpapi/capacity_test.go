package httpapi_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/infra/local/samples"
	"github.com/shopstream/shopstream/shared/cursor"
)

// Seed 003's on-demand prices and month.
const (
	pricePerMillionRRU = 0.125
	pricePerMillionWRU = 0.625
	secondsPerMonth    = 2_592_000
)

// averageRPS is the model's average load per route (docs/data-model.md,
// access patterns): 1 M registered users, 100 k daily actives, 20 k orders a
// day. The cost table multiplies these by the measured units.
var averageRPS = map[string]float64{
	"GET /healthz":                                  1,
	"POST /users":                                   0.5,
	"GET /users/{userId}":                           20,
	"PATCH /users/{userId}":                         0.5,
	"POST /products":                                0.1,
	"GET /products":                                 50,
	"GET /products/{productId}":                     200,
	"PATCH /products/{productId}":                   0.5,
	"DELETE /products/{productId}":                  0.05,
	"GET /search":                                   80,
	"PUT /products/{productId}/reviews/{userId}":    1,
	"GET /products/{productId}/reviews":             60,
	"DELETE /products/{productId}/reviews/{userId}": 0.05,
	"GET /users/{userId}/reviews":                   2,
	"PUT /users/{userId}/cart/{productId}":          20,
	"GET /users/{userId}/cart":                      30,
	"POST /users/{userId}/orders":                   0.25,
	"GET /users/{userId}/orders":                    10,
	"GET /users/{userId}/orders/{orderId}":          10,
	"POST /users/{userId}/orders/{orderId}/cancel":  0.01,
	"PATCH /users/{userId}/orders/{orderId}":        0.5,
	"GET /orders":                                   1,
}

// TestCapacityTable measures the DynamoDB calls and capacity units of one
// typical request per route and checks that the cost table in
// docs/data-model.md is the one these measurements give; -update rewrites it.
// The units are AWS's, counted from the items each call reads and writes
// (capacity.Meter): DynamoDB Local's ReturnConsumedCapacity charges a
// transaction once per table, whatever its items, so its figure is shown
// beside them. For every other call Local follows the rules, and the test
// checks that the two agree.
func TestCapacityTable(t *testing.T) {
	t.Parallel()
	// Sequential ids make the measurement repeatable: the open-orders shards,
	// and so the units of a merged page, depend on the ids.
	var seq atomic.Int64
	var cfg store.Config
	e := newEnvWith(t, func(c *store.Config) {
		c.NewID = func() string { return fmt.Sprintf("01J%023d", seq.Add(1)) }
		cfg = *c
	})
	// The same handler, its store on a meter.
	meter := capacity.NewMeter(e.db, e.prefix)
	e.st = store.New(meter, cfg)
	e.h = httpapi.New(httpapi.Deps{
		Store: e.st, Cursors: cursor.NewSigner([]byte(testSecret)), Metrics: e.metrics,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	admin := adminCaller("root")
	desc := strings.Repeat("A sturdy everyday thing. ", 12) // ~300 bytes, a typical description
	var products []string
	for i := range 25 {
		r := e.do("POST", "/products", admin, map[string]any{"name": fmt.Sprintf("Item %02d", i), "description": desc, "category": "home", "priceCents": 1999, "stock": 1000})
		want(t, r, 201)
		products = append(products, r.str("productId"))
	}
	p := products[0]
	for i := range 21 {
		u := fmt.Sprintf("shopper%02d", i)
		e.mustUser(u)
		want(t, e.do("PUT", "/products/"+p+"/reviews/"+u, userCaller(u), map[string]any{"rating": 4, "title": "Nice", "body": desc}), 201)
	}
	u := "shopper00"
	me := userCaller(u)
	for i := range 21 {
		e.mustOrder(u, products[i%5], 1, products[5+i%5], 2)
	}
	want(t, e.do("PUT", "/users/"+u+"/cart/"+products[1], me, map[string]any{"quantity": 1}), 200)
	want(t, e.do("PUT", "/users/"+u+"/cart/"+products[2], me, map[string]any{"quantity": 2}), 200)
	order := e.mustOrder(u, products[3], 1, products[4], 1)
	doomed := e.mustOrder(u, products[3], 1, products[4], 1)

	// Past the time an instance reads what it wrote or sold itself strongly
	// consistent: the table prices each route as any caller meets it, and
	// the setup's own writes and orders would make its pages' reads
	// strongly consistent for a second, or not, as the machine's speed
	// decides.
	time.Sleep(store.OwnReads)

	requests := map[string]struct {
		method, target string
		who            caller
		body           any
		status         int
	}{
		"GET /healthz":                                  {"GET", "/healthz", anonymous, nil, 200},
		"POST /users":                                   {"POST", "/users", userCaller("newbie"), map[string]any{"email": "newbie@example.com", "name": "Newbie"}, 201},
		"GET /users/{userId}":                           {"GET", "/users/" + u, me, nil, 200},
		"PATCH /users/{userId}":                         {"PATCH", "/users/" + u, me, map[string]any{"name": "Shopper Zero"}, 200},
		"POST /products":                                {"POST", "/products", admin, map[string]any{"name": "New", "description": desc, "category": "home", "priceCents": 100, "stock": 5}, 201},
		"GET /products":                                 {"GET", "/products?category=home", anonymous, nil, 200},
		"GET /products/{productId}":                     {"GET", "/products/" + p, anonymous, nil, 200},
		"PATCH /products/{productId}":                   {"PATCH", "/products/" + products[20], admin, map[string]any{"priceCents": 2099}, 200},
		"DELETE /products/{productId}":                  {"DELETE", "/products/" + products[24], admin, nil, 204},
		"GET /search":                                   {"GET", "/search?q=item", anonymous, nil, 503},
		"PUT /products/{productId}/reviews/{userId}":    {"PUT", "/products/" + products[1] + "/reviews/" + u, me, map[string]any{"rating": 5, "title": "Great", "body": desc}, 201},
		"GET /products/{productId}/reviews":             {"GET", "/products/" + p + "/reviews", anonymous, nil, 200},
		"DELETE /products/{productId}/reviews/{userId}": {"DELETE", "/products/" + p + "/reviews/shopper20", userCaller("shopper20"), nil, 204},
		"GET /users/{userId}/reviews":                   {"GET", "/users/" + u + "/reviews", me, nil, 200},
		"PUT /users/{userId}/cart/{productId}":          {"PUT", "/users/" + u + "/cart/" + products[3], me, map[string]any{"quantity": 1}, 200},
		"GET /users/{userId}/cart":                      {"GET", "/users/" + u + "/cart", me, nil, 200},
		"POST /users/{userId}/orders":                   {"POST", "/users/" + u + "/orders", me, map[string]any{"items": []any{map[string]any{"productId": products[6], "quantity": 1}, map[string]any{"productId": products[7], "quantity": 1}}}, 201},
		"GET /users/{userId}/orders":                    {"GET", "/users/" + u + "/orders", me, nil, 200},
		"GET /users/{userId}/orders/{orderId}":          {"GET", "/users/" + u + "/orders/" + order, me, nil, 200},
		"POST /users/{userId}/orders/{orderId}/cancel":  {"POST", "/users/" + u + "/orders/" + doomed + "/cancel", me, nil, 200},
		"PATCH /users/{userId}/orders/{orderId}":        {"PATCH", "/users/" + u + "/orders/" + order, admin, map[string]any{"status": "SHIPPED"}, 200},
		"GET /orders":                                   {"GET", "/orders?status=PLACED", admin, nil, 200},
	}

	var b strings.Builder
	b.WriteString("| route | avg RPS | DynamoDB calls | RRU / request | WRU / request | WRU as DynamoDB Local reports | $ reads / month | $ writes / month | $ / month |\n")
	b.WriteString("|:--|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var totalR, totalW float64
	for _, rt := range httpapi.Routes() {
		s, ok := requests[rt.Pattern]
		if !ok {
			t.Fatalf("route %s has no capacity sample", rt.Pattern)
		}
		rps, ok := averageRPS[rt.Pattern]
		if !ok {
			t.Fatalf("route %s has no RPS estimate", rt.Pattern)
		}
		mark, calls := len(e.metrics.String()), len(meter.Calls())
		r := e.do(s.method, s.target, s.who, s.body)
		want(t, r, s.status)
		measured := meter.Calls()[calls:]
		for _, c := range measured {
			switch {
			case c.Failed:
				t.Errorf("%s: a %s failed: the table prices requests that succeed at once", rt.Pattern, c.Op)
			case !c.Transactional() && (c.Read != c.ReportedRead || c.Write != c.ReportedWrite):
				t.Errorf("%s: %s by item sizes %g RRU %g WRU, DynamoDB Local reports %g RRU %g WRU: the size rules are off", rt.Pattern, c.Op, c.Read, c.Write, c.ReportedRead, c.ReportedWrite)
			}
		}
		use := capacity.Sum(measured)
		// The API's own metrics carry what DynamoDB reported.
		var rec struct {
			Calls int     `json:"dynamodbCalls"`
			Read  float64 `json:"readUnits"`
			Write float64 `json:"writeUnits"`
		}
		line := strings.TrimSpace(e.metrics.String()[mark:])
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s: metrics line %q: %v", rt.Pattern, line, err)
		}
		if rec.Calls != len(measured) || rec.Read != use.ReportedRead || rec.Write != use.ReportedWrite {
			t.Errorf("%s: the API's metrics say %d calls, %g RRU, %g WRU; the meter saw %d calls reported as %g RRU, %g WRU",
				rt.Pattern, rec.Calls, rec.Read, rec.Write, len(measured), use.ReportedRead, use.ReportedWrite)
		}
		costR := rps * use.Read * secondsPerMonth * pricePerMillionRRU / 1e6
		costW := rps * use.Write * secondsPerMonth * pricePerMillionWRU / 1e6
		totalR, totalW = totalR+costR, totalW+costW
		fmt.Fprintf(&b, "| `%s` | %g | %d | %g | %g | %g | %.2f | %.2f | %.2f |\n", rt.Pattern, rps, len(measured), use.Read, use.Write, use.ReportedWrite, costR, costW, costR+costW)
	}
	fmt.Fprintf(&b, "| **total** | | | | | | **%.2f** | **%.2f** | **%.2f** |\n", totalR, totalW, totalR+totalW)
	table := b.String()

	const path = "../../../docs/data-model.md"
	const begin, end = "<!-- capacity:begin -->\n", "<!-- capacity:end -->"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := strings.Index(string(doc), begin), strings.Index(string(doc), end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the capacity markers", path)
	}
	current := string(doc)[i+len(begin) : j]
	if samples.Updating() {
		out := string(doc)[:i+len(begin)] + table + string(doc)[j:]
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if current != table {
		t.Errorf("the cost table of %s is not the measured one (run go test -run TestCapacityTable -update):\ngot:\n%s\nwant:\n%s", path, current, table)
	}
}
