package routes

import (
	"strings"
	"testing"
)

func TestRoutesAreUniqueAndWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range All() {
		if seen[r.Pattern()] {
			t.Errorf("route %s declared twice", r.Pattern())
		}
		seen[r.Pattern()] = true
		if !strings.HasPrefix(r.Path, "/") || strings.HasSuffix(r.Path, "/") {
			t.Errorf("route %s: path must start and not end with /", r.Pattern())
		}
		if strings.Contains(r.Path, "{userId}") != (r.Access == Owner) && r.Access != Admin {
			t.Errorf("route %s: only routes under a {userId} are owner routes", r.Pattern())
		}
	}
	// The contract: everything but /healthz, /products... reads and /search needs a token.
	for _, r := range All() {
		public := r.Method == "GET" && (r.Path == "/healthz" || r.Path == "/search" || strings.HasPrefix(r.Path, "/products"))
		if got := !r.NeedsToken(); got != public {
			t.Errorf("route %s: public got %v, want %v", r.Pattern(), got, public)
		}
	}
}
