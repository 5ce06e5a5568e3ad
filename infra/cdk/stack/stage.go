package stack

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Stage names.
const (
	Dev  = "dev"
	Prod = "prod"
)

// Config is what differs between stages: names, retention, removal policies and
// capacity. Everything else is the same in every stage.
type Config struct {
	// Stage is dev or prod.
	Stage string
	// Name prefixes every physical name: stack, tables, functions, queues.
	Name string
	// DeletionProtection guards the tables against a DeleteTable call.
	DeletionProtection bool
	// RetainData keeps tables, user pool and search domain when the stack is
	// deleted. The archive bucket is retained in every stage.
	RetainData bool
	// LogRetention is how long function, API and search logs are kept.
	LogRetention awslogs.RetentionDays
	// ReservedConcurrency caps functions by name. The stream processors get a
	// reservation in prod so that an API spike cannot take the account's
	// concurrency from them and let the streams' iterator age grow; so does
	// the token trigger, which every sign-in and refresh waits for.
	ReservedConcurrency map[string]int
	// APIProvisionedConcurrency keeps that many API environments initialized
	// on its live alias (0: none); docs/decisions.md has the cold start.
	APIProvisionedConcurrency int
	// APIDeployment is the CodeDeploy configuration that shifts the API's
	// traffic to a new version (LambdaDeploymentConfig names).
	APIDeployment string
	// APIRateLimit and APIBurstLimit throttle the HTTP API's default stage.
	APIRateLimit, APIBurstLimit int
	// UserPoolPlus puts the user pool on Cognito's Plus plan with threat
	// protection enforced (compromised credentials, risky sign-ins).
	UserPoolPlus bool
	// CDNAllEdges serves the CDN from every CloudFront edge location, not
	// only North America's and Europe's (price class 100).
	CDNAllEdges bool
	// CDNDomain is the CDN's own host name (the cdnDomain context), served
	// with CDNCertificateArn, an ACM certificate of us-east-1 for it, under
	// the TLSv1.2_2021 security policy. With none the CDN is reached at its
	// *.cloudfront.net name, whose certificate CloudFront fixes at TLSv1.
	CDNDomain, CDNCertificateArn string
	// CORSOrigins are the browser origins the API answers.
	CORSOrigins []string
	// Search sizes the OpenSearch domain.
	Search SearchCapacity
	// ArchiveInfrequentAfterDays and ArchiveGlacierAfterDays move archived
	// objects to cheaper storage classes.
	ArchiveInfrequentAfterDays, ArchiveGlacierAfterDays int
	// PITRRecoveryDays is how many days back point-in-time recovery can
	// restore a table (1 to 35). Its price does not depend on it.
	PITRRecoveryDays int
	// MaxThroughput caps the on-demand request units a second of every table
	// and every global index, so that a runaway (a loop in a function, an
	// operator command, a replay) costs at most that much an hour instead of
	// DynamoDB's per-table quota (docs/deploy.md, "Sale day").
	MaxThroughput Throughput
	// TraceSampleRatio is the share of new traces kept (OTEL_TRACES_SAMPLER_ARG,
	// "0" to "1"); a request that comes with a sampled traceparent is kept
	// whatever it is (parent-based).
	TraceSampleRatio string
	// SaleWarmThroughput pre-warms tables and global indexes for a sale, by
	// table or table.index (the saleWarmThroughput context); a warmed
	// direction's cap is lifted to its warm throughput (MaxThroughputOf).
	SaleWarmThroughput map[string]Throughput
}

// SearchCapacity sizes the OpenSearch domain.
type SearchCapacity struct {
	DataNodeType   string
	DataNodes      int
	MasterNodeType string
	// MasterNodes is 0 for no dedicated master nodes.
	MasterNodes int
	// AvailabilityZones is 1 for no zone awareness.
	AvailabilityZones int
	VolumeGiB         int
}

// RemovalPolicy is the removal policy of stateful resources other than the
// archive. Retained data is retained except on create
// (RETAIN_ON_UPDATE_OR_DELETE, CloudFormation's RetainExceptOnCreate): a first
// deploy that fails and rolls back leaves no table, pool, domain or secret
// behind, whose fixed name would make the next create fail with
// AlreadyExists.
func (c Config) RemovalPolicy() awscdk.RemovalPolicy {
	if c.RetainData {
		return awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE
	}
	return awscdk.RemovalPolicy_DESTROY
}

// TablePrefix is the prefix of the physical table names (tables.Physical).
func (c Config) TablePrefix() string { return c.Name + "-" }

// Stages returns the stage names, sorted.
func Stages() []string {
	names := make([]string, 0, len(stages))
	for n := range stages {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// StageConfig returns the configuration of a stage, or an error naming the stages.
func StageConfig(stage string) (Config, error) {
	c, ok := stages[stage]
	if !ok {
		return Config{}, fmt.Errorf("stage %q: unknown, want one of %v", stage, Stages())
	}
	return c, nil
}

var stages = map[string]Config{
	Dev: {
		Stage:               Dev,
		Name:                "shopstream-dev",
		DeletionProtection:  false,
		RetainData:          false,
		LogRetention:        awslogs.RetentionDays_ONE_WEEK,
		ReservedConcurrency: map[string]int{},
		APIDeployment:       "Canary10Percent5Minutes",
		APIRateLimit:        routes.DevThrottle.Rate,
		APIBurstLimit:       routes.DevThrottle.Burst,
		CORSOrigins:         []string{"http://localhost:5173", "http://127.0.0.1:5173"},
		Search: SearchCapacity{
			DataNodeType:      "t3.small.search",
			DataNodes:         1,
			AvailabilityZones: 1,
			VolumeGiB:         10,
		},
		ArchiveInfrequentAfterDays: 30,
		ArchiveGlacierAfterDays:    90,
		PITRRecoveryDays:           7,
		MaxThroughput:              Throughput{Reads: 1000, Writes: 1000},
		TraceSampleRatio:           "1",
	},
	Prod: {
		Stage:                     Prod,
		Name:                      "shopstream-prod",
		DeletionProtection:        true,
		RetainData:                true,
		LogRetention:              awslogs.RetentionDays_THREE_MONTHS,
		ReservedConcurrency:       prodReservedConcurrency(),
		UserPoolPlus:              true,
		CDNAllEdges:               true,
		APIProvisionedConcurrency: 5,
		APIDeployment:             "Linear10PercentEvery1Minute",
		APIRateLimit:              routes.ProdThrottle.Rate,
		APIBurstLimit:             routes.ProdThrottle.Burst,
		CORSOrigins:               []string{"https://shopstream.example.com"},
		Search: SearchCapacity{
			DataNodeType:      "r6g.large.search",
			DataNodes:         2,
			MasterNodeType:    "m6g.large.search",
			MasterNodes:       3,
			AvailabilityZones: 2,
			VolumeGiB:         50,
		},
		ArchiveInfrequentAfterDays: 30,
		ArchiveGlacierAfterDays:    90,
		PITRRecoveryDays:           35,
		MaxThroughput:              Throughput{Reads: 12000, Writes: 4000},
		TraceSampleRatio:           "0.05",
	},
}

// ContextConfig returns the configuration the app's context asks for: the
// stage (-c stage=prod, dev when none) with the reservedConcurrency,
// saleWarmThroughput, cdnDomain and cdnCertificateArn settings applied. A setting it cannot read is an error
// naming it, and synth stops there.
func ContextConfig(scope constructs.Construct) (Config, error) {
	cfg, err := StageConfig(ContextString(scope, "stage", Dev))
	if err != nil {
		return Config{}, err
	}
	// An account whose concurrency quota is below the stage's reservations
	// deploys with -c reservedConcurrency=none (or its own pairs).
	if v := ContextString(scope, "reservedConcurrency", ""); v != "" {
		if cfg.ReservedConcurrency, err = ParseReservedConcurrency(v); err != nil {
			return Config{}, err
		}
	}
	if v := ContextString(scope, SaleWarmContext, ""); v != "" {
		if cfg.SaleWarmThroughput, err = ParseSaleWarmThroughput(v); err != nil {
			return Config{}, err
		}
	}
	cfg.CDNDomain, cfg.CDNCertificateArn, err = ParseCDNDomain(ContextString(scope, CDNDomainContext, ""), ContextString(scope, CDNCertificateContext, ""))
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// The context settings that give the CDN its own host name and certificate.
const (
	CDNDomainContext      = "cdnDomain"
	CDNCertificateContext = "cdnCertificateArn"
)

var (
	hostName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+([a-z]{2,63}|xn--[a-z0-9-]{1,59})$`)
	// CloudFront takes only ACM certificates of us-east-1 ("Requirements
	// for using SSL/TLS certificates with CloudFront"), in the aws
	// partition (China's and GovCloud's have no CloudFront with ACM).
	cloudFrontCertificate = regexp.MustCompile(`^arn:aws:acm:us-east-1:[0-9]{12}:certificate/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// ParseCDNDomain reads the cdnDomain and cdnCertificateArn settings: both
// or neither, a lower-case host name of at most 253 characters, and an ACM
// certificate of us-east-1 (the only region whose certificates CloudFront
// serves).
func ParseCDNDomain(domain, cert string) (string, string, error) {
	switch {
	case domain == "" && cert == "":
		return "", "", nil
	case domain == "" || cert == "":
		return "", "", fmt.Errorf("%s and %s go together: got %q and %q", CDNDomainContext, CDNCertificateContext, domain, cert)
	case len(domain) > 253 || !hostName.MatchString(domain):
		return "", "", fmt.Errorf("%s %q: want a lower-case host name such as shop.example.com", CDNDomainContext, domain)
	case !cloudFrontCertificate.MatchString(cert):
		return "", "", fmt.Errorf("%s %q: want the ARN of an ACM certificate in us-east-1 (arn:aws:acm:us-east-1:<account>:certificate/<id>), the only region CloudFront takes certificates from", CDNCertificateContext, cert)
	}
	return domain, cert, nil
}

// ContextString is the context setting key of the scope's tree as a
// string, or fallback when it is unset or empty.
func ContextString(scope constructs.Construct, key, fallback string) string {
	if v, ok := scope.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
		return v
	}
	return fallback
}

// ParseReservedConcurrency reads the reservedConcurrency context setting:
// "none" for no reservation at all (accounts whose concurrency quota is too
// low for the stage's), or comma-separated function=count pairs
// ("counters=20,stream-indexer=10,archiver=5,pre-token=10") that replace
// the stage's.
func ParseReservedConcurrency(s string) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(s) == "none" {
		return out, nil
	}
	known := map[string]bool{TokenFunction: true}
	for _, fn := range wiring.Functions() {
		known[fn] = true
	}
	for _, pair := range strings.Split(s, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return nil, fmt.Errorf("reservedConcurrency %q: want none or function=count pairs, got %q", s, pair)
		}
		if !known[name] {
			return nil, fmt.Errorf("reservedConcurrency %q: unknown function %q, want one of %v", s, name, append(wiring.Functions(), TokenFunction))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("reservedConcurrency %q: %s given twice", s, name)
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("reservedConcurrency %q: count of %s must be a whole number ≥ 0", s, name)
		}
		out[name] = n
	}
	return out, nil
}

// prodReservedConcurrency is prod's: the stream functions'
// (wiring.ProdReservedConcurrency) and the token trigger's.
func prodReservedConcurrency() map[string]int {
	m := wiring.ProdReservedConcurrency()
	m[TokenFunction] = 20
	return m
}
