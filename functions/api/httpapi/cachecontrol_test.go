package httpapi_test

import (
	"strings"
	"testing"
)

// TestAnswersBeforeARouteKeepItsCacheControl: a body too large or a path no
// route takes is answered before a route serves the request, and still
// carries the Cache-Control of the route API Gateway matched (its route
// key): a public GET's 4xx as its 2xx, a guarded route's no-store; with no
// route matched, no-store. Those answers carried none, which a CDN may keep
// by its own defaults.
func TestAnswersBeforeARouteKeepItsCacheControl(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := strings.Repeat("x", 64<<10+1)
	for _, tc := range []struct {
		method, path, routeKey string
		body                   any
		status                 int
		want                   string
	}{
		{"GET", "/products/%2e", "GET /products/{productId}", nil, 404, "public, max-age=5"},
		{"GET", "/users/%2e/cart", "GET /users/{userId}/cart", nil, 404, "no-store"},
		{"GET", "/products?category=kitchen", "GET /products", big, 413, "public, max-age=10"},
		{"GET", "/healthz", "GET /healthz", big, 413, "no-store"},
		{"POST", "/products", "POST /products", big, 413, "no-store"},
		{"GET", "/products/%2e", "$default", nil, 404, "no-store"},
	} {
		t.Run(tc.routeKey+" "+tc.path, func(t *testing.T) {
			ev := event(tc.method, tc.path, userCaller("u1"), tc.body)
			ev.RouteKey = tc.routeKey
			r := e.send(ev)
			want(t, r, tc.status)
			if cc := r.Headers["cache-control"]; cc != tc.want {
				t.Errorf("cache-control: got %q, want %q", cc, tc.want)
			}
		})
	}
}
