package tracing

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestCallerCannotMakeEveryRequestAKeptTrace: under prod's ratio, requests
// whose caller says "sampled" are kept on its word CallerSampledBurst at
// once and CallerSampledPerSecond after, then by a random draw at the ratio,
// whatever trace id the caller chose (one an id-based ratio always keeps);
// one the caller says is not sampled is not kept; a new request is kept by
// the ratio.
func TestCallerCannotMakeEveryRequestAKeptTrace(t *testing.T) {
	cfg, err := ConfigFromEnv("api", func(k string) string {
		return map[string]string{EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "0"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1_800_000_000, 0)
	var cs *callerSampled
	// The sampler ConfigFromEnv built, with its clock held still.
	sampler := cfg.Sampler
	cs = newCallerSampled(0)
	cs.now = func() time.Time { return clock }
	sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0), sdktrace.WithRemoteParentSampled(cs))
	if cfg.Sampler.Description() != sampler.Description() {
		t.Fatalf("ConfigFromEnv's sampler %q, want %q", cfg.Sampler.Description(), sampler.Description())
	}
	chosen := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6} // low half zero
	parent := func(sampled bool) context.Context {
		flags := trace.TraceFlags(0)
		if sampled {
			flags = trace.FlagsSampled
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: chosen, SpanID: trace.SpanID{1}, TraceFlags: flags, Remote: true})
		return trace.ContextWithRemoteSpanContext(context.Background(), sc)
	}
	kept := func(ctx context.Context) bool {
		return sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: chosen, Name: "GET /products/{productId}"}).Decision == sdktrace.RecordAndSample
	}
	n := 0
	for range 100 {
		if kept(parent(true)) {
			n++
		}
	}
	if n != CallerSampledBurst {
		t.Errorf("100 caller-sampled requests at once: %d kept, want %d", n, CallerSampledBurst)
	}
	clock = clock.Add(3 * time.Second)
	n = 0
	for range 100 {
		if kept(parent(true)) {
			n++
		}
	}
	if n != 3 {
		t.Errorf("3 s later: %d kept, want 3", n)
	}
	if kept(parent(false)) {
		t.Error("a request its caller says is not sampled was kept")
	}
	if kept(context.Background()) {
		t.Error("a new request was kept at ratio 0")
	}
}
