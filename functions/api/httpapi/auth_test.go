package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/shared/ulid"
)

// TestAuthorizationMatrix sends every route as anonymous, the owner (amy),
// another user (bo) and an admin, and checks who gets in: 401 without a
// token, 403 for the wrong user or a non-admin, anything else otherwise.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("amy")
	e.mustUser("bo")
	p := e.mustProduct("Globe", "decor", 4000, 100)
	o := e.mustOrder("amy", p, 1)
	want(t, e.do("PUT", "/products/"+p+"/reviews/amy", userCaller("amy"), map[string]any{"rating": 5, "title": "Round"}), 201)

	// absent is an id of the right shape that nothing has: the requests
	// need not succeed, only be asked who may make them (an impossible id
	// is a 404 to every caller with a token: TestIDsNoResourceCanHave).
	absent := ulid.New(nil).Make()
	type sample struct {
		target string
		body   any
	}
	samples := map[string]sample{
		"GET /healthz":                                  {"/healthz", nil},
		"POST /users":                                   {"/users", map[string]any{"name": "New"}},
		"GET /users/{userId}":                           {"/users/amy", nil},
		"PATCH /users/{userId}":                         {"/users/amy", map[string]any{"name": "Amy"}},
		"POST /products":                                {"/products", map[string]any{"name": "N", "category": "c", "priceCents": 1, "stock": 1}},
		"GET /products":                                 {"/products?category=decor", nil},
		"GET /products/{productId}":                     {"/products/" + p, nil},
		"PATCH /products/{productId}":                   {"/products/" + p, map[string]any{"stock": 100}},
		"DELETE /products/{productId}":                  {"/products/" + absent, nil},
		"GET /search":                                   {"/search?q=globe", nil},
		"PUT /products/{productId}/reviews/{userId}":    {"/products/" + p + "/reviews/amy", map[string]any{"rating": 4, "title": "Fine"}},
		"GET /products/{productId}/reviews":             {"/products/" + p + "/reviews", nil},
		"DELETE /products/{productId}/reviews/{userId}": {"/products/" + absent + "/reviews/amy", nil},
		"GET /users/{userId}/reviews":                   {"/users/amy/reviews", nil},
		"PUT /users/{userId}/cart/{productId}":          {"/users/amy/cart/" + p, map[string]any{"quantity": 1}},
		"GET /users/{userId}/cart":                      {"/users/amy/cart", nil},
		"POST /users/{userId}/orders":                   {"/users/amy/orders", map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 1}}}},
		"GET /users/{userId}/orders":                    {"/users/amy/orders", nil},
		"GET /users/{userId}/orders/{orderId}":          {"/users/amy/orders/" + o, nil},
		"POST /users/{userId}/orders/{orderId}/cancel":  {"/users/amy/orders/" + absent + "/cancel", nil},
		"PATCH /users/{userId}/orders/{orderId}":        {"/users/amy/orders/" + absent, map[string]any{"status": "SHIPPED"}},
		"GET /orders":                                   {"/orders?status=PLACED", nil},
	}
	callers := []struct {
		name string
		who  caller
	}{
		{"anonymous", anonymous}, {"other user", userCaller("bo")}, {"owner", userCaller("amy")}, {"admin", adminCaller("root")},
	}
	for _, rt := range httpapi.Routes() {
		s, ok := samples[rt.Pattern]
		if !ok {
			t.Errorf("route %s has no sample request", rt.Pattern)
			continue
		}
		method, _, _ := strings.Cut(rt.Pattern, " ")
		for _, c := range callers {
			t.Run(fmt.Sprintf("%s as %s", rt.Pattern, c.name), func(t *testing.T) {
				r := e.do(method, s.target, c.who, s.body)
				var wantStatus int
				switch {
				case rt.Access == httpapi.Public:
				case c.who.sub == "":
					wantStatus = 401
				case rt.Access == httpapi.Admin && c.name != "admin":
					wantStatus = 403
				case rt.Access == httpapi.Owner && c.name == "other user":
					wantStatus = 403
				}
				switch {
				case wantStatus != 0 && r.StatusCode != wantStatus:
					t.Errorf("got %d, want %d: %s", r.StatusCode, wantStatus, r.Body)
				case wantStatus == 0 && slices.Contains([]int{401, 403}, r.StatusCode):
					t.Errorf("got %d, want access: %s", r.StatusCode, r.Body)
				}
			})
		}
	}
}

// TestGroupsClaim: a caller is admin when one of its groups is exactly
// "admin", read from a JSON array or API Gateway's "[a b]" text; group names
// are never split on commas or stripped of quotes.
func TestGroupsClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		claim string
		want  []string
	}{
		{"", nil},
		{"admin", []string{"admin"}},
		{"[admin]", []string{"admin"}},
		{"[admin users]", []string{"admin", "users"}},
		{`["admin","users"]`, []string{"admin", "users"}},
		{"[administrators]", []string{"administrators"}},
		{"[support,admin]", []string{"support,admin"}},
		{`["support,admin"]`, []string{"support,admin"}},
		{"support,admin", []string{"support,admin"}},
		{"[ 'admin' ]", []string{"'admin'"}},
		{`['admin']`, []string{"'admin'"}},
		{`"admin"`, []string{`"admin"`}},
		{`[ "admin" ]`, []string{"admin"}},
		{"users admin", []string{"users admin"}},
	} {
		if got := httpapi.Groups(tc.claim); !slices.Equal(got, tc.want) {
			t.Errorf("Groups(%q): got %q, want %q", tc.claim, got, tc.want)
		}
	}
	// Only the exact group "admin" makes an admin.
	e := newEnv(t)
	for _, groups := range []string{
		"[administrators]", "users", `["user","admins"]`, "[support,admin]", `["support,admin"]`,
		"support,admin", "['admin']", `"admin"`, "users admin", "[Admin]",
	} {
		r := e.do("GET", "/orders?status=PLACED", caller{sub: "x", groups: groups}, nil)
		want(t, r, 403, "forbidden")
	}
	for _, groups := range []string{"[admin]", `["users","admin"]`, "[users admin]", "admin"} {
		want(t, e.do("GET", "/orders?status=PLACED", caller{sub: "x", groups: groups}, nil), 200)
	}
}

// TestSubIsTakenAsItIs: a token whose sub would need trimming, or that no
// user id can be, is refused rather than trimmed into another user's id.
func TestSubIsTakenAsItIs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("sam")
	for _, sub := range []string{" sam", "sam ", "sam\n", "s\x00am", strings.Repeat("s", 129)} {
		r := e.do("GET", "/users/sam", caller{sub: sub}, nil)
		want(t, r, 403, "forbidden")
		r = e.do("POST", "/users", caller{sub: sub, email: "sam2@example.com"}, map[string]any{"name": "S"})
		want(t, r, 403, "forbidden")
	}
}
