// Package system runs the whole of shopstream on one machine: the local AWS
// endpoints, the tables, the API behind the API Gateway emulation, and the
// stream processors behind the event-source-mapping emulation, all wired from
// the same definitions (shared/tables, shared/wiring, shared/routes) and the
// same environment variables the functions read on AWS.
package system

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/esm"
	"github.com/shopstream/shopstream/infra/local/lambdart"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/migrations"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/tracing"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Config configures the system. Zero values suit tests: free ports, in memory.
type Config struct {
	Stack endpoints.Config
	// APIAddr is the API's listen address; "" means a free 127.0.0.1 port.
	APIAddr string
	// TablePrefix prefixes every physical table name.
	TablePrefix string
	// JWTSecret verifies dev tokens (LOCAL_JWT_SECRET).
	JWTSecret []byte
	// Env holds the functions' settings that are not wiring: CART_TTL,
	// ORDER_RETENTION, CURSOR_SECRET, ARCHIVE_BUCKET.
	Env map[string]string
	// PollInterval is how often the event-source mappings poll the streams.
	PollInterval time.Duration
	// FailureBucket is the mappings' on-failure destination (FAILURE_BUCKET,
	// default DefaultFailureBucket), created at start.
	FailureBucket string
	// Mappings replaces shared/wiring's mappings (drills with short retry
	// settings); nil runs wiring.Mappings().
	Mappings []wiring.Mapping
	// DuplicateEvery delivers every n-th batch a mapping's function completes
	// a second time (esm.Config.DuplicateEvery; 1 every batch): 0 means
	// DefaultDuplicateEvery, a negative number never.
	DuplicateEvery int
	// StreamPartitions is how many shards the mappings read each table's
	// stream as (esm.Config.Partitions): 0 means DefaultStreamPartitions, 1
	// one shard, as DynamoDB Local keeps it.
	StreamPartitions int
	// ReservedConcurrency caps the stream functions' invocations at once
	// (esm.Config.Reserved): nil is prod's (wiring.ProdReservedConcurrency),
	// an empty map none.
	ReservedConcurrency map[string]int
	// NoMappings builds the stream functions but starts no event-source
	// mapping: the caller feeds the functions itself.
	NoMappings bool
	// APICanary, when set, serves a share of the API's requests with
	// another build of the API function (an earlier release's), as a
	// Lambda alias's routing configuration does during a canary.
	APICanary *Canary
	// APIThrottle is the gateway's default route throttling (each route's
	// token bucket, as on API Gateway); a zero rate or burst is
	// routes.ProdThrottle's, what the deployed shop's clients meet, in make
	// run and in every test that starts the system. NoAPIThrottle turns it
	// off: only for a benchmark that compares with a release whose stack
	// had none.
	APIThrottle   routes.Throttle
	NoAPIThrottle bool
	Logger        *slog.Logger
	// Metrics receives the functions' EMF lines; nil discards them.
	Metrics io.Writer
}

// DefaultJWTSecret is LOCAL_JWT_SECRET's default.
const DefaultJWTSecret = "shopstream-local-secret"

// DefaultDuplicateEvery is how often the local event-source mappings deliver
// a completed batch again unless told otherwise (DUPLICATE_BATCH_EVERY): AWS
// promises at least once, so every stream function meets duplicates locally
// too, in every test and in make run.
const DefaultDuplicateEvery = 10

// DefaultStreamPartitions is how many shards the local mappings read a
// table's stream as. On AWS a stream's shards follow its table's partitions
// and Lambda runs a batch of each at once; a new on-demand table takes 4,000
// write units at once, 1,000 a partition (on-demand-capacity-mode, "Initial
// throughput"), so it has at least four partitions (STREAM_PARTITIONS).
const DefaultStreamPartitions = 4

// DefaultFailureBucket is FAILURE_BUCKET's local default.
const DefaultFailureBucket = "shopstream-failures"

// Canary is a build of the API function that serves Percent of the API's
// requests beside this tree's API.
type Canary struct {
	// Bootstrap is the function's binary, built for this machine
	// (releases.Build of ./functions/api with the lambda.norpc tag).
	Bootstrap string
	// Percent of the requests it serves (0 to 100).
	Percent int
	// Environments is how many requests it serves at once (default 8).
	Environments int
	// Output receives its processes' logs (default discarded), each JSON
	// line with "functionVersion":"canary" and, when Build is set,
	// "build" first: on AWS a version's lines go to log streams named for
	// it, and here they share one output with this tree's.
	Output io.Writer
	// Build names the canary's code, its commit.
	Build string
}

// System is the running product.
type System struct {
	*endpoints.Stack
	APIURL string
	// Poller runs the event-source mappings (nil with NoMappings).
	Poller *esm.Poller
	// Functions are the stream functions by name, as the mappings invoke them.
	Functions map[string]esm.Invoker
	// Env is the environment every function sees, as on AWS.
	Env map[string]string
	// FailureBucket holds the batches the mappings gave up on.
	FailureBucket string
	// Pending names the data migrations the tables needed at start.
	Pending []string
	// APIRouting splits the API's requests between this tree's API
	// (Primary) and the canary's build (Additional); nil without a canary.
	APIRouting *apigw.Weighted
	// Tracing is each function's tracer by name.
	Tracing map[string]*tracing.Tracing
	// apiEnvironments runs this tree's API function, one request at a
	// time an environment, as Lambda does.
	apiEnvironments *environments
	closers         []func() error
}

// Start runs everything and returns when the API answers and the processors poll.
func Start(ctx context.Context, cfg Config) (sys *System, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.JWTSecret) == 0 {
		cfg.JWTSecret = []byte(DefaultJWTSecret)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = io.Discard
	}
	// Every function's metric lines go to one writer, whole lines at a
	// time, as each Lambda environment's go to its own log stream.
	cfg.Metrics = &lineWriter{w: cfg.Metrics}
	env := map[string]string{
		envcontract.CursorSecret:  envcontract.DevCursorSecret,
		envcontract.ArchiveBucket: envcontract.LocalArchiveBucket,
	}
	for k, v := range cfg.Env {
		if v != "" {
			env[k] = v
		}
	}
	if cfg.FailureBucket == "" {
		cfg.FailureBucket = DefaultFailureBucket
	}
	cfg.Stack.Buckets = append(cfg.Stack.Buckets, env[envcontract.ArchiveBucket], cfg.FailureBucket)
	st, err := endpoints.Start(ctx, cfg.Stack)
	if err != nil {
		return nil, err
	}
	s := &System{Stack: st, Env: env, FailureBucket: cfg.FailureBucket}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := tables.Create(ctx, st.DynamoDB(), cfg.TablePrefix); err != nil {
		return nil, err
	}
	for _, t := range tables.All() {
		env[t.EnvVar] = tables.Physical(cfg.TablePrefix, t.Name)
	}
	env[envcontract.SearchURL] = st.SearchURL
	// The functions send their spans to the stack's receiver unless the
	// standard variables point them at another OTLP tool.
	if env[envcontract.OTLPEndpoint] == "" && env[envcontract.OTLPTracesEndpoint] == "" {
		env[envcontract.OTLPEndpoint] = st.OTLPURL
	}
	if env[envcontract.SpanBatchDelay] == "" {
		env[envcontract.SpanBatchDelay] = "500"
	}
	getenv := func(k string) string { return env[k] }
	if err := s.tracers(ctx, getenv); err != nil {
		return nil, err
	}

	api, err := s.api(getenv, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.APICanary != nil {
		if api, err = s.canary(api, cfg); err != nil {
			return nil, err
		}
	}
	if err := s.notePending(ctx, cfg); err != nil {
		return nil, err
	}
	if s.APIURL, err = st.Serve(cfg.APIAddr, gateway(api, cfg)); err != nil {
		return nil, fmt.Errorf("start api endpoint: %w", err)
	}
	if err := s.processors(ctx, getenv, cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// api builds the API handler exactly as functions/api does, but with local
// clients, from the variables of its contract only (shared/envcontract).
func (s *System) api(getenv func(string) string, cfg Config) (apigw.Invoker, error) {
	apiCfg, err := httpapi.ConfigFromEnv(envcontract.Of(wiring.API).Only(getenv))
	if err != nil {
		return nil, fmt.Errorf("api config: %w", err)
	}
	tr := s.Tracing["api"]
	db := s.DynamoDB()
	if tr.On() {
		db = dynamodb.New(db.Options(), tr.DynamoDB(), tracing.Stamp(tracing.StreamedTables(apiCfg.Tables)...))
	}
	search := &http.Client{Timeout: 5 * time.Second, Transport: tr.Transport(nil)}
	logger := tracing.Logger(cfg.Logger.With("function", "api"))
	// Each environment builds its handler as functions/api's main does at
	// its start. Shared: the clients' connection pools, and the DynamoDB
	// client's retry state (the SDK's retry quota), which on Lambda each
	// environment has to itself; shared, a burst of throttles spends one
	// quota for all, which is no kinder.
	s.apiEnvironments = newEnvironments(func() apigw.Invoker {
		return httpapi.New(httpapi.Deps{
			Store:   store.New(db, store.Config{Tables: apiCfg.Tables, CartTTL: apiCfg.CartTTL, OrderRetention: apiCfg.OrderRetention, Logger: logger}),
			Cursors: cursor.NewSigner(apiCfg.CursorSecret),
			Search:  &productsearch.Client{URL: apiCfg.SearchURL, HTTP: search},
			Logger:  logger,
			Metrics: cfg.Metrics,
			Tracing: tr,
		})
	})
	return s.apiEnvironments, nil
}

// APIEnvironments is how many execution environments the API function has
// started so far.
func (s *System) APIEnvironments() int {
	if s.apiEnvironments == nil {
		return 0
	}
	return s.apiEnvironments.Started()
}

// tracers builds each function's tracer from the environment, as the
// function does on AWS (tracing.ConfigFromEnv).
func (s *System) tracers(ctx context.Context, getenv func(string) string) error {
	s.Tracing = map[string]*tracing.Tracing{}
	for _, fn := range []string{"api", wiring.Counters, wiring.StreamIndexer, wiring.Archiver} {
		cfg, err := tracing.ConfigFromEnv(fn, getenv)
		if err != nil {
			return fmt.Errorf("%s: tracing: %w", fn, err)
		}
		cfg.Service = fn // one service per function, as on AWS
		t, err := tracing.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
		s.Tracing[fn] = t
		s.closers = append(s.closers, func() error {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = t.Shutdown(sctx)
			return nil
		})
	}
	return nil
}

// FlushTraces sends every span the functions ended so far to the receiver.
func (s *System) FlushTraces(ctx context.Context) error {
	for _, t := range s.Tracing {
		if err := t.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// canary starts the canary's build of the API function in its own
// environments, with the environment this tree's API gets plus the AWS
// settings a Lambda environment holds, and routes its share of requests
// to it.
func (s *System) canary(api apigw.Invoker, cfg Config) (apigw.Invoker, error) {
	c := cfg.APICanary
	n := c.Environments
	if n <= 0 {
		n = 8
	}
	out := c.Output
	if out == nil {
		out = io.Discard
	} else {
		attrs := `"functionVersion":"canary"`
		if c.Build != "" {
			b, _ := json.Marshal(c.Build)
			attrs += `,"build":` + string(b)
		}
		out = &lambdart.Tagged{Out: out, Attrs: attrs}
	}
	env := []string{
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.DynamoDBURL,
		"AWS_LAMBDA_FUNCTION_NAME=api", "AWS_LAMBDA_FUNCTION_VERSION=canary", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		// The functions' logging configuration (JSON, at INFO), as the
		// CDK app sets it and Lambda passes it on.
		"AWS_LAMBDA_LOG_FORMAT=JSON", "AWS_LAMBDA_LOG_LEVEL=INFO",
		"TZ=:UTC", "PATH=/usr/local/bin:/usr/bin/:/bin",
	}
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	pool, err := lambdart.StartPool("api", c.Bootstrap, env, n, 29*time.Second, out)
	if err != nil {
		return nil, fmt.Errorf("start the api canary: %w", err)
	}
	s.closers = append(s.closers, pool.Close)
	s.APIRouting = apigw.NewWeighted(api, bootstrapAPI{pool}, c.Percent)
	return s.APIRouting, nil
}

// bootstrapAPI is the API function running as its own processes: each
// request goes to it as the JSON event API Gateway sends.
type bootstrapAPI struct{ pool *lambdart.Pool }

func (b bootstrapAPI) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	res, err := b.pool.Invoke(ctx, raw)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if res.Err != nil {
		return events.APIGatewayV2HTTPResponse{}, res.Err
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(res.Response, &resp); err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("canary response: %w", err)
	}
	return resp, nil
}

// notePending says, at start, which data migrations the tables need: a
// DATA_DIR written by an earlier release serves as it is (every reader
// accepts the shapes it left), and `make migrate` upgrades it.
func (s *System) notePending(ctx context.Context, cfg Config) error {
	names := map[string]string{}
	for _, t := range tables.All() {
		names[t.Name] = tables.Physical(cfg.TablePrefix, t.Name)
	}
	pending, err := migrations.Pending(ctx, s.DynamoDB(), names)
	if err != nil {
		return fmt.Errorf("check for data migrations: %w", err)
	}
	s.Pending = pending
	if len(pending) > 0 {
		cfg.Logger.WarnContext(ctx, "the tables hold items of an earlier release: run make migrate (with this TABLE_PREFIX) to upgrade them; they are served as they are meanwhile",
			"migrations", pending, "command", "make migrate")
	}
	return nil
}

// Close stops the processors, the API and the stack.
func (s *System) Close() error {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			return err
		}
	}
	return s.Stack.Close()
}
