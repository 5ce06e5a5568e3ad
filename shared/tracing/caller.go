package tracing

import (
	"math/rand/v2"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// CallerSampledPerSecond and CallerSampledBurst bound how many requests a
// second whose traceparent says "sampled" a process keeps on the caller's
// word, under a sampling ratio below 1. The API is public: without a bound,
// a caller sending a sampled traceparent with every request would make
// each one a kept trace (X-Ray bills each) at the shop's cost, and could
// choose trace ids that any id-based ratio keeps. Past the bound, such a
// request is kept as a new one would be, by a random draw at the ratio.
// Its trace id continues either way.
const (
	CallerSampledPerSecond = 1.0
	CallerSampledBurst     = 10
)

// callerSampled decides for a remote parent that says "sampled".
type callerSampled struct {
	ratio float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
	now    func() time.Time
	draw   func() float64
}

func newCallerSampled(ratio float64) *callerSampled {
	return &callerSampled{ratio: ratio, tokens: CallerSampledBurst, now: time.Now, draw: rand.Float64}
}

func (c *callerSampled) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.last.IsZero() {
		c.tokens = min(CallerSampledBurst, c.tokens+now.Sub(c.last).Seconds()*CallerSampledPerSecond)
	}
	c.last = now
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

func (c *callerSampled) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	ts := trace.SpanContextFromContext(p.ParentContext).TraceState()
	if c.take() || c.draw() < c.ratio {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: ts}
}

func (c *callerSampled) Description() string {
	return "CallerSampled{perSecond=1,burst=10,then ratio}"
}
