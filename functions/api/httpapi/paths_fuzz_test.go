package httpapi_test

import (
	"strings"
	"testing"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/productsearch"
)

// FuzzRequestPaths sends arbitrary paths and query strings, with every method
// the API routes and as anonymous, a user and an admin, through the handler
// on the local stack: whatever comes in, the answer is never a 5xx (no
// request gets a 5xx for its shape, docs/contract.md#2-http-api), and every error is
// problem+json. The seed corpus is in testdata/fuzz/FuzzRequestPaths and runs
// with every plain `go test`.
func FuzzRequestPaths(f *testing.F) {
	e := newEnv(f)
	e.h = httpapi.New(httpapi.Deps{
		Store: e.st, Cursors: cursor.NewSigner([]byte(testSecret)), Metrics: e.metrics,
		Search: &productsearch.Client{URL: stacktest.Stack(f).SearchURL, Index: strings.TrimSuffix(e.prefix, "-") + "-products"},
	})
	e.mustUser("fz")
	p := e.mustProduct("Fuzz", "fuzz", 100, 1000)
	o := e.mustOrder("fz", p, 1)

	f.Add(byte(0), byte(0), "/products/"+p, "")
	f.Add(byte(0), byte(2), "/users/fz/orders/"+o, "")
	f.Add(byte(0), byte(1), "/users/fz/orders", "status=PLACED&limit=1")
	f.Add(byte(0), byte(0), "/products", "category=fuzz&limit=1&cursor=x.y")
	f.Add(byte(0), byte(0), "/search", "q=fuzz&category=%ff")
	f.Add(byte(3), byte(2), "/products/"+strings.Repeat("A", 3000), "")
	f.Add(byte(0), byte(2), "/users/"+strings.Repeat("u", 200)+"/reviews", "")
	f.Add(byte(4), byte(1), "/users/fz/orders/../orders/"+o+"/cancel", "")
	f.Add(byte(2), byte(1), "/users/fz/cart/"+p, "")
	f.Add(byte(0), byte(2), "/orders", "status=SHIPPED&limit=100")
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	callers := []caller{anonymous, userCaller("fz"), adminCaller("fz-admin")}
	f.Fuzz(func(t *testing.T, m, c byte, path, query string) {
		if len(path) > 8<<10 || len(query) > 8<<10 {
			return // API Gateway refuses request lines this long
		}
		fe := *e
		fe.t = t
		method := methods[int(m)%len(methods)]
		ev := event(method, path, callers[int(c)%len(callers)], nil)
		ev.RawQueryString = query
		r := fe.send(ev)
		if r.StatusCode >= 500 {
			t.Fatalf("%s %q ? %q: got %d, want no 5xx: %s", method, path, query, r.StatusCode, r.Body)
		}
	})
}
