package apigw

import (
	"context"
	"math/rand/v2"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"
)

// Weighted is a Lambda alias with a routing configuration: each request goes
// to Primary or, for Percent of them drawn at random, to Additional (the
// alias's additional version weight, which a CodeDeploy canary moves from 0
// to 100 and a rollback sets back to 0). `make run` uses it for a local
// canary, and the canary drill for a release beside the previous one.
type Weighted struct {
	Primary, Additional Invoker
	percent             atomic.Int64
	served              [2]atomic.Int64
}

// NewWeighted routes percent of the requests to additional.
func NewWeighted(primary, additional Invoker, percent int) *Weighted {
	w := &Weighted{Primary: primary, Additional: additional}
	w.SetPercent(percent)
	return w
}

// SetPercent moves the share of requests Additional serves (clamped to 0..100).
func (w *Weighted) SetPercent(p int) { w.percent.Store(int64(min(max(p, 0), 100))) }

// Percent is the share of requests Additional serves.
func (w *Weighted) Percent() int { return int(w.percent.Load()) }

// Served counts the requests each side was handed so far.
func (w *Weighted) Served() (primary, additional int64) {
	return w.served[0].Load(), w.served[1].Load()
}

// Handle hands the request to one side.
func (w *Weighted) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if rand.Int64N(100) < w.percent.Load() {
		w.served[1].Add(1)
		return w.Additional.Handle(ctx, req)
	}
	w.served[0].Add(1)
	return w.Primary.Handle(ctx, req)
}
