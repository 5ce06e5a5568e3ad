// Package endpoints runs the local AWS endpoints of shopstream on one machine:
// DynamoDB and DynamoDB Streams (AWS's DynamoDB Local behind the stack's own
// front, which adds TTL expiry and fault injection), S3 and the OpenSearch
// subset. Everything binds to 127.0.0.1; the code under test reaches it through
// the real AWS SDK clients.
package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/ddblocal"
	"github.com/shopstream/shopstream/infra/local/loopback"
	"github.com/shopstream/shopstream/infra/local/otlp"
	"github.com/shopstream/shopstream/infra/local/s3server"
	"github.com/shopstream/shopstream/infra/local/search"
)

// Region is the region every local client uses.
const Region = "us-east-1"

// Config configures the stack. Zero values are the test defaults: free ports,
// in memory, a 5 s sweep.
type Config struct {
	// DynamoDBAddr, S3Addr and SearchAddr are listen addresses such as
	// "127.0.0.1:8000"; empty means a free port on 127.0.0.1.
	DynamoDBAddr, S3Addr, SearchAddr string
	// OTLPAddr is the trace receiver's listen address (OTLP/HTTP);
	// empty means a free port on 127.0.0.1.
	OTLPAddr string
	// DataDir keeps all data on disk; "" keeps it in memory.
	DataDir string
	// TTLSweepInterval is the TTL sweeper's period (default 5s; negative disables it).
	TTLSweepInterval time.Duration
	// Buckets are created on start.
	Buckets []string
	// Now is the sweeper's clock and AfterScan its test hook (see ddbfront.Config).
	Now         func() time.Time
	AfterScan   func(table string)
	SweepTables func(table string) bool
	// Limits are AWS's transaction conflicts and partition throughput
	// (ddbfront.Limits): the zero value is AWS's.
	Limits ddbfront.Limits
	// DynamoDBUpstream reuses a running DynamoDB Local instead of starting one.
	DynamoDBUpstream string
	Logger           *slog.Logger
	// About describes the running stack (its process, endpoints, data) at
	// GET /_local/stack on the DynamoDB endpoint, so that a second `make run`
	// on the same ports can say which stack holds them; nil until ready,
	// which the endpoint answers 503.
	About func() any
}

// Stack is a running local stack.
type Stack struct {
	DynamoDBURL string
	S3URL       string
	SearchURL   string
	// OTLPURL receives OTLP/HTTP traces (POST /v1/traces).
	OTLPURL string
	// Traces holds the spans received.
	Traces *otlp.Receiver
	// Front is the DynamoDB endpoint, for its fault hook and sweeper.
	Front *ddbfront.Front

	upstream string
	ddbl     *ddblocal.Process
	s3       *s3server.Server
	search   *search.Server
	servers  []*http.Server
	logger   *slog.Logger
	// unlock releases the DATA_DIR (nil in memory).
	unlock func() error
}

// Start starts every endpoint and returns when all answer.
func Start(ctx context.Context, cfg Config) (st *Stack, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TTLSweepInterval == 0 {
		cfg.TTLSweepInterval = 5 * time.Second
	}
	if cfg.TTLSweepInterval < 0 {
		cfg.TTLSweepInterval = 0
	}
	s := &Stack{logger: cfg.Logger}
	if cfg.DataDir != "" {
		// First of all: a second stack on this directory touches nothing.
		if s.unlock, err = lockDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	upstream := cfg.DynamoDBUpstream
	if upstream == "" {
		s.ddbl, err = ddblocal.Start(ctx, ddblocal.Options{DataDir: sub(cfg.DataDir, "dynamodb"), Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		upstream = s.ddbl.Endpoint()
	}
	s.upstream = upstream
	s.Front, err = ddbfront.New(ctx, ddbfront.Config{
		Upstream: upstream,
		DynamoDB: dynamodb.NewFromConfig(AWSConfig(), endpoint(upstream)),
		Streams: dynamodbstreams.NewFromConfig(AWSConfig(), func(o *dynamodbstreams.Options) {
			o.BaseEndpoint = aws.String(upstream)
		}),
		SweepInterval: cfg.TTLSweepInterval,
		DataDir:       sub(cfg.DataDir, "ttl"),
		Logger:        cfg.Logger.With("service", "dynamodb"),
		Now:           cfg.Now,
		AfterScan:     cfg.AfterScan,
		SweepTables:   cfg.SweepTables,
		// DynamoDB Local answers a transaction before committing it.
		CommitBarrier: cfg.DataDir != "",
		Limits:        cfg.Limits,
	})
	if err != nil {
		return nil, fmt.Errorf("start dynamodb front: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/_local/faults", s.Front.FaultsHandler())
	mux.HandleFunc("GET /_local/stack", func(w http.ResponseWriter, r *http.Request) {
		var about any
		if cfg.About != nil {
			about = cfg.About()
		}
		if about == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(about)
	})
	mux.Handle("/", s.Front)
	if s.DynamoDBURL, err = s.serve(cfg.DynamoDBAddr, mux); err != nil {
		return nil, fmt.Errorf("start dynamodb endpoint: %w", err)
	}

	if s.s3, err = s3server.New(sub(cfg.DataDir, "s3"), cfg.Buckets...); err != nil {
		return nil, err
	}
	if s.S3URL, err = s.serve(cfg.S3Addr, s.s3); err != nil {
		return nil, fmt.Errorf("start s3 endpoint: %w", err)
	}

	if s.search, err = search.New(sub(cfg.DataDir, "search"), cfg.Logger.With("service", "search")); err != nil {
		return nil, err
	}
	// POST /_bulk answers as OpenSearch's default does (docs/contract.md,
	// search): an _index in the action lines is accepted. The deployed
	// domain refuses it; the functions name the index in the path, which
	// the indexer's tests check against a service that refuses it
	// (functions/stream-indexer/indexing, searchService).
	if s.SearchURL, err = s.serve(cfg.SearchAddr, s.search); err != nil {
		return nil, fmt.Errorf("start search endpoint: %w", err)
	}

	if s.Traces, err = otlp.New(sub(cfg.DataDir, "traces")); err != nil {
		return nil, err
	}
	if s.OTLPURL, err = s.serve(cfg.OTLPAddr, s.Traces.Handler()); err != nil {
		return nil, fmt.Errorf("start otlp endpoint: %w", err)
	}
	return s, nil
}

func sub(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// serve listens on addr (a free 127.0.0.1 port when empty) and returns the
// URL. The stack's own services answer no web page (loopback.Only).
func (s *Stack) serve(addr string, h http.Handler) (string, error) {
	return s.listen(addr, loopback.Only(h, false))
}

func (s *Stack) listen(addr string, h http.Handler) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Addr: l.Addr().String(), Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.servers = append(s.servers, srv)
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("serve", "addr", addr, "err", err.Error())
		}
	}()
	return "http://" + l.Addr().String(), nil
}

// Upstream is DynamoDB Local's own URL, behind the front.
func (s *Stack) Upstream() string { return s.upstream }

// DynamoDBLocalPid is the JVM's process id, or 0 when the stack reuses another's.
func (s *Stack) DynamoDBLocalPid() int {
	if s.ddbl == nil {
		return 0
	}
	return s.ddbl.Pid()
}

// Serve adds another endpoint (the API, for instance) that Close stops too.
// A page may call it (the API, as a shop's pages do), but only under a
// loopback name: a rebound one is refused.
func (s *Stack) Serve(addr string, h http.Handler) (string, error) {
	return s.listen(addr, loopback.Only(h, true))
}

// Close stops every endpoint and DynamoDB Local.
func (s *Stack) Close() error {
	var errs []error
	for _, srv := range s.servers {
		if err := shutdown(srv, shutdownGrace); err != nil {
			errs = append(errs, fmt.Errorf("stop server %s: %w", srv.Addr, err))
		}
	}
	if s.Front != nil {
		errs = append(errs, s.Front.Close())
	}
	if s.s3 != nil {
		errs = append(errs, s.s3.Close())
	}
	if s.search != nil {
		errs = append(errs, s.search.Close())
	}
	if s.Traces != nil {
		errs = append(errs, s.Traces.Close())
	}
	if s.ddbl != nil {
		errs = append(errs, s.ddbl.Close())
	}
	if s.unlock != nil {
		errs = append(errs, s.unlock())
	}
	return errors.Join(errs...)
}

// AWSConfig is the AWS config every local client uses: dummy static credentials
// and the local region. Endpoints are set per client.
func AWSConfig() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	}
}

func endpoint(url string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(url) }
}

// DynamoDB returns a DynamoDB client for the stack's endpoint.
func (s *Stack) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(AWSConfig(), endpoint(s.DynamoDBURL))
}

// Streams returns a DynamoDB Streams client for the stack's endpoint.
func (s *Stack) Streams() *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(AWSConfig(), func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(s.DynamoDBURL)
	})
}

// S3 returns a path-style S3 client for the stack's endpoint.
func (s *Stack) S3() *s3.Client {
	return s3.NewFromConfig(AWSConfig(), func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.S3URL)
		o.UsePathStyle = true
	})
}

// shutdownGrace is how long Close lets requests in flight finish.
const shutdownGrace = 3 * time.Second

// shutdown stops srv gracefully, then forcibly after grace. net/http counts a
// connection that was opened but never sent a request as busy for its first
// 5 s (a client's spare dial does that), so a graceful shutdown alone can
// hang on a connection that carries nothing.
func shutdown(srv *http.Server, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return srv.Close()
	}
	return err
}
