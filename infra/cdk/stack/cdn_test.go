package stack_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

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

// TestCDNOwnDomain: with cdnDomain and cdnCertificateArn the distribution
// answers at that name with that certificate under TLSv1.2_2021 (SNI), the
// CdnUrl output names it, and cdk-nag's CFR4 is met rather than suppressed;
// without them the stages keep CloudFront's default certificate, with CFR4
// suppressed and its reason given.
func TestCDNOwnDomain(t *testing.T) {
	const domain = "shop.example.com"
	const cert = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-90ab-cdef-1234-567890abcdef"
	_, s, tpl := synthWithContext(t, map[string]any{"stage": stack.Prod, stack.CDNDomainContext: domain, stack.CDNCertificateContext: cert})
	tpl.HasResourceProperties(jsii.String("AWS::CloudFront::Distribution"), map[string]any{
		"DistributionConfig": assertions.Match_ObjectLike(&map[string]any{
			"Aliases": []any{domain},
			"ViewerCertificate": map[string]any{
				"AcmCertificateArn":      cert,
				"MinimumProtocolVersion": "TLSv1.2_2021",
				"SslSupportMethod":       "sni-only",
			},
		}),
	})
	tpl.HasOutput(jsii.String(stack.OutputCDNURL), map[string]any{
		"Value": "https://" + domain,
	})
	nag := assertions.Annotations_FromStack(s.Stack)
	rules := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	findings := append(*nag.FindError(jsii.String("*"), rules), *nag.FindWarning(jsii.String("*"), rules)...)
	for _, m := range findings {
		t.Errorf("unsuppressed finding at %s: %v", *m.Id, m.Entry.Data)
	}
	suppressedCFR4 := false
	for _, r := range *tpl.FindResources(jsii.String("AWS::CloudFront::Distribution"), nil) {
		meta, _ := (*r)["Metadata"].(map[string]any)
		suppressedCFR4 = strings.Contains(fmt.Sprint(meta["cdk_nag"]), "AwsSolutions-CFR4")
	}
	if suppressedCFR4 {
		t.Error("CFR4 is suppressed on a distribution with its own certificate: it should be met")
	}

	for _, name := range stageNames() {
		for _, d := range stages[name].resources("AWS::CloudFront::Distribution") {
			cfg := props(d)["DistributionConfig"].(map[string]any)
			if vc, ok := cfg["ViewerCertificate"].(map[string]any); ok && vc["CloudFrontDefaultCertificate"] != true {
				t.Errorf("%s without cdnDomain: viewer certificate %v, want CloudFront's default", name, vc)
			}
			if _, ok := cfg["Aliases"]; ok {
				t.Errorf("%s without cdnDomain: aliases %v, want none", name, cfg["Aliases"])
			}
			if meta, _ := d["Metadata"].(map[string]any); !strings.Contains(fmt.Sprint(meta["cdk_nag"]), "AwsSolutions-CFR4") {
				t.Errorf("%s without cdnDomain: CFR4 not suppressed with its reason", name)
			}
		}
	}
}

// TestParseCDNDomain: both settings or neither, a host name, and a
// certificate of us-east-1; an error names the setting.
func TestParseCDNDomain(t *testing.T) {
	const cert = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-90ab-cdef-1234-567890abcdef"
	if d, c, err := stack.ParseCDNDomain("", ""); d != "" || c != "" || err != nil {
		t.Errorf("neither: got %q %q %v, want none", d, c, err)
	}
	for _, host := range []string{"shop.example.com", "shop.xn--p1ai"} {
		if d, c, err := stack.ParseCDNDomain(host, cert); d != host || c != cert || err != nil {
			t.Errorf("%s: got %q %q %v", host, d, c, err)
		}
	}
	for _, tc := range []struct{ domain, cert, err string }{
		{"shop.example.com", "", "go together"},
		{"", cert, "go together"},
		{"Shop.Example.com", cert, stack.CDNDomainContext},
		{"https://shop.example.com", cert, stack.CDNDomainContext},
		{"shop", cert, stack.CDNDomainContext},
		{"-shop.example.com", cert, stack.CDNDomainContext},
		{"shop.example.com", strings.Replace(cert, "us-east-1", "eu-west-1", 1), "us-east-1"},
		{"shop.example.com", "arn:aws:iam::123456789012:server-certificate/shop", stack.CDNCertificateContext},
		{"shop.example.com", strings.Replace(cert, "arn:aws:", "arn:aws-cn:", 1), stack.CDNCertificateContext},
		{"shop.example.com", "arn:aws:acm:us-east-1:123456789012:certificate/------------------------------------", stack.CDNCertificateContext},
	} {
		t.Run(tc.domain+" "+tc.cert, func(t *testing.T) {
			if _, _, err := stack.ParseCDNDomain(tc.domain, tc.cert); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("got %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// TestCDNAnswersTheStagesOrigins: the public reads' response headers policy
// adds CORS headers for the stage's browser origins at the edge (the API's
// own CORS answer needs the Origin header, which the CDN does not forward),
// whatever the origin sent, without credentials, exposing the ETag.
func TestCDNAnswersTheStagesOrigins(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			var cors map[string]any
			for _, p := range s.resources("AWS::CloudFront::ResponseHeadersPolicy") {
				if c, ok := props(p)["ResponseHeadersPolicyConfig"].(map[string]any)["CorsConfig"].(map[string]any); ok {
					cors = c
				}
			}
			if cors == nil {
				t.Fatal("no response headers policy answers CORS: browsers on the shop's origin cannot read through the CDN")
			}
			items := func(k string) []string { return strs(cors[k].(map[string]any)["Items"]) }
			if got, want := items("AccessControlAllowOrigins"), mustConfig(t, name).CORSOrigins; !slices.Equal(got, want) {
				t.Errorf("origins %v, want the stage's %v", got, want)
			}
			if got := items("AccessControlAllowMethods"); !slices.Equal(got, []string{"GET", "HEAD"}) {
				t.Errorf("methods %v, want GET and HEAD", got)
			}
			if got := items("AccessControlExposeHeaders"); !slices.Contains(got, "ETag") {
				t.Errorf("exposed headers %v, want ETag", got)
			}
			if cors["AccessControlAllowCredentials"] != false || cors["OriginOverride"] != true {
				t.Errorf("credentials %v, origin override %v; want false and true", cors["AccessControlAllowCredentials"], cors["OriginOverride"])
			}
		})
	}
}
