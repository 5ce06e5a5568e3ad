package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/shared/errcode"
)

// calls returns the DynamoDB calls the handler counted for the request with
// API Gateway request id reqID (from its metrics line).
func (e *env) calls(reqID string) int {
	e.t.Helper()
	for _, line := range strings.Split(e.metrics.String(), "\n") {
		var rec struct {
			APIRequestID  string `json:"apiRequestId"`
			DynamoDBCalls int    `json:"dynamodbCalls"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.APIRequestID == reqID {
			return rec.DynamoDBCalls
		}
	}
	e.t.Fatalf("no metrics line for request %s", reqID)
	return 0
}

// TestIDsNoResourceCanHave: a path id that no resource can have is 404
// before any DynamoDB call. Before, a product id over 2048 bytes reached
// DynamoDB, whose ValidationException was answered 500 (unauthenticated, on
// the public product routes).
func TestIDsNoResourceCanHave(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("ivy")
	p := e.mustProduct("Vase", "decor", 100, 10)
	o := e.mustOrder("ivy", p, 1)
	long := strings.Repeat("A", 3000)
	longUser := strings.Repeat("u", 129)
	admin := adminCaller("root")
	for _, tc := range []struct {
		method, target string
		who            caller
		body           any
	}{
		{"GET", "/products/" + long, anonymous, nil},
		{"GET", "/products/" + long + "/reviews", anonymous, nil},
		{"GET", "/products/not-a-ulid", anonymous, nil},
		{"GET", "/products/" + strings.ToLower(p), anonymous, nil},
		{"PATCH", "/products/" + long, admin, map[string]any{"priceCents": 1}},
		{"DELETE", "/products/" + long, admin, nil},
		{"GET", "/users/ivy/orders/" + long, userCaller("ivy"), nil},
		{"POST", "/users/ivy/orders/" + long + "/cancel", userCaller("ivy"), nil},
		{"PATCH", "/users/ivy/orders/" + long, admin, map[string]any{"status": "SHIPPED"}},
		{"PUT", "/users/ivy/cart/" + long, userCaller("ivy"), map[string]any{"quantity": 1}},
		{"PUT", "/users/ivy/cart/" + long, userCaller("ivy"), map[string]any{"quantity": 0}},
		{"PUT", "/products/" + long + "/reviews/ivy", userCaller("ivy"), map[string]any{"rating": 5, "title": "T"}},
		{"DELETE", "/products/" + long + "/reviews/ivy", userCaller("ivy"), nil},
		{"PUT", "/products/" + p + "/reviews/" + longUser, admin, map[string]any{"rating": 5, "title": "T"}},
		{"DELETE", "/products/" + p + "/reviews/" + longUser, admin, nil},
		{"GET", "/users/" + longUser, admin, nil},
		{"GET", "/users/" + strings.Repeat("u", 3000) + "/orders", admin, nil},
		{"GET", "/users/u%01x", admin, nil},
		{"GET", "/users/u%7Fx/cart", admin, nil},
		{"GET", "/users/ivy/orders/" + o + "x", userCaller("ivy"), nil},
		// Whoever asks: an impossible id is not-found before it is
		// anyone's (the contract), not a 403 to a caller it is not.
		{"GET", "/users/" + longUser, userCaller("ivy"), nil},
		{"PUT", "/users/u%01x/cart/" + p, userCaller("ivy"), map[string]any{"quantity": 1}},
		{"PATCH", "/products/not-a-ulid", userCaller("ivy"), map[string]any{"priceCents": 1}},
		{"PATCH", "/users/ivy/orders/" + long, userCaller("ivy"), map[string]any{"status": "SHIPPED"}},
	} {
		name := tc.method + " " + tc.target
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			ev := event(tc.method, tc.target, tc.who, tc.body)
			r := e.send(ev)
			want(t, r, 404, "not-found")
			if n := e.calls(ev.RequestContext.RequestID); n != 0 {
				t.Errorf("got %d DynamoDB calls, want 0", n)
			}
		})
	}
}

// TestValidationExceptionIsInvalid: a ValidationException that the request's
// values cause (a key over DynamoDB's limits, an empty key) is an Invalid
// error (400), not an internal one (500), wherever it comes from.
func TestValidationExceptionIsInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	long := strings.Repeat("x", 3000)
	_, err := e.st.GetProduct(ctx, long)
	if errcode.Of(err) != errcode.Invalid {
		t.Errorf("product id of 3000 bytes: got %v, want an Invalid error", err)
	}
	_, err = e.st.GetOrder(ctx, "u", strings.Repeat("x", 1100))
	if errcode.Of(err) != errcode.Invalid {
		t.Errorf("order id of 1100 bytes: got %v, want an Invalid error", err)
	}
	_, err = e.st.GetOrder(ctx, "u", "")
	if errcode.Of(err) != errcode.Invalid {
		t.Errorf("empty order id: got %v, want an Invalid error", err)
	}
}

// TestPathsAreNeverRedirected: empty, "." and ".." segments are 404
// problem+json, never ServeMux's redirect to a cleaned path (which names
// another resource).
func TestPathsAreNeverRedirected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("pat")
	p := e.mustProduct("Pot", "kitchen", 100, 10)
	pat := userCaller("pat")
	for _, target := range []string{
		"/products/" + p + "/./reviews",
		"/products/" + p + "/reviews/..",
		"/products/%2e%2e/" + p,
		"/products/.",
		"/users/pat/../pat",
		"/users/pat/orders/",
		"/users//orders",
		"//healthz",
		"/healthz/",
		"/users/pat/./cart",
		"/users/pat/%2E/cart",
	} {
		t.Run(target, func(t *testing.T) {
			r := e.do("GET", target, pat, nil)
			want(t, r, 404, "not-found")
			if loc := r.Headers["location"]; loc != "" {
				t.Errorf("got Location %q, want none", loc)
			}
		})
	}
}

// TestBase64BodyError: a body flagged base64 that is not is a 400 naming the
// body in its errors list.
func TestBase64BodyError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("bea")
	ev := event("PATCH", "/users/bea", userCaller("bea"), nil)
	ev.Body, ev.IsBase64Encoded = "%%%"+base64.StdEncoding.EncodeToString([]byte(`{"name":"B"}`)), true
	r := e.send(ev)
	want(t, r, 400, "validation")
	if errs, _ := r.json["errors"].([]any); len(errs) == 0 {
		t.Errorf("got %s, want an errors list", r.Body)
	}
}
