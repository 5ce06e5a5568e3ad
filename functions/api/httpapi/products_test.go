package httpapi_test

import (
	"fmt"
	"testing"
)

func TestProducts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := adminCaller("root")

	r := e.do("POST", "/products", admin, map[string]any{
		"name": "Kettle", "description": "Boils water", "category": "kitchen", "priceCents": 2999, "stock": 5,
	})
	want(t, r, 201)
	id := r.str("productId")
	if len(id) != 26 || r.num("version") != 1 {
		t.Fatalf("got %s, want a ULID id at version 1", r.Body)
	}

	t.Run("get shows counters, ratingAverage null", func(t *testing.T) {
		r := e.eventually("/products/"+id, 200) // the page reads eventually consistent
		if v, ok := r.json["ratingAverage"]; !ok || v != nil {
			t.Errorf("got ratingAverage %v (present %v), want null", v, ok)
		}
		for _, k := range []string{"reviewCount", "unitsSold"} {
			if v, ok := r.json[k]; !ok || v != 0.0 {
				t.Errorf("got %s = %v, want 0", k, v)
			}
		}
	})
	t.Run("create: validation, forbidden, unauthorized", func(t *testing.T) {
		r := e.do("POST", "/products", admin, map[string]any{"name": "", "category": "kitchen", "priceCents": -1})
		want(t, r, 400, "validation")
		if errs, _ := r.json["errors"].([]any); len(errs) != 3 {
			t.Errorf("got %v, want 3 errors (name, priceCents, stock)", r.json["errors"])
		}
		want(t, e.do("POST", "/products", userCaller("u"), map[string]any{"name": "x"}), 403, "forbidden")
		want(t, e.do("POST", "/products", anonymous, map[string]any{"name": "x"}), 401, "unauthorized")
		want(t, e.do("POST", "/products", admin, map[string]any{"name": "K", "category": "c", "priceCents": "12", "stock": 1}), 400, "validation")
	})
	t.Run("patch with If-Match", func(t *testing.T) {
		want(t, e.do("PATCH", "/products/"+id, admin, map[string]any{"priceCents": 2499}, "If-Match", "9"), 412, "precondition-failed")
		// A weak tag, as CloudFront makes of an ETag it compresses, names
		// its version: another version's is a 412.
		want(t, e.do("PATCH", "/products/"+id, admin, map[string]any{"priceCents": 2499}, "If-Match", `W/"7"`), 412, "precondition-failed")
		r := e.do("PATCH", "/products/"+id, admin, map[string]any{"priceCents": 2499, "name": "Kettle 2"}, "If-Match", "1")
		want(t, r, 200)
		if r.num("priceCents") != 2499 || r.str("name") != "Kettle 2" || r.num("version") != 2 || r.str("description") != "Boils water" {
			t.Errorf("got %s, want the new price and name at version 2, description kept", r.Body)
		}
		want(t, e.do("PATCH", "/products/"+id, userCaller("u"), map[string]any{"priceCents": 1}), 403, "forbidden")
		want(t, e.do("PATCH", "/products/nope", admin, map[string]any{"priceCents": 1}), 404, "not-found")
	})
	t.Run("delete", func(t *testing.T) {
		other := e.mustProduct("Toaster", "kitchen", 1999, 1)
		want(t, e.do("DELETE", "/products/"+other, userCaller("u"), nil), 403, "forbidden")
		want(t, e.do("DELETE", "/products/"+other, admin, nil, "If-Match", "5"), 412, "precondition-failed")
		r := e.do("DELETE", "/products/"+other, admin, nil)
		want(t, r, 204)
		if r.Body != "" {
			t.Errorf("got body %q, want none", r.Body)
		}
		want(t, e.eventually("/products/"+other, 404), 404, "not-found")
		want(t, e.do("DELETE", "/products/"+other, admin, nil), 404, "not-found")
	})
}

func TestListProductsByCategory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []string
	for i := range 7 {
		ids = append(ids, e.mustProduct(fmt.Sprintf("Book %d", i), "books", 1000+i, 3))
	}
	e.mustProduct("Lamp", "lighting", 500, 1)

	var got []string
	target := "/products?category=books&limit=3"
	pages := 0
	for {
		r := e.do("GET", target, anonymous, nil)
		want(t, r, 200)
		pages++
		for _, it := range r.items() {
			got = append(got, it["productId"].(string))
		}
		next := r.str("nextCursor")
		if next == "" {
			break
		}
		target = "/products?category=books&limit=3&cursor=" + next
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("got %v, want %v", got, ids)
	}
	if pages != 3 {
		t.Errorf("got %d pages, want 3", pages)
	}
	want(t, e.do("GET", "/products", anonymous, nil), 400, "validation")
	r := e.do("GET", "/products?category=none", anonymous, nil)
	want(t, r, 200)
	if len(r.items()) != 0 || r.json["nextCursor"] != nil {
		t.Errorf("got %s, want no items and no cursor", r.Body)
	}
}

// TestStockChangeKeepsConcurrentSales: an admin who read the stock, then
// adds units while an order is placed, keeps the order's decrement: the
// change is a delta. An absolute stock needs If-Match, so it can no longer
// overwrite sales it did not see.
func TestStockChangeKeepsConcurrentSales(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("sol")
	admin := adminCaller("root")
	p := e.mustProduct("Kite", "toys", 1000, 10)
	read := e.do("GET", "/products/"+p, admin, nil) // the admin's view: 10 in stock, version 1
	want(t, read, 200)
	e.mustOrder("sol", p, 3) // a sale meanwhile: 7 left

	// What an admin restocking 5 sent before: the stock it read plus 5.
	want(t, e.do("PATCH", "/products/"+p, admin, map[string]any{"stock": read.num("stock") + 5}), 400, "validation")
	want(t, e.do("PATCH", "/products/"+p, admin, map[string]any{"stock": read.num("stock") + 5}, "If-Match", read.Headers["etag"]), 412, "precondition-failed")
	r := e.do("PATCH", "/products/"+p, admin, map[string]any{"stockDelta": 5})
	want(t, r, 200)
	if got := r.num("stock"); got != 12 {
		t.Errorf("got stock %v, want 12 (10 - 3 sold + 5)", got)
	}
	want(t, e.do("PATCH", "/products/"+p, admin, map[string]any{"stockDelta": -13}), 409, "conflict")
	r = e.do("PATCH", "/products/"+p, admin, map[string]any{"stockDelta": -12})
	want(t, r, 200)
	if got := r.num("stock"); got != 0 {
		t.Errorf("got stock %v, want 0", got)
	}
	want(t, e.do("PATCH", "/products/"+p, admin, map[string]any{"stock": 1, "stockDelta": 1}), 400, "validation")
	r = e.do("PATCH", "/products/"+p, admin, map[string]any{"stock": 4}, "If-Match", r.Headers["etag"])
	want(t, r, 200)
	if got := r.num("stock"); got != 4 {
		t.Errorf("got stock %v, want 4", got)
	}
	want(t, e.do("PATCH", "/products/"+p, admin, map[string]any{"stockDelta": 1}, "If-Match", "1"), 412, "precondition-failed")
}
