// Package envcontract holds each function's environment contract: the
// variables a function reads, which tables it gets the names of, and the
// defaults of the settings it may be given. The functions read their
// environment through it, and the local stack, the operator commands,
// template.yaml's checks and the CDK app give each function the variables it
// declares, and no other.
package envcontract

import (
	"fmt"
	"sort"
	"time"

	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Variables that are not table names (a table's is its tables.Table.EnvVar).
const (
	// ArchiveBucket is the S3 bucket of the TTL archive.
	ArchiveBucket = "ARCHIVE_BUCKET"
	// SearchURL is the search endpoint, https://<domain endpoint> on AWS;
	// the API serves no search without it.
	SearchURL = "SEARCH_URL"
	// SearchSigV4 forces SigV4 signing of search requests on ("true") or off
	// ("false"); unset, requests to an AWS endpoint are signed
	// (productsearch.Signed).
	SearchSigV4 = "SEARCH_SIGV4"
	// CursorSecret is the key that signs the API's page cursors where no
	// secret holds it (the local stack).
	CursorSecret = "CURSOR_SECRET"
	// CursorSecretARN names the Secrets Manager secret holding the cursor
	// key on AWS; the API reads it at init.
	CursorSecretARN = "CURSOR_SECRET_ARN"
	// CartTTL is how long a cart lives after its last touch (a Go duration).
	CartTTL = "CART_TTL"
	// OrderRetention is how long a closed order stays before TTL archives it
	// (a Go duration).
	OrderRetention = "ORDER_RETENTION"
	// DynamoDBEndpoint, S3Endpoint and Endpoint are the AWS SDK's endpoint
	// variables: empty on AWS, the local stack's endpoints in a local run.
	DynamoDBEndpoint = "AWS_ENDPOINT_URL_DYNAMODB"
	S3Endpoint       = "AWS_ENDPOINT_URL_S3"
	Endpoint         = "AWS_ENDPOINT_URL"
)

// Defaults of the settings, and the local stack's values where AWS gives
// the function its own.
// OpenTelemetry's standard variables (shared/tracing). Every function is
// given the first three on AWS; the others are local settings: another OTLP
// tool, the protocol, tracing off, the export delay.
const (
	OTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	TracesSampler      = "OTEL_TRACES_SAMPLER"
	TracesSamplerArg   = "OTEL_TRACES_SAMPLER_ARG"
	OTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	OTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	OTelDisabled       = "OTEL_SDK_DISABLED"
	OTelServiceName    = "OTEL_SERVICE_NAME"
	SpanBatchDelay     = "OTEL_BSP_SCHEDULE_DELAY"
)

// Tracing names every OpenTelemetry variable a function reads.
func Tracing() []string {
	return []string{OTLPTracesEndpoint, TracesSampler, TracesSamplerArg, OTLPEndpoint, OTLPProtocol, OTelDisabled, OTelServiceName, SpanBatchDelay}
}

const (
	// DefaultCartTTL is CART_TTL's default, a week.
	DefaultCartTTL = 7 * 24 * time.Hour
	// DefaultOrderRetention is ORDER_RETENTION's default, a year.
	DefaultOrderRetention = 365 * 24 * time.Hour
	// DevCursorSecret is CURSOR_SECRET in the local stack; a deployed stage
	// keeps its key in the secret CURSOR_SECRET_ARN names.
	DevCursorSecret = "shopstream-local-cursor-secret"
	// LocalArchiveBucket is ARCHIVE_BUCKET in the local stack, and what the
	// operator commands read against it.
	LocalArchiveBucket = "shopstream-archive"
)

// Contract is one function's environment.
type Contract struct {
	// Function is the function's name (shared/wiring).
	Function string
	// Tables are the tables whose data the function reads or writes: it
	// gets each one's name in the table's EnvVar.
	Tables []string
	// StreamTables are the tables whose streams feed the function
	// (shared/wiring): it gets their names, to tell records apart, not
	// access to their data.
	StreamTables []string
	// Archive gives the function ARCHIVE_BUCKET.
	Archive bool
	// Search gives the function SEARCH_URL, and lets it read SEARCH_SIGV4.
	Search bool
	// CursorSecret gives the function CURSOR_SECRET_ARN on AWS, and
	// CURSOR_SECRET, the key itself, in a local run.
	CursorSecret bool
	// Settings are the variables the function reads with a default, which
	// no deployment sets.
	Settings []string
}

// streamTables returns the tables whose streams feed fn (shared/wiring), sorted.
func streamTables(fn string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range wiring.Mappings() {
		if m.Function == fn && !seen[m.Table] {
			seen[m.Table] = true
			out = append(out, m.Table)
		}
	}
	sort.Strings(out)
	return out
}

// All returns every function's contract, in wiring.Functions' order.
func All() []Contract {
	return []Contract{
		{
			Function: wiring.API,
			Tables: []string{tables.Users, tables.UserEmails, tables.Products, tables.ProductStock,
				tables.Reviews, tables.Carts, tables.Orders, tables.IdempotencyKeys},
			Search:       true,
			CursorSecret: true,
			Settings:     []string{CartTTL, OrderRetention},
		},
		{
			Function:     wiring.Counters,
			Tables:       []string{tables.Users, tables.Products, tables.CounterEvents},
			StreamTables: streamTables(wiring.Counters),
		},
		{
			Function:     wiring.StreamIndexer,
			Search:       true,
			StreamTables: streamTables(wiring.StreamIndexer),
		},
		{
			Function:     wiring.Archiver,
			Archive:      true,
			StreamTables: streamTables(wiring.Archiver),
		},
	}
}

// Of returns function fn's contract; it panics for a name that is not a
// function's, a programming error.
func Of(fn string) Contract {
	for _, c := range All() {
		if c.Function == fn {
			return c
		}
	}
	panic(fmt.Sprintf("envcontract: no function %q", fn))
}

// tableVars returns the variables of the contract's tables, sorted and once each.
func (c Contract) tableVars() []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range append(append([]string(nil), c.Tables...), c.StreamTables...) {
		t, err := tables.ByName(name)
		if err != nil {
			panic(fmt.Sprintf("envcontract: function %s: %v", c.Function, err))
		}
		if !seen[t.EnvVar] {
			seen[t.EnvVar] = true
			out = append(out, t.EnvVar)
		}
	}
	return out
}

// Deployed returns the variables a deployment gives the function (the CDK
// app and template.yaml), sorted.
func (c Contract) Deployed() []string {
	out := c.tableVars()
	if c.Archive {
		out = append(out, ArchiveBucket)
	}
	if c.Search {
		out = append(out, SearchURL)
	}
	if c.CursorSecret {
		out = append(out, CursorSecretARN)
	}
	// Every function traces: X-Ray's OTLP endpoint and the stage's sampling.
	out = append(out, OTLPTracesEndpoint, TracesSampler, TracesSamplerArg)
	sort.Strings(out)
	return out
}

// LocalOnly returns the variables template.yaml declares empty, for local
// runs only (`sam local invoke --env-vars` sets only declared ones): the
// AWS SDK endpoint of each service the function calls through the SDK
// (DynamoDB for its tables, S3 for the archive; the SDK ignores an empty
// one) and the cursor key itself. Sorted.
func (c Contract) LocalOnly() []string {
	var out []string
	if c.CursorSecret {
		out = append(out, CursorSecret)
	}
	if len(c.Tables) > 0 {
		out = append(out, DynamoDBEndpoint)
	}
	if c.Archive {
		out = append(out, S3Endpoint)
	}
	sort.Strings(out)
	return out
}

// Reads returns every variable the function may read, sorted: Deployed,
// LocalOnly, its Settings, SEARCH_SIGV4 with Search and the SDK's general
// endpoint with Archive (the archiver addresses a local S3 by path).
func (c Contract) Reads() []string {
	out := append(append(c.Deployed(), c.LocalOnly()...), c.Settings...)
	out = append(out, OTLPEndpoint, OTLPProtocol, OTelDisabled, OTelServiceName, SpanBatchDelay)
	if c.Search {
		out = append(out, SearchSigV4)
	}
	if c.Archive {
		out = append(out, Endpoint)
	}
	sort.Strings(out)
	return out
}

// Allows says whether the function may read variable name.
func (c Contract) Allows(name string) bool {
	for _, v := range c.Reads() {
		if v == name {
			return true
		}
	}
	return false
}

// Only returns getenv as the function sees it: the variables of its
// contract, and "" for every other, as on AWS, where it is given no other.
func (c Contract) Only(getenv func(string) string) func(string) string {
	return func(name string) string {
		if !c.Allows(name) {
			return ""
		}
		return getenv(name)
	}
}

// ReadTables reads the physical names of the contract's tables (Tables and
// StreamTables) from their variables; it fails naming the first one unset.
func (c Contract) ReadTables(getenv func(string) string) (tables.Names, error) {
	var n tables.Names
	for _, name := range append(append([]string(nil), c.Tables...), c.StreamTables...) {
		t, err := tables.ByName(name)
		if err != nil {
			return tables.Names{}, err
		}
		v := getenv(t.EnvVar)
		if v == "" {
			return tables.Names{}, fmt.Errorf("table %s: %s is not set", name, t.EnvVar)
		}
		if err := n.Set(name, v); err != nil {
			return tables.Names{}, err
		}
	}
	return n, nil
}

// Duration reads setting name as a positive Go duration, def when unset.
func Duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 168h", name, v)
	}
	return d, nil
}
