package system

import (
	"context"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/infra/local/apigw"
)

// environments serves the API function as Lambda runs it: each request runs
// in an execution environment that serves one request at a time; a request
// that finds none idle gets a new environment, and an idle one is reused,
// the most recently used first. Each environment is its own handler, built
// anew, with its own memory (the store's catalog cache and its memory of its
// own writes), as each Lambda environment is its own process: what one
// environment wrote or cached, another does not know. One handler serving
// every request at once would be kinder than AWS: a write there would be
// "this instance's own" for every client.
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html:
// an execution environment processes one request at a time.)
type environments struct {
	build func() apigw.Invoker

	mu      sync.Mutex
	idle    []apigw.Invoker
	started int
}

func newEnvironments(build func() apigw.Invoker) *environments {
	return &environments{build: build}
}

// Handle runs ev in an idle environment, or a new one.
func (e *environments) Handle(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	e.mu.Lock()
	var h apigw.Invoker
	if n := len(e.idle); n > 0 {
		h, e.idle = e.idle[n-1], e.idle[:n-1]
	} else {
		e.started++
	}
	e.mu.Unlock()
	if h == nil {
		h = e.build()
	}
	defer func() {
		e.mu.Lock()
		e.idle = append(e.idle, h)
		e.mu.Unlock()
	}()
	return h.Handle(ctx, ev)
}

// Started is how many environments were started so far.
func (e *environments) Started() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.started
}
