package httpapi

import (
	"fmt"
	"net/http"
	"runtime/debug"
)

// Route is one declared route: its ServeMux pattern and who may call it.
type Route struct {
	Pattern string
	Access  Access
	serve   func(http.ResponseWriter, *http.Request) error
}

// Routes lists every route of the API with its access, for the API Gateway
// emulation (which answers undeclared routes and missing tokens itself), the
// CDK app and the OpenAPI check.
func Routes() []Route { return (&Handler{}).routes() }

func (h *Handler) routes() []Route {
	return []Route{
		{"GET /healthz", Public, h.health},

		{"POST /users", User, h.createUser},
		{"GET /users/{userId}", Owner, h.getUser},
		{"PATCH /users/{userId}", Owner, h.patchUser},

		{"POST /products", Admin, h.createProduct},
		{"GET /products", Public, h.listProducts},
		{"GET /products/{productId}", Public, h.getProduct},
		{"PATCH /products/{productId}", Admin, h.patchProduct},
		{"DELETE /products/{productId}", Admin, h.deleteProduct},
		{"GET /search", Public, h.search},

		{"PUT /products/{productId}/reviews/{userId}", Owner, h.putReview},
		{"GET /products/{productId}/reviews", Public, h.listProductReviews},
		{"DELETE /products/{productId}/reviews/{userId}", Owner, h.deleteReview},
		{"GET /users/{userId}/reviews", Owner, h.listUserReviews},

		{"PUT /users/{userId}/cart/{productId}", Owner, h.putCartLine},
		{"GET /users/{userId}/cart", Owner, h.getCart},

		{"POST /users/{userId}/orders", Owner, h.placeOrder},
		{"GET /users/{userId}/orders", Owner, h.listUserOrders},
		{"GET /users/{userId}/orders/{orderId}", Owner, h.getOrder},
		{"POST /users/{userId}/orders/{orderId}/cancel", Owner, h.cancelOrder},
		{"PATCH /users/{userId}/orders/{orderId}", Admin, h.moveOrder},
		{"GET /orders", Admin, h.listOpenOrders},
	}
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
		if err := authorize(r, rt.Access); err != nil {
			h.fail(r.Context(), w, err)
			return
		}
		if err := rt.serve(w, r); err != nil {
			h.fail(r.Context(), w, err)
		}
	})
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request) error {
	write(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}
