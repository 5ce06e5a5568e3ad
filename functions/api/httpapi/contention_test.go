package httpapi_test

import (
	"testing"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestContention cancels the API's transactions as DynamoDB does when
// another transaction holds an item (TransactionCanceledException with
// TransactionConflict): a short conflict is retried to one success, a long
// one is a 503 that wrote nothing.
func TestContention(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(c *store.Config) { c.MaxAttempts = 4 })
	front := stacktest.Stack(t).Front
	products := tables.Physical(e.prefix, tables.Products)
	stock := tables.Physical(e.prefix, tables.ProductStock)
	e.mustUser("cleo")
	cleo := userCaller("cleo")
	p := e.mustProduct("Kettle", "kitchen", 2500, 10)
	orders := func() int {
		t.Helper()
		r := e.do("GET", "/users/cleo/orders", cleo, nil)
		want(t, r, 200)
		return len(r.items())
	}
	// Orders take their units from the stock table; a review checks the
	// product in the products table.
	conflictOn := func(table string, times int) func() {
		return front.InjectFault(ddbfront.Fault{Table: table, Code: "TransactionConflict", Times: times})
	}
	conflict := func(times int) func() { return conflictOn(stock, times) }
	usedUp := func(t *testing.T) {
		t.Helper()
		for _, f := range front.ActiveFaults() {
			if f.Table == products || f.Table == stock {
				t.Fatalf("fault left: %+v; the request never met the conflict", f)
			}
		}
	}
	line := map[string]any{"items": []any{map[string]any{"productId": p, "quantity": 2}}}

	t.Run("place order through a short conflict", func(t *testing.T) {
		conflict(3)
		want(t, e.do("POST", "/users/cleo/orders", cleo, line), 201)
		usedUp(t)
		if got := e.stock(p); got != 8 {
			t.Errorf("stock: got %d, want 8 (one decrement)", got)
		}
		if got := orders(); got != 1 {
			t.Errorf("orders: got %d, want 1", got)
		}
	})
	t.Run("place order through a conflict that outlasts the retries", func(t *testing.T) {
		remove := conflict(0)
		r := e.do("POST", "/users/cleo/orders", cleo, line)
		remove()
		want(t, r, 503, "unavailable")
		if r.Headers["retry-after"] == "" {
			t.Errorf("got headers %v, want Retry-After", r.Headers)
		}
		if got := e.stock(p); got != 8 {
			t.Errorf("stock: got %d, want 8 (nothing written)", got)
		}
		if got := orders(); got != 1 {
			t.Errorf("orders: got %d, want 1", got)
		}
	})
	t.Run("cancel through a short conflict", func(t *testing.T) {
		o := e.mustOrder("cleo", p, 3)
		conflict(2)
		r := e.do("POST", "/users/cleo/orders/"+o+"/cancel", cleo, nil)
		want(t, r, 200)
		usedUp(t)
		if r.str("status") != "CANCELLED" {
			t.Errorf("got %s, want status CANCELLED", r.Body)
		}
		if got := e.stock(p); got != 8 {
			t.Errorf("stock: got %d, want 8 (restocked once)", got)
		}
	})
	t.Run("review through a short conflict", func(t *testing.T) {
		conflictOn(products, 2)
		r := e.do("PUT", "/products/"+p+"/reviews/cleo", cleo, map[string]any{"rating": 5, "title": "Boils"})
		want(t, r, 201)
		usedUp(t)
		if r.num("version") != 1 {
			t.Errorf("got %s, want version 1", r.Body)
		}
	})
}
