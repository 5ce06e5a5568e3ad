// Command local runs the whole of shopstream on one machine: the local AWS
// endpoints (DynamoDB with Streams and TTL, S3, search), the tables, the API
// behind the API Gateway emulation and the stream processors behind the
// event-source-mapping emulation. Ports and settings come from the environment
// (docs/contract.md#1-local-stack).
//
//	go run ./infra/local                      # the whole system
//	go run ./infra/local token -sub u1 [-admin] [-email a@example.com] # a dev JWT for the API
//	go run ./infra/local invoke -e events/x.json -env-vars events/sam-env.json ApiFunction
//	                                          # one function of template.yaml on one event, as sam local invoke
//	go run ./infra/local samples [-clean]     # the items the samples of events/ expect, put in place or taken away
//	go run ./infra/local trace -id <order, review or product id>
//	                                          # that item's trace as a tree, from the running stack's receiver
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/invoke"
	"github.com/shopstream/shopstream/infra/local/releases"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/wiring"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "trace" {
		if err := traceCommand(os.Args[2:], os.Getenv, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "trace:", err)
			os.Exit(2)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "token" {
		if err := token(os.Args[2:], os.Getenv, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "token:", err)
			os.Exit(2)
		}
		return
	}
	// SIGHUP (the terminal closed) stops the stack as Ctrl-C and SIGTERM do:
	// cleanly, DynamoDB Local included.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "invoke" {
		if err := invoke.Command(ctx, os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "invoke:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "samples" {
		if err := invoke.SamplesCommand(ctx, os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "samples:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(os.Getenv("LOG_LEVEL"))}))
	if err := run(ctx, os.Getenv, logger); err != nil {
		logger.Error("local stack", "err", err.Error())
		os.Exit(1)
	}
}

func logLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// settings are the environment's knobs, with the contract's defaults.
type settings struct {
	DynamoDBPort, S3Port, SearchPort, APIPort, OTLPPort int
	DataDir                                             string
	SweepInterval                                       time.Duration
	// DuplicateEvery is system.Config.DuplicateEvery (DUPLICATE_BATCH_EVERY).
	DuplicateEvery int
	// StreamPartitions is system.Config.StreamPartitions (STREAM_PARTITIONS).
	StreamPartitions int
	// ReservedConcurrency is system.Config.ReservedConcurrency
	// (RESERVED_CONCURRENCY): nil is prod's.
	ReservedConcurrency map[string]int
	ArchiveBucket       string
	FailureBucket       string
	TablePrefix         string
	JWTSecret           string
	// Limits are AWS's transaction conflicts and partition throughput.
	Limits ddbfront.Limits
	// FunctionEnv holds the functions' own settings passed through.
	FunctionEnv map[string]string
	// CanaryRef is a git revision whose API serves CanaryPercent of the
	// requests beside this tree's (API_CANARY_REF, API_CANARY_PERCENT).
	CanaryRef     string
	CanaryPercent int
	// APIThrottle is the gateway's default route throttling
	// (API_RATE_LIMIT, API_BURST_LIMIT; prod's unless set); NoAPIThrottle
	// is API_THROTTLING=off.
	APIThrottle   routes.Throttle
	NoAPIThrottle bool
}

// functionSettings are passed through to the functions as they are: every
// function's settings (shared/envcontract), the cursor key and the archive
// bucket, and OpenTelemetry's variables (another OTLP tool, the sampling);
// each function validates its own (durations are Go durations such as 168h).
func functionSettings() []string {
	out := []string{envcontract.CursorSecret, envcontract.ArchiveBucket}
	for _, c := range envcontract.All() {
		out = append(out, c.Settings...)
	}
	return append(out, envcontract.Tracing()...)
}

func load(getenv func(string) string) (settings, error) {
	s := settings{
		DataDir:       getenv("DATA_DIR"),
		ArchiveBucket: or(getenv(envcontract.ArchiveBucket), envcontract.LocalArchiveBucket),
		FailureBucket: or(getenv("FAILURE_BUCKET"), system.DefaultFailureBucket),
		TablePrefix:   getenv("TABLE_PREFIX"),
		JWTSecret:     or(getenv("LOCAL_JWT_SECRET"), system.DefaultJWTSecret),
		FunctionEnv:   map[string]string{},
	}
	for _, k := range functionSettings() {
		s.FunctionEnv[k] = getenv(k)
	}
	s.FunctionEnv[envcontract.ArchiveBucket] = s.ArchiveBucket
	ports := []struct {
		env  string
		def  int
		dest *int
	}{
		{"DYNAMODB_PORT", 8000, &s.DynamoDBPort},
		{"S3_PORT", 9000, &s.S3Port},
		{"SEARCH_PORT", 9200, &s.SearchPort},
		{"API_PORT", 3000, &s.APIPort},
		{"OTLP_PORT", 4318, &s.OTLPPort},
	}
	for _, p := range ports {
		*p.dest = p.def
		if v := getenv(p.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return s, fmt.Errorf("%s=%q: want a port number", p.env, v)
			}
			*p.dest = n
		}
	}
	s.CanaryRef, s.CanaryPercent = getenv("API_CANARY_REF"), 10
	if v := getenv("API_CANARY_PERCENT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return s, fmt.Errorf("API_CANARY_PERCENT=%q: want a whole number from 0 to 100", v)
		}
		s.CanaryPercent = n
	}
	s.SweepInterval = 5 * time.Second
	if v := getenv("TTL_SWEEP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("TTL_SWEEP_INTERVAL=%q: want a positive Go duration such as 5s", v)
		}
		s.SweepInterval = d
	}
	switch v := getenv("DUPLICATE_BATCH_EVERY"); v {
	case "":
	case "off":
		s.DuplicateEvery = -1
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s, fmt.Errorf("DUPLICATE_BATCH_EVERY=%q: want off or a whole number from 1 up (1: every batch twice)", v)
		}
		s.DuplicateEvery = n
	}
	if v := getenv("STREAM_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return s, fmt.Errorf("STREAM_PARTITIONS=%q: want a whole number from 1 to 64 (the shards each table's stream is read as)", v)
		}
		s.StreamPartitions = n
	}
	if v := getenv("RESERVED_CONCURRENCY"); v != "" {
		m, err := parseReserved(v)
		if err != nil {
			return s, err
		}
		s.ReservedConcurrency = m
	}
	if err := loadThrottle(getenv, &s); err != nil {
		return s, err
	}
	return s, loadLimits(getenv, &s.Limits)
}

// loadThrottle reads the API's route throttling: prod's rate and burst
// (routes.ProdThrottle) unless API_RATE_LIMIT or API_BURST_LIMIT say
// otherwise (dev's 50 and 100 rehearse that stage); API_THROTTLING=off turns
// it off, for benchmarks only.
func loadThrottle(getenv func(string) string, s *settings) error {
	switch v := getenv("API_THROTTLING"); v {
	case "", "on":
	case "off":
		s.NoAPIThrottle = true
	default:
		return fmt.Errorf("API_THROTTLING=%q: want on or off", v)
	}
	s.APIThrottle = routes.ProdThrottle
	for _, l := range []struct {
		env  string
		dest *int
	}{{"API_RATE_LIMIT", &s.APIThrottle.Rate}, {"API_BURST_LIMIT", &s.APIThrottle.Burst}} {
		if v := getenv(l.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("%s=%q: want a whole number of requests from 1 up", l.env, v)
			}
			*l.dest = n
		}
	}
	return nil
}

// loadLimits reads AWS's limits: on unless DYNAMODB_LIMITS=off (debugging
// only), with DYNAMODB_TX_WINDOW (a Go duration), PARTITION_WCU and
// PARTITION_RCU (units per second) in place of AWS's figures.
func loadLimits(getenv func(string) string, l *ddbfront.Limits) error {
	switch v := getenv("DYNAMODB_LIMITS"); v {
	case "", "on":
	case "off":
		l.Off = true
	default:
		return fmt.Errorf("DYNAMODB_LIMITS=%q: want on or off", v)
	}
	if v := getenv("DYNAMODB_TX_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("DYNAMODB_TX_WINDOW=%q: want a positive Go duration such as 20ms", v)
		}
		l.TxWindow = d
	}
	switch v := getenv("DYNAMODB_STALE_READS"); v {
	case "":
	case "off":
		l.StaleReads = -1
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("DYNAMODB_STALE_READS=%q: want off or a positive Go duration such as 20ms", v)
		}
		l.StaleReads = d
	}
	for _, u := range []struct {
		env  string
		dest *float64
	}{{"PARTITION_WCU", &l.PartitionWCU}, {"PARTITION_RCU", &l.PartitionRCU}} {
		if v := getenv(u.env); v != "" {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
				return fmt.Errorf("%s=%q: want a positive number of units per second", u.env, v)
			}
			*u.dest = n
		}
	}
	return nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func run(ctx context.Context, getenv func(string) string, logger *slog.Logger) error {
	cfg, err := load(getenv)
	if err != nil {
		return err
	}
	if err := checkPorts(ctx, cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchMake(ctx, func(reason string) {
		logger.Info("stop", "reason", reason)
		cancel()
	})
	started := time.Now()
	var ready atomic.Pointer[about]
	canary, err := buildCanary(ctx, cfg, logger)
	if err != nil {
		return err
	}
	sys, err := system.Start(ctx, system.Config{
		APICanary:     canary,
		APIThrottle:   cfg.APIThrottle,
		NoAPIThrottle: cfg.NoAPIThrottle,
		Stack: endpoints.Config{
			DynamoDBAddr:     addr(cfg.DynamoDBPort),
			S3Addr:           addr(cfg.S3Port),
			SearchAddr:       addr(cfg.SearchPort),
			OTLPAddr:         addr(cfg.OTLPPort),
			DataDir:          cfg.DataDir,
			TTLSweepInterval: cfg.SweepInterval,
			Limits:           cfg.Limits,
			Logger:           logger,
			About: func() any {
				if a := ready.Load(); a != nil {
					return a
				}
				return nil
			},
		},
		APIAddr:             addr(cfg.APIPort),
		DuplicateEvery:      cfg.DuplicateEvery,
		StreamPartitions:    cfg.StreamPartitions,
		ReservedConcurrency: cfg.ReservedConcurrency,
		FailureBucket:       cfg.FailureBucket,
		TablePrefix:         cfg.TablePrefix,
		JWTSecret:           []byte(cfg.JWTSecret),
		Env:                 cfg.FunctionEnv,
		Logger:              logger,
		Metrics:             io.Discard,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := sys.Close(); err != nil {
			logger.Error("stop", "err", err.Error())
		}
	}()
	logger.Info("endpoint", "service", "api", "url", sys.APIURL)
	logger.Info("endpoint", "service", "dynamodb", "url", sys.DynamoDBURL, "dynamodbLocalPid", sys.DynamoDBLocalPid())
	logger.Info("endpoint", "service", "s3", "url", sys.S3URL, "bucket", cfg.ArchiveBucket, "failureBucket", cfg.FailureBucket)
	logger.Info("endpoint", "service", "search", "url", sys.SearchURL)
	logger.Info("endpoint", "service", "otlp", "url", sys.OTLPURL, "traces", sys.Env["OTEL_EXPORTER_OTLP_ENDPOINT"]+sys.Env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
	if canary != nil {
		logger.Info("api canary", "ref", cfg.CanaryRef, "percent", canary.Percent, "bootstrap", canary.Bootstrap)
	}
	ready.Store(&about{Pid: os.Getpid(), API: sys.APIURL, DynamoDB: sys.DynamoDBURL, S3: sys.S3URL, Search: sys.SearchURL, OTLP: sys.OTLPURL, DataDir: cfg.DataDir})
	logger.Info("ready", "ms", time.Since(started).Milliseconds(), "pid", os.Getpid())
	<-ctx.Done()
	logger.Info("stopping")
	return nil
}

// buildCanary builds the API function of API_CANARY_REF (once per commit,
// kept in the releases cache) for a local canary; nil without one.
func buildCanary(ctx context.Context, cfg settings, logger *slog.Logger) (*system.Canary, error) {
	if cfg.CanaryRef == "" {
		return nil, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := releases.Root(wd)
	if err != nil {
		return nil, fmt.Errorf("API_CANARY_REF needs the repository: %w", err)
	}
	commit, err := releases.Resolve(ctx, root, cfg.CanaryRef)
	if err != nil {
		return nil, fmt.Errorf("API_CANARY_REF=%s: %w", cfg.CanaryRef, err)
	}
	cache, err := releases.CacheDir()
	if err != nil {
		return nil, err
	}
	logger.Info("building the api canary", "ref", cfg.CanaryRef, "commit", commit)
	bin, err := releases.Build(ctx, root, commit, "./functions/api", cache, "lambda.norpc")
	if err != nil {
		return nil, fmt.Errorf("API_CANARY_REF=%s: %w", cfg.CanaryRef, err)
	}
	return &system.Canary{Bootstrap: bin, Percent: cfg.CanaryPercent, Output: os.Stderr, Build: commit}, nil
}

// token prints a dev JWT that the API Gateway emulation accepts.
func token(args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	sub := fs.String("sub", "", "the user id (the token's sub)")
	admin := fs.Bool("admin", false, "put the user in the admin group")
	email := fs.String("email", "", "the token's email claim (default <sub>@example.com)")
	unverified := fs.Bool("unverified", false, "email_verified false, as Cognito's token after an address change not yet confirmed")
	ttl := fs.Duration("ttl", 12*time.Hour, "how long the token is valid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sub == "" {
		return fmt.Errorf("-sub is required")
	}
	tok, err := apigw.TokenFor([]byte(or(getenv("LOCAL_JWT_SECRET"), system.DefaultJWTSecret)),
		apigw.Claims{Sub: *sub, Email: *email, Admin: *admin, Unverified: *unverified}, *ttl)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, tok)
	return err
}

// parseReserved reads RESERVED_CONCURRENCY: "prod" (prod's, the default),
// "none", or function=count pairs separated by commas (a stream function
// not named has none).
func parseReserved(v string) (map[string]int, error) {
	switch v {
	case "prod":
		return wiring.ProdReservedConcurrency(), nil
	case "none":
		return map[string]int{}, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("RESERVED_CONCURRENCY=%q: %s; want prod, none or function=count pairs (%s=5,%s=10)", v, why, wiring.Archiver, wiring.StreamIndexer)
	}
	m := map[string]int{}
	for _, pair := range strings.Split(v, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return nil, bad(fmt.Sprintf("%q is no pair", pair))
		}
		if name != wiring.Counters && name != wiring.StreamIndexer && name != wiring.Archiver {
			return nil, bad(fmt.Sprintf("%q is no stream function", name))
		}
		if _, dup := m[name]; dup {
			return nil, bad(name + " given twice")
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > 1000 {
			return nil, bad(fmt.Sprintf("the count of %s must be a whole number from 1 to 1000", name))
		}
		m[name] = n
	}
	return m, nil
}
