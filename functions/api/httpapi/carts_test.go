package httpapi_test

import (
	"strings"
	"testing"
	"time"
)

func TestCart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("cat")
	cat, admin := userCaller("cat"), adminCaller("root")
	a := e.mustProduct("Mug", "kitchen", 800, 10)
	b := e.mustProduct("Plate", "kitchen", 1200, 10)

	r := e.do("GET", "/users/cat/cart", cat, nil)
	want(t, r, 200)
	if len(r.items()) != 0 && r.json["lines"] != nil && len(r.json["lines"].([]any)) != 0 {
		t.Fatalf("got %s, want an empty cart", r.Body)
	}

	before := time.Now()
	want(t, e.do("PUT", "/users/cat/cart/"+a, cat, map[string]any{"quantity": 2}), 200)
	r = e.do("PUT", "/users/cat/cart/"+b, cat, map[string]any{"quantity": 1})
	want(t, r, 200)
	exp, err := time.Parse(time.RFC3339, r.str("expiresAt"))
	if err != nil || exp.Before(before.Add(7*24*time.Hour-time.Minute)) || exp.After(time.Now().Add(7*24*time.Hour+time.Minute)) {
		t.Errorf("got expiresAt %q, want now + 7 days", r.str("expiresAt"))
	}

	r = e.do("GET", "/users/cat/cart", cat, nil)
	want(t, r, 200)
	lines, _ := r.json["lines"].([]any)
	if len(lines) != 2 || r.num("totalCents") != 2*800+1200 {
		t.Fatalf("got %s, want 2 lines totalling 2800", r.Body)
	}
	first := lines[0].(map[string]any)
	if first["productId"] != a || first["productName"] != "Mug" || first["unitPriceCents"] != 800.0 || first["quantity"] != 2.0 {
		t.Errorf("got first line %v, want 2 Mugs at 800", first)
	}

	want(t, e.do("PUT", "/users/cat/cart/"+a, cat, map[string]any{"quantity": 0}), 200)
	r = e.do("GET", "/users/cat/cart", cat, nil)
	if lines, _ := r.json["lines"].([]any); len(lines) != 1 {
		t.Errorf("got %s, want only the plate", r.Body)
	}

	if first := lines[0].(map[string]any); first["available"] != true {
		t.Errorf("got first line %v, want it available", first)
	}

	// The plate is deleted: its line stays in sight, unavailable, outside
	// the total, and an order from the cart names it until it is taken out.
	want(t, e.do("PUT", "/users/cat/cart/"+a, cat, map[string]any{"quantity": 1}), 200)
	want(t, e.do("DELETE", "/products/"+b, admin, nil), 204)
	// The cart reads its products eventually consistent: the deletion
	// shows once the replicas have it (on AWS, usually within a second).
	var gone map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r = e.do("GET", "/users/cat/cart", cat, nil)
		want(t, r, 200)
		lines, _ = r.json["lines"].([]any)
		for _, l := range lines {
			if l := l.(map[string]any); l["productId"] == b {
				gone = l
			}
		}
		if gone == nil || gone["available"] == false || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != 2 || gone == nil || gone["available"] != false || gone["quantity"] != 1.0 || r.num("totalCents") != 800 {
		t.Fatalf("got %s, want the mug and the deleted plate's line unavailable, total 800", r.Body)
	}
	// Without name or price, as the contract says (not an empty name and
	// a price of 0, which read as a free product without a name).
	for _, field := range []string{"productName", "unitPriceCents", "lineTotalCents"} {
		if v, ok := gone[field]; ok {
			t.Errorf("the deleted plate's line has %s %v, want none", field, v)
		}
	}
	o := e.do("POST", "/users/cat/orders", cat, map[string]any{"fromCart": true})
	want(t, o, 409, "conflict")
	if !strings.Contains(o.Body, b) {
		t.Errorf("order from a cart with a deleted product: %s, want it named", o.Body)
	}
	want(t, e.do("PUT", "/users/cat/cart/"+b, cat, map[string]any{"quantity": 0}), 200)
	want(t, e.do("POST", "/users/cat/orders", cat, map[string]any{"fromCart": true}), 201)

	want(t, e.do("PUT", "/users/cat/cart/nope", cat, map[string]any{"quantity": 1}), 404, "not-found")
	want(t, e.do("PUT", "/users/cat/cart/"+a, cat, map[string]any{"quantity": -1}), 400, "validation")
	want(t, e.do("PUT", "/users/cat/cart/"+a, cat, map[string]any{"quantity": 1001}), 400, "validation")
	want(t, e.do("PUT", "/users/cat/cart/"+a, userCaller("dog"), map[string]any{"quantity": 1}), 403, "forbidden")
	want(t, e.do("GET", "/users/cat/cart", anonymous, nil), 401, "unauthorized")
}

// TestCartTakesAProductJustCreated: a product added to a cart the moment
// it is created is found (the check reads again strongly consistent when an
// eventually consistent read lags the creation), and the cart read right
// after shows the line.
func TestCartTakesAProductJustCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("cal")
	cal := userCaller("cal")
	r := e.do("POST", "/products", adminCaller("boss"), map[string]any{"name": "Fresh", "description": "d", "category": "new", "priceCents": 100, "stock": 3})
	want(t, r, 201)
	want(t, e.do("PUT", "/users/cal/cart/"+r.str("productId"), cal, map[string]any{"quantity": 1}), 200)
	got := e.do("GET", "/users/cal/cart", cal, nil)
	want(t, got, 200)
	if lines, _ := got.json["lines"].([]any); len(lines) != 1 {
		t.Errorf("cart right after: got %s, want the line", got.Body)
	}
}

// TestCartOfAUserNotRegistered: a cart is created only for a registered
// user, as an order is placed only for one (404 `not-found`); a cart was
// created for any signed-in user (and, by an admin, for any id), which no
// order could then be placed from, and which expired into the archive. A
// removal from no cart writes nothing; after registering, the same request
// creates the cart.
func TestCartOfAUserNotRegistered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.mustProduct("Mug", "kitchen", 800, 10)
	dot := userCaller("dot")
	want(t, e.do("PUT", "/users/dot/cart/"+p, dot, map[string]any{"quantity": 2}), 404, "not-found")
	want(t, e.do("PUT", "/users/nobody/cart/"+p, adminCaller("root"), map[string]any{"quantity": 1}), 404, "not-found")
	r := e.do("PUT", "/users/dot/cart/"+p, dot, map[string]any{"quantity": 0})
	want(t, r, 200)
	if lines, _ := r.json["lines"].([]any); len(lines) != 0 || r.num("version") != 0 {
		t.Errorf("removal from no cart: %s, want an empty cart never written (version 0)", r.Body)
	}
	e.mustUser("dot")
	want(t, e.do("PUT", "/users/dot/cart/"+p, dot, map[string]any{"quantity": 2}), 200)
	r = e.do("GET", "/users/dot/cart", dot, nil)
	want(t, r, 200)
	if lines, _ := r.json["lines"].([]any); len(lines) != 1 {
		t.Errorf("cart after registering: %s, want one line", r.Body)
	}
}
