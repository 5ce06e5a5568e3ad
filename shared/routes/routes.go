// Package routes declares every route of the HTTP API once, with who may call
// it: the API's router, the local API Gateway emulation, the CDK app (routes and
// authorizer) and the OpenAPI check all read it.
package routes

// AdminGroup is the user pool group whose members may do everything
// (docs/contract.md): the API reads it from cognito:groups, the CDK app
// creates it, and the token trigger and make admin-add guard it.
const AdminGroup = "admin"

// Access is who may call a route.
type Access int

// Access levels.
const (
	Public Access = iota // anyone, no token
	User                 // any signed-in user
	Owner                // the user named by {userId}, or an admin
	Admin                // admins only
)

// Route is one declared route.
type Route struct {
	Method string
	// Path uses API Gateway's and net/http's {name} parameters.
	Path   string
	Access Access
}

// Pattern is the route as a net/http ServeMux pattern and API Gateway route
// key: "GET /products/{productId}".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// NeedsToken reports whether the gateway's JWT authorizer guards the route.
func (r Route) NeedsToken() bool { return r.Access != Public }

// All returns every route, in a stable order.
func All() []Route {
	return []Route{
		{"GET", "/healthz", Public},

		{"POST", "/users", User},
		{"GET", "/users/{userId}", Owner},
		{"PATCH", "/users/{userId}", Owner},

		{"POST", "/products", Admin},
		{"GET", "/products", Public},
		{"GET", "/products/{productId}", Public},
		{"PATCH", "/products/{productId}", Admin},
		{"DELETE", "/products/{productId}", Admin},
		{"GET", "/search", Public},

		{"PUT", "/products/{productId}/reviews/{userId}", Owner},
		{"GET", "/products/{productId}/reviews", Public},
		{"DELETE", "/products/{productId}/reviews/{userId}", Owner},
		{"GET", "/users/{userId}/reviews", Owner},

		{"PUT", "/users/{userId}/cart/{productId}", Owner},
		{"GET", "/users/{userId}/cart", Owner},

		{"POST", "/users/{userId}/orders", Owner},
		{"GET", "/users/{userId}/orders", Owner},
		{"GET", "/users/{userId}/orders/{orderId}", Owner},
		{"POST", "/users/{userId}/orders/{orderId}/cancel", Owner},
		{"PATCH", "/users/{userId}/orders/{orderId}", Admin},
		{"GET", "/orders", Admin},
	}
}
