// Package tracing holds shopstream's OpenTelemetry wiring, the same for every
// function: the tracer provider built from the standard OTEL_* environment
// (an OTLP/HTTP exporter, signed with SigV4 when it points at X-Ray), one span
// per AWS SDK call (a middleware on the client), the W3C traceparent the API
// stamps on the items it writes and the stream processors read back, one span
// per stream batch with a link per record, and a slog handler that puts the
// trace and span ids on every log line.
//
// Tracing is off (a no-op tracer, nothing written on items) when no exporter
// endpoint is set, when OTEL_SDK_DISABLED=true or when the sampler is
// always_off.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of every shopstream span.
const Scope = "github.com/shopstream/shopstream"

// The standard OpenTelemetry variables this package reads.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"        // base URL; /v1/traces is added
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // full URL, used as it is
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"        // http/protobuf (default) or http/json
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	EnvDisabled       = "OTEL_SDK_DISABLED"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvBatchDelay     = "OTEL_BSP_SCHEDULE_DELAY" // milliseconds
)

// Config says how a function traces.
type Config struct {
	// Service names the function (service.name).
	Service string
	// Endpoint is the OTLP/HTTP traces URL ("" turns tracing off).
	Endpoint string
	// JSON sends OTLP/HTTP JSON instead of protobuf.
	JSON bool
	// Sampler decides which new traces are kept; nil keeps every one.
	Sampler sdktrace.Sampler
	// Off turns tracing off whatever the rest says.
	Off bool
	// BatchDelay is how long spans wait before they are sent (default 5s on
	// AWS, where every invocation flushes anyway).
	BatchDelay time.Duration
	// Sign, when set, signs each export (SigV4 for X-Ray's OTLP endpoint).
	Sign func(*http.Request, []byte) error
}

// ConfigFromEnv reads the standard OTEL_* variables: the endpoint, the
// protocol, the sampler (always_on, always_off, traceidratio,
// parentbased_always_on, parentbased_always_off, parentbased_traceidratio
// with OTEL_TRACES_SAMPLER_ARG its ratio), OTEL_SDK_DISABLED and
// OTEL_BSP_SCHEDULE_DELAY. service is used unless OTEL_SERVICE_NAME is set.
func ConfigFromEnv(service string, getenv func(string) string) (Config, error) {
	c := Config{Service: service}
	if s := getenv(EnvServiceName); s != "" {
		c.Service = s
	}
	c.Off = strings.EqualFold(getenv(EnvDisabled), "true")
	c.Endpoint = getenv(EnvTracesEndpoint)
	if c.Endpoint == "" {
		if base := getenv(EnvEndpoint); base != "" {
			c.Endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
		}
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, fmt.Errorf("%s: %q is not an http(s) URL", EnvTracesEndpoint, c.Endpoint)
		}
	}
	switch p := getenv(EnvProtocol); p {
	case "", "http/protobuf":
	case "http/json":
		c.JSON = true
	default:
		return Config{}, fmt.Errorf("%s=%q: want http/protobuf or http/json", EnvProtocol, p)
	}
	ratio := 1.0
	if a := getenv(EnvSamplerArg); a != "" {
		r, err := strconv.ParseFloat(a, 64)
		if err != nil || r < 0 || r > 1 {
			return Config{}, fmt.Errorf("%s=%q: want a ratio from 0 to 1", EnvSamplerArg, a)
		}
		ratio = r
	}
	switch s := getenv(EnvSampler); s {
	case "", "parentbased_always_on":
		c.Sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "always_on":
		c.Sampler = sdktrace.AlwaysSample()
	case "always_off", "parentbased_always_off":
		c.Off = true
	case "traceidratio":
		c.Sampler = sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_traceidratio":
		c.Sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio), sdktrace.WithRemoteParentSampled(newCallerSampled(ratio)))
	default:
		return Config{}, fmt.Errorf("%s=%q: want always_on, always_off, traceidratio or their parentbased_ forms", EnvSampler, s)
	}
	if d := getenv(EnvBatchDelay); d != "" {
		ms, err := strconv.Atoi(d)
		if err != nil || ms < 0 {
			return Config{}, fmt.Errorf("%s=%q: want milliseconds", EnvBatchDelay, d)
		}
		c.BatchDelay = time.Duration(ms) * time.Millisecond
	}
	return c, nil
}

// Tracing is one function's tracer. The zero value and nil trace nothing.
type Tracing struct {
	service  string
	tracer   trace.Tracer
	provider *sdktrace.TracerProvider
}

// New returns the function's Tracing: off (a no-op tracer) unless cfg names
// an endpoint. Shutdown flushes and stops it.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	t := &Tracing{service: cfg.Service, tracer: noop.Tracer{}}
	if cfg.Off || cfg.Endpoint == "" {
		return t, nil
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.Endpoint)}
	if cfg.JSON {
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	}
	if cfg.Sign != nil {
		opts = append(opts, otlptracehttp.WithHTTPClient(&http.Client{
			Timeout:   10 * time.Second,
			Transport: signing{next: http.DefaultTransport, sign: cfg.Sign},
		}))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	var bopts []sdktrace.BatchSpanProcessorOption
	if cfg.BatchDelay > 0 {
		bopts = append(bopts, sdktrace.WithBatchTimeout(cfg.BatchDelay))
	}
	sampler := cfg.Sampler
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	t.provider = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, bopts...),
		sdktrace.WithSampler(sampler),
		// A batch of up to 100 records links to up to 100 writers (the
		// default keeps 128).
		sdktrace.WithSpanLimits(spanLimits()),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", cfg.Service))),
	)
	t.tracer = t.provider.Tracer(Scope)
	return t, nil
}

func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	l.LinkCountLimit = 1000
	return l
}

// NewWith returns a Tracing on a provider the caller built (tests, the
// benchmarks' in-memory exporters).
func NewWith(service string, p *sdktrace.TracerProvider) *Tracing {
	return &Tracing{service: service, provider: p, tracer: p.Tracer(Scope)}
}

// Tracer is the function's tracer (a no-op one when tracing is off).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil || t.tracer == nil {
		return noop.Tracer{}
	}
	return t.tracer
}

// On reports whether spans are recorded and sent.
func (t *Tracing) On() bool { return t != nil && t.provider != nil }

// Flush sends the spans ended so far. On Lambda every invocation ends with
// it: a frozen environment sends nothing.
func (t *Tracing) Flush(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Shutdown flushes and stops the provider.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Flushing wraps a Lambda handler so that each invocation's spans are sent
// before it returns.
func Flushing[In, Out any](t *Tracing, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	if !t.On() {
		return h
	}
	return func(ctx context.Context, in In) (Out, error) {
		out, err := h(ctx, in)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = t.Flush(fctx)
		return out, err
	}
}

// Extract returns ctx with the remote span context of a carrier of HTTP
// headers (a request's traceparent), if it holds a valid one.
func Extract(ctx context.Context, headers map[string]string) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, lowerCarrier(headers))
}

// lowerCarrier finds a header whatever its case: API Gateway lowercases
// them, a test or a sample may not.
type lowerCarrier map[string]string

func (c lowerCarrier) Get(key string) string {
	if v, ok := c[key]; ok {
		return v
	}
	for k, v := range c {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}
func (c lowerCarrier) Set(key, value string) { c[key] = value }
func (c lowerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// ForFunction builds a function's Tracing from its environment (the OTEL_*
// variables, ConfigFromEnv): on AWS the exporter points at X-Ray's OTLP
// endpoint (https://xray.<region>.amazonaws.com/v1/traces) and each export is
// signed with the function's credentials (SigV4, service xray).
func ForFunction(ctx context.Context, service string, getenv func(string) string, awsCfg aws.Config) (*Tracing, error) {
	cfg, err := ConfigFromEnv(service, getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if region, ok := XRayRegion(cfg.Endpoint); ok {
		cfg.Sign = SigV4(awsCfg, region)
	}
	return New(ctx, cfg)
}

// XRayRegion is the region of X-Ray's OTLP endpoint URL; ok is false for
// any other URL.
func XRayRegion(endpoint string) (string, bool) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", false
	}
	rest, ok := strings.CutPrefix(u.Hostname(), "xray.")
	if !ok {
		return "", false
	}
	region, ok := strings.CutSuffix(rest, ".amazonaws.com")
	return region, ok && region != "" && !strings.Contains(region, ".")
}

// SigV4 signs an export for X-Ray (service xray) in region with cfg's
// credentials.
func SigV4(cfg aws.Config, region string) func(*http.Request, []byte) error {
	signer := v4.NewSigner()
	return func(r *http.Request, body []byte) error {
		creds, err := cfg.Credentials.Retrieve(r.Context())
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		sum := sha256.Sum256(body)
		return signer.SignHTTP(r.Context(), creds, r, hex.EncodeToString(sum[:]), "xray", region, time.Now())
	}
}
