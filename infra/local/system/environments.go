package system

import (
	"context"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/infra/local/apigw"
)

// environments serves the API function as Lambda runs it: each request runs
// in an execution environment that serves one request at a time; a request
// that finds none idle gets a new environment, and otherwise one of the idle
// ones, chosen at random (Lambda does not say which it picks, and a client
// must not count on meeting the same one twice); an environment idle for
// idleFor is shut down. Each environment is its own handler, built
// anew, with its own memory (the store's catalog cache and its memory of its
// own writes), as each Lambda environment is its own process: what one
// environment wrote or cached, another does not know. One handler serving
// every request at once would be kinder than AWS: a write there would be
// "this instance's own" for every client.
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html:
// an execution environment processes one request at a time.)
type environments struct {
	build func() apigw.Invoker
	now   func() time.Time

	mu      sync.Mutex
	idle    []idleEnvironment
	started int
}

type idleEnvironment struct {
	h     apigw.Invoker
	since time.Time
}

// idleFor is how long an idle environment is kept: Lambda keeps one some
// minutes, and says no more; shorter is no kinder.
const idleFor = 5 * time.Minute

func newEnvironments(build func() apigw.Invoker) *environments {
	return &environments{build: build, now: time.Now}
}

// Handle runs ev in an idle environment, or a new one.
func (e *environments) Handle(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	e.mu.Lock()
	now := e.now()
	kept := e.idle[:0]
	for _, x := range e.idle {
		if now.Sub(x.since) < idleFor {
			kept = append(kept, x)
		}
	}
	clear(e.idle[len(kept):])
	e.idle = kept
	var h apigw.Invoker
	if n := len(e.idle); n > 0 {
		i := rand.IntN(n)
		h = e.idle[i].h
		e.idle[i] = e.idle[n-1]
		e.idle[n-1] = idleEnvironment{}
		e.idle = e.idle[:n-1]
	} else {
		e.started++
	}
	e.mu.Unlock()
	if h == nil {
		h = e.build()
	}
	defer func() {
		e.mu.Lock()
		e.idle = append(e.idle, idleEnvironment{h: h, since: e.now()})
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

// lineWriter passes each Write on whole, one at a time: the environments'
// metric lines never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
