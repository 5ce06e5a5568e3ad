package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/releases"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/migrations"
	"github.com/shopstream/shopstream/shared/tables"
)

// buildRelease builds pkg of an earlier release from the repository's
// history (a missing commit fails the test: CI fetches the whole history).
func buildRelease(t testing.TB, r releases.Release, pkg string, tags ...string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := releases.Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := releases.Resolve(context.Background(), root, r.Commit)
	if err != nil {
		t.Fatalf("release %s: %v", r.Version, err)
	}
	cache, err := releases.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	bin, err := releases.Build(context.Background(), root, commit, pkg, cache, tags...)
	if err != nil {
		t.Fatalf("release %s: %v", r.Version, err)
	}
	t.Logf("release %s (%s): %s ready in %s", r.Version, r.Short(), pkg, time.Since(started).Round(time.Millisecond))
	return bin
}

// client talks to an API as its users do.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func newClient(t *testing.T, base string) *client {
	return &client{t: t, base: base, http: &http.Client{Timeout: 30 * time.Second}}
}

// call sends a request as sub ("admin" is an admin; "" sends no token) and
// returns the status and the body.
func (c *client) call(method, path, sub string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if sub != "" {
		tok, err := apigw.Token([]byte(system.DefaultJWTSecret), sub, sub == "admin", time.Hour)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// must sends a request that must answer status, and decodes the body.
func (c *client) must(status int, method, path, sub string, body any) map[string]any {
	c.t.Helper()
	got, raw, err := c.call(method, path, sub, body)
	if err != nil || got != status {
		c.t.Fatalf("%s %s as %s: got %d %s (%v), want %d", method, path, sub, got, raw, err, status)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return out
}

// shop is what the drills write through an API: products, users, orders
// (one cancelled), reviews and a cart.
type shop struct {
	products map[string]string // name → id
	stock    map[string]int64  // id → units written
	users    []string
}

// fill writes the shop's data through the API at c, as a new user would.
func fill(c *client) *shop {
	s := &shop{products: map[string]string{}, stock: map[string]int64{}}
	for i, units := range []int64{10, 20, 30} {
		name := []string{"Teapot", "Kettle", "Grinder"}[i]
		p := c.must(201, "POST", "/products", "admin", map[string]any{
			"name": name, "description": "A " + strings.ToLower(name), "category": "kitchen", "priceCents": 1000 + i, "stock": units,
		})
		id := p["productId"].(string)
		s.products[name], s.stock[id] = id, units
	}
	for _, u := range []string{"u1", "u2", "u3"} {
		c.must(201, "POST", "/users", u, map[string]any{"email": u + "@example.com", "name": strings.ToUpper(u)})
		s.users = append(s.users, u)
	}
	tea, kettle, grinder := s.products["Teapot"], s.products["Kettle"], s.products["Grinder"]
	c.must(201, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": tea, "quantity": 2}, {"productId": kettle, "quantity": 3}}})
	c.must(201, "POST", "/users/u2/orders", "u2", map[string]any{"items": []map[string]any{{"productId": grinder, "quantity": 4}}})
	o := c.must(201, "POST", "/users/u3/orders", "u3", map[string]any{"items": []map[string]any{{"productId": tea, "quantity": 1}}})
	c.must(200, "POST", "/users/u3/orders/"+o["orderId"].(string)+"/cancel", "u3", nil)
	c.must(201, "PUT", "/products/"+tea+"/reviews/u1", "u1", map[string]any{"rating": 5, "title": "Pours well", "body": "No drips."})
	c.must(201, "PUT", "/products/"+tea+"/reviews/u2", "u2", map[string]any{"rating": 3, "title": "Fine", "body": "Small."})
	c.must(200, "PUT", "/users/u3/cart/"+kettle, "u3", map[string]any{"quantity": 2})
	return s
}

// view is everything a client of the shop sees, by request.
func (s *shop) view(c *client) map[string]any {
	c.t.Helper()
	out := map[string]any{}
	get := func(path, sub string) {
		var v any
		status, raw, err := c.call("GET", path, sub, nil)
		if err != nil || status != 200 || json.Unmarshal(raw, &v) != nil {
			c.t.Fatalf("GET %s as %s: %d %s (%v)", path, sub, status, raw, err)
		}
		out[path+" as "+sub] = v
	}
	for name, id := range s.products {
		get("/products/"+id, "")
		get("/products/"+id+"/reviews", "")
		status, raw, err := c.call("GET", "/search?q="+name, "", nil)
		if err != nil || status != 200 {
			c.t.Fatalf("search %s: %d %s (%v)", name, status, raw, err)
		}
		out["search "+name] = searchIDs(c.t, raw)
	}
	get("/products?category=kitchen", "")
	for _, u := range s.users {
		get("/users/"+u, u)
		get("/users/"+u+"/orders", u)
		get("/users/"+u+"/reviews", u)
		get("/users/"+u+"/cart", u)
	}
	return out
}

// fillBulk writes n more products through the API, 8 at a time, and
// returns their ids and their units in all.
func fillBulk(c *client, n int) ([]string, int64) {
	ids := make([]string, n)
	var units int64
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				p := c.must(201, "POST", "/products", "admin", map[string]any{
					"name": "Spoon " + strconv.Itoa(i), "category": "cutlery", "priceCents": 300 + i, "stock": i % 9,
				})
				ids[i] = p["productId"].(string)
			}
		})
	}
	for i := range n {
		work <- i
		units += int64(i % 9)
	}
	close(work)
	wg.Wait()
	return ids, units
}

// stockOf is the units the products hold in all, as the API shows them.
func stockOf(c *client, ids []string) int64 {
	var n int64
	for _, id := range ids {
		n += int64(c.must(200, "GET", "/products/"+id, "", nil)["stock"].(float64))
	}
	return n
}

func searchIDs(t *testing.T, raw []byte) []string {
	t.Helper()
	var res struct {
		Items []struct {
			ProductID string `json:"productId"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("search answer %s: %v", raw, err)
	}
	var ids []string
	for _, it := range res.Items {
		ids = append(ids, it.ProductID)
	}
	sort.Strings(ids)
	return ids
}

// settled reads the view until it holds still for two seconds (the stream
// processors have caught up), at most a minute.
func (s *shop) settled(c *client) map[string]any {
	c.t.Helper()
	last, since := s.view(c), time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(400 * time.Millisecond)
		v := s.view(c)
		if !reflect.DeepEqual(v, last) {
			last, since = v, time.Now()
			continue
		}
		if time.Since(since) >= 2*time.Second {
			return v
		}
	}
	c.t.Fatal("the view kept changing for a minute")
	return nil
}

// seen reports where got differs from what a client saw in was: every
// field was held keeps its value (got may add fields).
func seen(was, got any, at string) []string {
	switch w := was.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: was an object, now %v", at, got)}
		}
		var diffs []string
		for k, v := range w {
			if k == "next" {
				continue // a cursor, opaque
			}
			diffs = append(diffs, seen(v, g[k], at+"."+k)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: was %d items, now %v", at, len(w), got)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, seen(w[i], g[i], at+"["+strconv.Itoa(i)+"]")...)
		}
		return diffs
	}
	if !reflect.DeepEqual(was, got) {
		return []string{fmt.Sprintf("%s: was %v, now %v", at, was, got)}
	}
	return nil
}

func sameAsSeen(t *testing.T, what string, was, got map[string]any) {
	t.Helper()
	var diffs []string
	for k, v := range was {
		diffs = append(diffs, seen(v, got[k], k)...)
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Errorf("%s: %s", what, d)
	}
}

// startCurrent runs this tree's system on dataDir (in memory when "").
func startCurrent(t *testing.T, dataDir string, canary *system.Canary) *system.System {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("STACK_DEBUG") != "" {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	sys, err := system.Start(context.Background(), system.Config{
		Stack:     endpoints.Config{DataDir: dataDir, TTLSweepInterval: time.Second, Logger: logger},
		APICanary: canary, Logger: logger,
	})
	if err != nil {
		t.Fatalf("start this release: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return sys
}

// auditClean runs `make audit` on sys and fails on any drift.
func auditClean(t *testing.T, sys *system.System) {
	t.Helper()
	idle(t, sys)
	a := audit.New(audit.Config{
		DB: sys.DynamoDB(), S3: sys.S3(), Bucket: envcontract.LocalArchiveBucket, FailureBucket: sys.FailureBucket, Settle: 3 * time.Second,
		Tables: tables.WithPrefix(""),
	})
	rep, err := a.Run(context.Background())
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if rep.ExitCode() != 0 {
		var b strings.Builder
		rep.Write(&b)
		t.Fatalf("audit is not clean:\n%s", b.String())
	}
}

// idle waits until this release's stream functions have handled every
// record written so far, however loaded the machine.
func idle(t *testing.T, sys *system.System) {
	t.Helper()
	if sys.Poller == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sys.Poller.Idle(ctx); err != nil {
		t.Fatalf("waiting for the stream functions: %v", err)
	}
}

// TestUpgradeFromEachRelease is the upgrade drill: each supported earlier
// release, built from its commit, runs its own stack on a DATA_DIR and
// writes through its own API; then this release starts on the same
// DATA_DIR, says which migrations it needs, serves everything a client saw
// unchanged, migrates, serves it unchanged again, sells every remaining unit
// exactly, finds every product by search, and audits clean.
func TestUpgradeFromEachRelease(t *testing.T) {
	// Two releases at a time: a drill waits on its stacks (starting, the
	// pipeline settling) more than it computes, and the list grows by a
	// release a landing.
	slots := make(chan struct{}, 2)
	for _, r := range releases.Supported() {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			bin := buildRelease(t, r, "./infra/local")
			dataDir := t.TempDir()
			env := []string{
				"DATA_DIR=" + dataDir,
				"DYNAMODB_PORT=" + strconv.Itoa(freePort(t)), "S3_PORT=" + strconv.Itoa(freePort(t)),
				"SEARCH_PORT=" + strconv.Itoa(freePort(t)), "API_PORT=" + strconv.Itoa(freePort(t)),
				"OTLP_PORT=" + strconv.Itoa(freePort(t)), "TTL_SWEEP_INTERVAL=1s", "LOG_LEVEL=INFO",
			}
			old := startBinary(t, bin, env)
			c := newClient(t, old.apiURL)
			s := fill(c)
			// Enough products for the migration to page through (0.1.0's
			// shape); the releases with nothing to migrate need a few.
			n := 20
			if r.Version == "0.1.0" {
				n = 200
			}
			bulk, bulkUnits := fillBulk(c, n)
			before := s.settled(c)
			if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := old.cmd.Wait(); err != nil {
				t.Fatalf("release %s did not stop cleanly: %v", r.Version, err)
			}

			sys := startCurrent(t, dataDir, nil)
			legacy := r.Version == "0.1.0"
			if want := legacy; (len(sys.Pending) > 0) != want {
				t.Errorf("pending migrations at start: %v (want some: %v)", sys.Pending, want)
			}
			c = newClient(t, sys.APIURL)
			if got := stockOf(c, bulk); got != bulkUnits {
				t.Errorf("the %d products in bulk hold %d units under this release before the migration, want %d", len(bulk), got, bulkUnits)
			}
			idle(t, sys)
			upgraded := s.settled(c)
			sameAsSeen(t, "before the migration", before, upgraded)

			started := time.Now()
			rep, err := migrations.Run(context.Background(), migrations.Config{DB: sys.DynamoDB(), Tables: tables.WithPrefix("").Map()})
			elapsed := time.Since(started)
			if err != nil || rep.Left() != 0 {
				t.Fatalf("migrate: %+v, %v", rep, err)
			}
			wantChanged := int64(0)
			if legacy {
				wantChanged = int64(len(s.products) + len(bulk))
			}
			if rep.Changed() != wantChanged {
				t.Errorf("migrate changed %d items, want %d", rep.Changed(), wantChanged)
			}
			m := rep.Migrations[0]
			t.Logf("release %s → this: %d items scanned, %d migrated in %s (%.0f items/s)", r.Version, m.ThisRun, rep.Changed(), elapsed.Round(time.Millisecond), float64(m.ThisRun)/elapsed.Seconds())
			again, err := migrations.Run(context.Background(), migrations.Config{DB: sys.DynamoDB(), Tables: tables.WithPrefix("").Map()})
			if err != nil || again.Changed() != 0 || !again.Migrations[0].AlreadyDone {
				t.Errorf("a second migrate: %+v, %v; want nothing done", again, err)
			}
			if got := stockOf(c, bulk); got != bulkUnits {
				t.Errorf("the %d products in bulk hold %d units after the migration, want %d", len(bulk), got, bulkUnits)
			}
			idle(t, sys)
			migrated := s.settled(c)
			if !reflect.DeepEqual(migrated, upgraded) {
				sameAsSeen(t, "across the migration", upgraded, migrated)
				sameAsSeen(t, "across the migration (reverse)", migrated, upgraded)
			}

			// Sales go on exactly: every remaining unit sells, not one more.
			for name, id := range s.products {
				p := c.must(200, "GET", "/products/"+id, "", nil)
				left := int64(p["stock"].(float64))
				c.must(201, "POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": id, "quantity": left}}})
				if status, raw, _ := c.call("POST", "/users/u1/orders", "u1", map[string]any{"items": []map[string]any{{"productId": id, "quantity": 1}}}); status != 409 {
					t.Errorf("%s: one more than its stock: got %d %s, want 409", name, status, raw)
				}
				time.Sleep(pageLag) // the page reads the stock eventually consistent, and repeats itself
				if p := c.must(200, "GET", "/products/"+id, "", nil); p["stock"].(float64) != 0 {
					t.Errorf("%s: stock %v after selling the rest, want 0", name, p["stock"])
				}
			}
			idle(t, sys)
			final := s.settled(c)
			for name := range s.products {
				if ids := final["search "+name].([]string); len(ids) == 0 || !contains(ids, s.products[name]) {
					t.Errorf("search %q: got %v, want %s among them", name, ids, s.products[name])
				}
			}
			auditClean(t, sys)
		})
	}
}

// pageLag is how long a change of a product may take to show on its page
// through the whole stack: an eventually consistent read's lag, then the
// window in which an API instance repeats a page it read (store.DefaultPageRepeat).
const pageLag = ddbfront.DefaultStaleReads + store.DefaultPageRepeat + 30*time.Millisecond

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// countingAPI counts the orders one side of the routing placed.
type countingAPI struct {
	apigw.Invoker
	placed *atomic.Int64
}

// TestCanaryAndRollback is the canary drill: the previous release's API
// function (built from its commit, in its own Lambda environments) and this
// release's serve one stack at once under an order load, 10 % of requests
// on this release as the CodeDeploy canary sends, then every request goes
// back to the previous release (a rollback) while the load goes on: no
// request answers 5xx, no unit is sold twice or lost, and the counters
// audit clean.
func TestCanaryAndRollback(t *testing.T) {
	prev := releases.Previous()
	bin := buildRelease(t, prev, "./functions/api", "lambda.norpc")
	logs := &syncBuffer{}
	sys := startCurrent(t, "", &system.Canary{Bootstrap: bin, Percent: 100, Environments: 8, Output: logs, Build: prev.Commit})
	route := sys.APIRouting
	var ordersThis, ordersPrev atomic.Int64
	route.Primary = countingAPI{route.Primary, &ordersThis}
	route.Additional = countingAPI{route.Additional, &ordersPrev}
	c := newClient(t, sys.APIURL)

	// The stage as the previous release left it: products (two of them
	// over 4 buckets) and buyers, written through its API.
	const products, units, buyers = 6, 60, 12
	var ids []string
	for i := range products {
		body := map[string]any{"name": "Lamp " + strconv.Itoa(i), "category": "lighting", "priceCents": 2500, "stock": units}
		if i < 2 {
			body["stockBuckets"] = 4
		}
		ids = append(ids, c.must(201, "POST", "/products", "admin", body)["productId"].(string))
	}
	var users []string
	for i := range buyers {
		u := "buyer" + strconv.Itoa(i)
		c.must(201, "POST", "/users", u, map[string]any{"email": u + "@example.com", "name": u})
		users = append(users, u)
	}
	// Each request line of the canary's says which build served it (the
	// lines reach the output through pipes, a moment after the answers).
	tagged := 0
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		tagged = 0
		for l := range strings.SplitSeq(logs.String(), "\n") {
			var line struct {
				Message, FunctionVersion, Build string
			}
			if json.Unmarshal([]byte(l), &line) != nil || line.Message != "request" {
				continue
			}
			if line.FunctionVersion != "canary" || line.Build != prev.Commit {
				t.Fatalf("a request line of the canary: %s; want functionVersion canary and build %s", l, prev.Commit)
			}
			tagged++
		}
		if tagged >= products+buyers || time.Now().After(deadline) {
			break
		}
	}
	if tagged < products+buyers {
		t.Fatalf("the canary served %d requests, logged %d request lines:\n%.3000s", products+buyers, tagged, logs.String())
	}

	type result struct {
		placed    map[string]int64 // product → units in placed orders
		cancelled map[string]int64
		statuses  map[int]int
	}
	var mu sync.Mutex
	total := result{placed: map[string]int64{}, cancelled: map[string]int64{}, statuses: map[int]int{}}
	load := func(d time.Duration) {
		var wg sync.WaitGroup
		stop := time.Now().Add(d)
		for _, u := range users {
			wg.Go(func() {
				var mine []map[string]any
				for time.Now().Before(stop) {
					if len(mine) > 0 && rand.IntN(8) == 0 {
						o := mine[len(mine)-1]
						mine = mine[:len(mine)-1]
						status, raw, err := c.call("POST", "/users/"+u+"/orders/"+o["orderId"].(string)+"/cancel", u, nil)
						mu.Lock()
						total.statuses[status]++
						if err == nil && status == 200 {
							for _, l := range o["lines"].([]any) {
								line := l.(map[string]any)
								total.cancelled[line["productId"].(string)] += int64(line["quantity"].(float64))
							}
						} else if status != 409 {
							t.Errorf("cancel: %d %s (%v)", status, raw, err)
						}
						mu.Unlock()
						continue
					}
					id, q := ids[rand.IntN(len(ids))], 1+rand.IntN(3)
					status, raw, err := c.call("POST", "/users/"+u+"/orders", u, map[string]any{"items": []map[string]any{{"productId": id, "quantity": q}}})
					mu.Lock()
					total.statuses[status]++
					switch {
					case err != nil:
						t.Errorf("order: %v", err)
					case status == 201:
						var o map[string]any
						if json.Unmarshal(raw, &o) == nil {
							mine = append(mine, o)
						}
						total.placed[id] += int64(q)
					case status != 409:
						t.Errorf("order: %d %s", status, raw)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	this0, prev0 := route.Served()
	route.SetPercent(90) // 10 % on this release
	load(6 * time.Second)
	this1, prev1 := route.Served()
	ordersThisCanary, ordersPrevCanary := ordersThis.Load(), ordersPrev.Load()
	route.SetPercent(100) // rollback: every request on the previous release
	load(4 * time.Second)
	this2, prev2 := route.Served()
	thisDuringCanary, prevDuringCanary := this1-this0, prev1-prev0

	var fives int
	for status, n := range total.statuses {
		if status >= 500 {
			fives += n
		}
	}
	if fives > 0 {
		t.Errorf("%d requests answered 5xx: %v", fives, total.statuses)
	}
	var oversold int64
	time.Sleep(pageLag) // the page reads the stock eventually consistent, and repeats itself
	for _, id := range ids {
		p := c.must(200, "GET", "/products/"+id, "", nil)
		left := int64(p["stock"].(float64))
		sold := total.placed[id] - total.cancelled[id]
		if left < 0 || sold+left != units {
			t.Errorf("product %s: %d sold (%d placed, %d cancelled) and %d left, want %d in all", id, sold, total.placed[id], total.cancelled[id], left, units)
		}
		if sold > units {
			oversold += sold - units
		}
	}
	t.Logf("canary: %d requests (%d orders placed) on this release and %d (%d orders) on release %s, %.1f %% of requests on this; "+
		"after the rollback: %d requests (%d orders) on %s, %d on this; statuses %v; oversold %d; 5xx %d",
		thisDuringCanary, ordersThisCanary, prevDuringCanary, ordersPrevCanary, prev.Version, 100*float64(thisDuringCanary)/float64(max(thisDuringCanary+prevDuringCanary, 1)),
		prev2-prev1, ordersPrev.Load()-ordersPrevCanary, prev.Version, this2-this1, total.statuses, oversold, fives)
	if ordersThisCanary == 0 || ordersPrevCanary == 0 {
		t.Errorf("the canary placed %d orders on this release and %d on the previous one: want both", ordersThisCanary, ordersPrevCanary)
	}
	if this2 != this1 {
		t.Errorf("this release served %d requests after the rollback", this2-this1)
	}
	auditClean(t, sys)
}

// Handle counts the orders placed through this side.
func (a countingAPI) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	resp, err := a.Invoker.Handle(ctx, req)
	if err == nil && resp.StatusCode == 201 && req.RequestContext.HTTP.Method == "POST" && strings.HasSuffix(req.RawPath, "/orders") {
		a.placed.Add(1)
	}
	return resp, err
}
