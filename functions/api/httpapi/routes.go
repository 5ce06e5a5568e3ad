package httpapi

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/ulid"
	"github.com/shopstream/shopstream/shared/users"
)

// Route is one declared route with the handler that serves it.
type Route struct {
	Pattern string
	Access  Access
	serve   func(http.ResponseWriter, *http.Request) error
}

// Routes lists every route of the API with its access (from shared/routes).
func Routes() []Route { return (&Handler{}).routes() }

// routes pairs every route of shared/routes with its handler; a declared route
// without a handler, or a handler for an undeclared route, is a programming
// error caught by the first test that builds a Handler.
func (h *Handler) routes() []Route {
	serve := map[string]func(http.ResponseWriter, *http.Request) error{
		"GET /healthz": h.health,

		"POST /users":           h.createUser,
		"GET /users/{userId}":   h.getUser,
		"PATCH /users/{userId}": h.patchUser,

		"POST /products":               h.createProduct,
		"GET /products":                h.listProducts,
		"GET /products/{productId}":    h.getProduct,
		"PATCH /products/{productId}":  h.patchProduct,
		"DELETE /products/{productId}": h.deleteProduct,
		"GET /search":                  h.search,

		"PUT /products/{productId}/reviews/{userId}":    h.putReview,
		"GET /products/{productId}/reviews":             h.listProductReviews,
		"DELETE /products/{productId}/reviews/{userId}": h.deleteReview,
		"GET /users/{userId}/reviews":                   h.listUserReviews,

		"PUT /users/{userId}/cart/{productId}": h.putCartLine,
		"GET /users/{userId}/cart":             h.getCart,

		"POST /users/{userId}/orders":                  h.placeOrder,
		"GET /users/{userId}/orders":                   h.listUserOrders,
		"GET /users/{userId}/orders/{orderId}":         h.getOrder,
		"POST /users/{userId}/orders/{orderId}/cancel": h.cancelOrder,
		"PATCH /users/{userId}/orders/{orderId}":       h.moveOrder,
		"GET /orders":                                  h.listOpenOrders,
	}
	declared := routes.All()
	out := make([]Route, 0, len(declared))
	for _, rt := range declared {
		fn, ok := serve[rt.Pattern()]
		if !ok {
			panic("httpapi: no handler for declared route " + rt.Pattern())
		}
		delete(serve, rt.Pattern())
		out = append(out, Route{Pattern: rt.Pattern(), Access: rt.Access, serve: fn})
	}
	for p := range serve {
		panic("httpapi: handler for undeclared route " + p)
	}
	return out
}

// guard authorizes the caller, serves the route and answers its error; a
// panic becomes a logged internal error.
func (h *Handler) guard(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				h.fail(r.Context(), w, fmt.Errorf("%s: panic: %v\n%s", rt.Pattern, v, debug.Stack()))
			}
		}()
		w.Header().Set("Cache-Control", cacheControl(rt))
		// A caller without a token is refused first, as the gateway's
		// authorizer does on AWS. Then an id no resource can have is a 404
		// for every caller (the contract's "not-found"), before who may
		// reach it is asked: no resource is named, so nothing is told that
		// a 403 would hide.
		if err := authenticate(r, rt.Access); err != nil {
			h.fail(r.Context(), w, err)
			return
		}
		if err := checkIDs(r); err != nil {
			h.fail(r.Context(), w, err)
			return
		}
		if err := authorize(r, rt.Access); err != nil {
			h.fail(r.Context(), w, err)
			return
		}
		if err := rt.serve(w, r); err != nil {
			h.fail(r.Context(), w, err)
		}
	})
}

// cacheControl says how long a route's answers may be kept. Public reads
// may be kept by any cache, the CDN in front of the API included, for a few
// seconds: a product's page (its stock and counters move with every sale)
// 5 s, lists and search 10 s; a client revalidates a product with its ETag.
// Everything else is one user's or an admin's, and no cache keeps it.
func cacheControl(rt Route) string {
	switch {
	case rt.Access != routes.Public || !strings.HasPrefix(rt.Pattern, "GET ") || rt.Pattern == "GET /healthz":
		return "no-store"
	case rt.Pattern == "GET /products/{productId}":
		return "public, max-age=5"
	}
	return "public, max-age=10"
}

// checkIDs answers 404 for a path id that no resource can have, before any
// DynamoDB call: product and order ids are ULIDs the API generated, user ids
// are tokens' subs (users.ValidID). DynamoDB refuses keys over 2048 (partition)
// or 1024 (sort) bytes with a ValidationException; such an id must never reach
// it. Codes: NotFound.
func checkIDs(r *http.Request) error {
	for _, name := range []string{"productId", "orderId"} {
		if v := r.PathValue(name); v != "" && !ulid.Valid(v) {
			return errcode.Errorf(errcode.NotFound, "no %s %.40q", strings.TrimSuffix(name, "Id"), v)
		}
	}
	if v := r.PathValue("userId"); v != "" && !users.ValidID(v) {
		return errcode.Errorf(errcode.NotFound, "no user %.40q", v)
	}
	return nil
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request) error {
	write(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}
