package stack_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/routes"
)

// cachingDisabled is the id of CloudFront's managed CachingDisabled policy.
const cachingDisabled = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"

// TestCDNServesPublicReadsOnly: the distribution's behaviours are the public
// GET paths (GET and HEAD only, HTTPS only, the public-reads cache policy);
// everything else hits the default behaviour, which answers 404 at the edge
// and caches nothing.
func TestCDNServesPublicReadsOnly(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			dists := s.resources("AWS::CloudFront::Distribution")
			if len(dists) != 1 {
				t.Fatalf("got %d distributions, want 1", len(dists))
			}
			var cfg map[string]any
			for _, d := range dists {
				cfg = props(d)["DistributionConfig"].(map[string]any)
			}
			def := cfg["DefaultCacheBehavior"].(map[string]any)
			if got := fmt.Sprint(def["CachePolicyId"]); got != cachingDisabled {
				t.Errorf("default behaviour's cache policy: got %s, want CachingDisabled", got)
			}
			fa, _ := def["FunctionAssociations"].([]any)
			if len(fa) != 1 || fa[0].(map[string]any)["EventType"] != "viewer-request" {
				t.Errorf("default behaviour's functions: got %v, want the 404 function on viewer-request", fa)
			}
			var paths []string
			for _, b := range cfg["CacheBehaviors"].([]any) {
				cb := b.(map[string]any)
				paths = append(paths, cb["PathPattern"].(string))
				if got := fmt.Sprint(cb["AllowedMethods"]); got != "[GET HEAD]" {
					t.Errorf("%s: methods %s, want GET and HEAD", cb["PathPattern"], got)
				}
				if cb["ViewerProtocolPolicy"] != "https-only" {
					t.Errorf("%s: viewer protocol %v, want https-only", cb["PathPattern"], cb["ViewerProtocolPolicy"])
				}
			}
			sort.Strings(paths)
			want := slices.Clone(stack.CDNPaths)
			sort.Strings(want)
			if !slices.Equal(paths, want) {
				t.Errorf("paths: got %v, want %v", paths, want)
			}
			for _, p := range s.resources("AWS::CloudFront::CachePolicy") {
				c := props(p)["CachePolicyConfig"].(map[string]any)["ParametersInCacheKeyAndForwardedToOrigin"].(map[string]any)
				if h := c["HeadersConfig"].(map[string]any)["HeaderBehavior"]; h != "none" {
					t.Errorf("headers in the cache key: %v, want none (no Authorization)", h)
				}
				if ck := c["CookiesConfig"].(map[string]any)["CookieBehavior"]; ck != "none" {
					t.Errorf("cookies in the cache key: %v, want none", ck)
				}
				q := c["QueryStringsConfig"].(map[string]any)
				if got := fmt.Sprint(q["QueryStrings"]); q["QueryStringBehavior"] != "whitelist" || got != fmt.Sprint(stack.CDNQueryStrings) {
					t.Errorf("query strings: %v %s, want the allow list %v", q["QueryStringBehavior"], got, stack.CDNQueryStrings)
				}
			}
		})
	}
}

// TestCDNReachesNoAuthorisedRoute: every GET route a CDN path pattern
// matches is public by shopstream's routes, and every public GET route but
// the health check is served by the CDN.
func TestCDNReachesNoAuthorisedRoute(t *testing.T) {
	// CloudFront's path patterns: "*" matches any characters, "/" included.
	served := func(p string) bool {
		for _, pattern := range stack.CDNPaths {
			if prefix, ok := strings.CutSuffix(pattern, "*"); ok && strings.HasPrefix(p, prefix) || pattern == p {
				return true
			}
		}
		return false
	}
	for _, r := range routes.All() {
		if r.Method != "GET" {
			continue
		}
		switch {
		case served(r.Path) && r.Access != routes.Public:
			t.Errorf("%s: authorised, but the CDN serves its path", r.Pattern())
		case !served(r.Path) && r.Access == routes.Public && r.Path != "/healthz":
			t.Errorf("%s: public, but the CDN does not serve it", r.Pattern())
		}
	}
}
