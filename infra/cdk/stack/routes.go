package stack

import "github.com/shopstream/shopstream/shared/routes"

// DeclaredRoutes are the HTTP API's routes from shared/routes.
func DeclaredRoutes() []Route {
	var out []Route
	for _, r := range routes.All() {
		out = append(out, Route{Method: r.Method, Path: r.Path, Public: !r.NeedsToken()})
	}
	return out
}
