// Package system runs the whole of shopstream on one machine: the local AWS
// endpoints, the tables, the API behind the API Gateway emulation, and the
// stream processors behind the event-source-mapping emulation, all wired from
// the same definitions (shared/tables, shared/wiring, shared/routes) and the
// same environment variables the functions read on AWS.
package system

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/infra/local/esm"
	"github.com/shopstream/shopstream/infra/local/stack"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/store"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Config configures the system. Zero values suit tests: free ports, in memory.
type Config struct {
	Stack stack.Config
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
	// NoMappings builds the stream functions but starts no event-source
	// mapping: the caller feeds the functions itself.
	NoMappings bool
	Logger     *slog.Logger
	// Metrics receives the functions' EMF lines; nil discards them.
	Metrics io.Writer
}

// DefaultJWTSecret is LOCAL_JWT_SECRET's default.
const DefaultJWTSecret = "shopstream-local-secret"

// DefaultCursorSecret signs cursors locally when CURSOR_SECRET is unset.
const DefaultCursorSecret = "shopstream-local-cursor-secret"

// DefaultArchiveBucket is ARCHIVE_BUCKET's local default.
const DefaultArchiveBucket = "shopstream-archive"

// DefaultFailureBucket is FAILURE_BUCKET's local default.
const DefaultFailureBucket = "shopstream-failures"

// System is the running product.
type System struct {
	*stack.Stack
	APIURL string
	// Poller runs the event-source mappings (nil with NoMappings).
	Poller *esm.Poller
	// Functions are the stream functions by name, as the mappings invoke them.
	Functions map[string]esm.Invoker
	// Env is the environment every function sees, as on AWS.
	Env map[string]string
	// FailureBucket holds the batches the mappings gave up on.
	FailureBucket string
	closers       []func() error
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
	env := map[string]string{
		"CURSOR_SECRET":  DefaultCursorSecret,
		"ARCHIVE_BUCKET": DefaultArchiveBucket,
	}
	for k, v := range cfg.Env {
		if v != "" {
			env[k] = v
		}
	}
	if cfg.FailureBucket == "" {
		cfg.FailureBucket = DefaultFailureBucket
	}
	cfg.Stack.Buckets = append(cfg.Stack.Buckets, env["ARCHIVE_BUCKET"], cfg.FailureBucket)
	st, err := stack.Start(ctx, cfg.Stack)
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
	env["SEARCH_URL"] = st.SearchURL
	getenv := func(k string) string { return env[k] }

	api, err := s.api(getenv, cfg)
	if err != nil {
		return nil, err
	}
	if s.APIURL, err = st.Serve(cfg.APIAddr, api); err != nil {
		return nil, fmt.Errorf("start api endpoint: %w", err)
	}
	if err := s.processors(ctx, getenv, cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// api builds the API handler exactly as functions/api does, but with local clients.
func (s *System) api(getenv func(string) string, cfg Config) (http.Handler, error) {
	apiCfg, err := httpapi.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("api config: %w", err)
	}
	h := httpapi.New(httpapi.Deps{
		Store:   store.New(s.DynamoDB(), store.Config{Tables: apiCfg.Tables, CartTTL: apiCfg.CartTTL, OrderRetention: apiCfg.OrderRetention}),
		Cursors: cursor.NewSigner(apiCfg.CursorSecret),
		Search:  &productsearch.Client{URL: apiCfg.SearchURL, HTTP: &http.Client{Timeout: 5 * time.Second}},
		Logger:  cfg.Logger.With("function", "api"),
		Metrics: cfg.Metrics,
	})
	return gateway(h, cfg), nil
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
