package httpapi

import (
	"testing"

	"github.com/shopstream/shopstream/shared/carts"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/reviews"
	"github.com/shopstream/shopstream/shared/users"
)

// FuzzRequestBodies feeds arbitrary bytes to the decoding and validation of
// every request body. Whatever comes in, the answer is either a valid value
// or an Invalid error naming at least one field problem: never a panic, never
// another code (which would be a 500). The seed corpus is in
// testdata/fuzz/FuzzRequestBodies and runs with every plain `go test`.
func FuzzRequestBodies(f *testing.F) {
	f.Add([]byte(`{"items":[{"productId":"p1","quantity":2},{"productId":"p1","quantity":3}]}`))
	f.Add([]byte(`{"fromCart":true}`))
	f.Add([]byte(`{"email":"a@example.com","name":"A"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(name string, v interface{ Validate() error }, target any) {
			err := decodeJSON(body, target)
			if err == nil {
				err = v.Validate()
			}
			if err == nil {
				return
			}
			e := errcode.As(err)
			if e == nil || e.Code != errcode.Invalid || len(e.Fields) == 0 {
				t.Fatalf("%s: got %v, want an Invalid error with fields", name, err)
			}
		}
		var un users.New
		check("users.New", &un, &un)
		var up users.Patch
		check("users.Patch", &up, &up)
		var pn products.New
		check("products.New", &pn, &pn)
		var pp products.Patch
		check("products.Patch", &pp, &pp)
		var rv reviews.Input
		check("reviews.Input", &rv, &rv)
		var ci carts.Input
		check("carts.Input", &ci, &ci)
		var sc orders.StatusChange
		check("orders.StatusChange", &sc, &sc)

		in, err := decodeOrderRequest(body)
		if err != nil {
			if e := errcode.As(err); e == nil || e.Code != errcode.Invalid || len(e.Fields) == 0 {
				t.Fatalf("orders.Request: got %v, want an Invalid error with fields", err)
			}
			return
		}
		merged, err := orders.Merge(in.Items)
		if err != nil {
			t.Fatalf("a valid request does not merge: %v", err)
		}
		if len(merged) > orders.MaxLines {
			t.Fatalf("got %d lines, want at most %d", len(merged), orders.MaxLines)
		}
		for _, it := range merged {
			if it.Quantity < 1 || it.Quantity > orders.MaxQuantity || it.ProductID == "" {
				t.Fatalf("a valid request has line %+v", it)
			}
		}
	})
}
