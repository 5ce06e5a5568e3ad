package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfrontorigins"
	"github.com/aws/jsii-runtime-go"
)

// OutputCDNURL names the output holding the CDN's base URL.
const OutputCDNURL = "CdnUrl"

// CDNPaths are the path patterns the CDN serves, all public GET routes of
// docs/contract.md#2-http-api (GET and HEAD only): products, their pages and reviews, and
// search. Every other path, the authorised routes among them, is answered
// 404 at the edge and never reaches the API through the CDN.
var CDNPaths = []string{"/products", "/products/*", "/search"}

// CDNQueryStrings are the query parameters of the public routes; they are
// the cache key's, and nothing else of the request is.
var CDNQueryStrings = []string{"category", "cursor", "limit", "q"}

// cdn puts CloudFront in front of the API's public GET routes, so that a
// viral product's page is read from the edge: the API says how long an
// answer may be kept (Cache-Control: public, max-age=5 on a product, 10 on
// lists and search) and CloudFront revalidates with the ETag. No header
// (Authorization included) and no cookie is forwarded or part of the key.
func (b *builder) cdn() {
	origin := awscloudfrontorigins.NewHttpOrigin(awscdk.Fn_Join(jsii.String(""), &[]*string{
		b.api.api.ApiId(), jsii.String(".execute-api."), b.s.Stack.Region(), jsii.String("."), b.s.Stack.UrlSuffix(),
	}), &awscloudfrontorigins.HttpOriginProps{
		ProtocolPolicy:      awscloudfront.OriginProtocolPolicy_HTTPS_ONLY,
		OriginSslProtocols:  &[]awscloudfront.OriginSslPolicy{awscloudfront.OriginSslPolicy_TLS_V1_2},
		ReadTimeout:         awscdk.Duration_Seconds(jsii.Number(30)),
		ConnectionAttempts:  jsii.Number(2),
		ConnectionTimeout:   awscdk.Duration_Seconds(jsii.Number(5)),
		OriginShieldEnabled: jsii.Bool(false),
	})
	cache := awscloudfront.NewCachePolicy(b.s.Stack, jsii.String("PublicReadsCachePolicy"), &awscloudfront.CachePolicyProps{
		CachePolicyName: b.name("public-reads"),
		Comment:         jsii.String("the origin's Cache-Control decides; query strings of the public routes only"),
		MinTtl:          awscdk.Duration_Seconds(jsii.Number(0)),
		DefaultTtl:      awscdk.Duration_Seconds(jsii.Number(0)),
		MaxTtl:          awscdk.Duration_Seconds(jsii.Number(60)),
		QueryStringBehavior: awscloudfront.CacheQueryStringBehavior_AllowList(
			jsii.String(CDNQueryStrings[0]), jsii.String(CDNQueryStrings[1]), jsii.String(CDNQueryStrings[2]), jsii.String(CDNQueryStrings[3])),
		HeaderBehavior:             awscloudfront.CacheHeaderBehavior_None(),
		CookieBehavior:             awscloudfront.CacheCookieBehavior_None(),
		EnableAcceptEncodingGzip:   jsii.Bool(true),
		EnableAcceptEncodingBrotli: jsii.Bool(true),
	})
	headers := awscloudfront.NewResponseHeadersPolicy(b.s.Stack, jsii.String("PublicReadsHeaders"), &awscloudfront.ResponseHeadersPolicyProps{
		ResponseHeadersPolicyName: b.name("public-reads"),
		SecurityHeadersBehavior: &awscloudfront.ResponseSecurityHeadersBehavior{
			StrictTransportSecurity: &awscloudfront.ResponseHeadersStrictTransportSecurity{
				AccessControlMaxAge: awscdk.Duration_Days(jsii.Number(365)), IncludeSubdomains: jsii.Bool(true), Override: jsii.Bool(true),
			},
			ContentTypeOptions: &awscloudfront.ResponseHeadersContentTypeOptions{Override: jsii.Bool(true)},
		},
		// The cache key holds no header, so CloudFront never sends the
		// browser's Origin to the API, and the API's own CORS answer (which
		// needs it) never comes back: the edge adds the CORS headers itself,
		// for the stage's origins, per request (a cached answer is shared by
		// every origin). A shop's pages read products and search from their
		// own origin with a plain fetch; ETag is exposed to them.
		CorsBehavior: &awscloudfront.ResponseHeadersCorsBehavior{
			AccessControlAllowOrigins:     jsii.Strings(b.cfg.CORSOrigins...),
			AccessControlAllowMethods:     jsii.Strings("GET", "HEAD"),
			AccessControlAllowHeaders:     jsii.Strings("If-None-Match"),
			AccessControlExposeHeaders:    jsii.Strings("ETag"),
			AccessControlAllowCredentials: jsii.Bool(false),
			AccessControlMaxAge:           awscdk.Duration_Seconds(jsii.Number(600)),
			OriginOverride:                jsii.Bool(true),
		},
	})
	public := &awscloudfront.BehaviorOptions{
		Origin:                origin,
		AllowedMethods:        awscloudfront.AllowedMethods_ALLOW_GET_HEAD(),
		CachedMethods:         awscloudfront.CachedMethods_CACHE_GET_HEAD(),
		ViewerProtocolPolicy:  awscloudfront.ViewerProtocolPolicy_HTTPS_ONLY,
		CachePolicy:           cache,
		ResponseHeadersPolicy: headers,
		Compress:              jsii.Bool(true),
	}
	notFound := awscloudfront.NewFunction(b.s.Stack, jsii.String("CdnNotFound"), &awscloudfront.FunctionProps{
		FunctionName: b.name("cdn-not-found"),
		Comment:      jsii.String("answers 404 for every path the CDN does not serve"),
		Runtime:      awscloudfront.FunctionRuntime_JS_2_0(),
		Code: awscloudfront.FunctionCode_FromInline(jsii.String(
			`function handler(event) { return { statusCode: 404, statusDescription: "Not Found", ` +
				`headers: { "content-type": { value: "application/json" }, "cache-control": { value: "no-store" } }, ` +
				`body: { encoding: "text", data: "{\"message\":\"Not Found\"}" } }; }`)),
	})
	priceClass := awscloudfront.PriceClass_PRICE_CLASS_100
	if b.cfg.CDNAllEdges {
		priceClass = awscloudfront.PriceClass_PRICE_CLASS_ALL
	}
	additional := map[string]*awscloudfront.BehaviorOptions{}
	for _, p := range CDNPaths {
		additional[p] = public
	}
	props := &awscloudfront.DistributionProps{
		Comment: jsii.String(*b.name("public reads")),
		DefaultBehavior: &awscloudfront.BehaviorOptions{
			Origin:               origin,
			AllowedMethods:       awscloudfront.AllowedMethods_ALLOW_GET_HEAD(),
			ViewerProtocolPolicy: awscloudfront.ViewerProtocolPolicy_HTTPS_ONLY,
			CachePolicy:          awscloudfront.CachePolicy_CACHING_DISABLED(),
			FunctionAssociations: &[]*awscloudfront.FunctionAssociation{{
				Function: notFound, EventType: awscloudfront.FunctionEventType_VIEWER_REQUEST,
			}},
		},
		AdditionalBehaviors: &additional,
		PriceClass:          priceClass,
		HttpVersion:         awscloudfront.HttpVersion_HTTP2_AND_3,
		EnableIpv6:          jsii.Bool(true),
	}
	if b.cfg.CDNDomain != "" {
		// A name of our own, so a security policy of our own: TLS 1.2 and
		// later with forward-secret ciphers, SNI only (no dedicated IPs).
		props.DomainNames = jsii.Strings(b.cfg.CDNDomain)
		props.Certificate = awscertificatemanager.Certificate_FromCertificateArn(b.s.Stack, jsii.String("CdnCertificate"), jsii.String(b.cfg.CDNCertificateArn))
		props.MinimumProtocolVersion = awscloudfront.SecurityPolicyProtocol_TLS_V1_2_2021
		props.SslSupportMethod = awscloudfront.SSLMethod_SNI
	}
	dist := awscloudfront.NewDistribution(b.s.Stack, jsii.String("Cdn"), props)
	b.cdnDist = dist
	host := dist.DistributionDomainName()
	if b.cfg.CDNDomain != "" {
		host = jsii.String(b.cfg.CDNDomain)
	}
	awscdk.NewCfnOutput(b.s.Stack, jsii.String(OutputCDNURL), &awscdk.CfnOutputProps{
		Value:       awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("https://"), host}),
		Description: jsii.String("CDN in front of the public GET routes (products, search)"),
	})
}
