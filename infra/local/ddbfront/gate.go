package ddbfront

import (
	"context"
	"net/http"
	"strings"
	"sync"
)

// DefaultUpstreamConcurrency is how many item requests the front lets in
// flight at DynamoDB Local while a transaction holding its items is there
// (docs/decisions.md: 4 and 8 measured, 16 lengthened the holds).
const DefaultUpstreamConcurrency = 8

// gate bounds the data requests in flight at DynamoDB Local while a
// transaction that holds its items is among them, and serves the waiting
// ones of such transactions first. On AWS a transaction holds its items
// for its two phases on their own partitions, whatever else the account is
// doing; locally every request queues at one process, so without the gate
// a transaction would hold its items for the whole queue ahead of it
// (docs/decisions.md, "Transactions go first at DynamoDB Local"). With no
// such transaction about, requests pass unbounded: reads alone are served
// fastest by DynamoDB Local's many threads.
type gate struct {
	mu       sync.Mutex
	limit    int
	inflight int
	urgent   int                // urgent requests in flight or waiting
	waiting  [2][]chan struct{} // urgent first
}

func newGate(n int) *gate {
	if n == 0 {
		n = DefaultUpstreamConcurrency
	}
	if n < 0 {
		return nil
	}
	return &gate{limit: n}
}

type urgentKey struct{}

// urgent marks ctx's requests to DynamoDB Local as those of a transaction
// that holds its items.
func urgent(ctx context.Context) context.Context { return context.WithValue(ctx, urgentKey{}, true) }

func isUrgent(ctx context.Context) bool { return ctx.Value(urgentKey{}) != nil }

func (g *gate) acquire(ctx context.Context) error {
	prio := 1
	if isUrgent(ctx) {
		prio = 0
	}
	g.mu.Lock()
	if prio == 0 {
		g.urgent++
	}
	if g.inflight < g.limit || (prio == 1 && g.urgent == 0) {
		g.inflight++
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	g.waiting[prio] = append(g.waiting[prio], ch)
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		for i, c := range g.waiting[prio] {
			if c == ch {
				g.waiting[prio] = append(g.waiting[prio][:i], g.waiting[prio][i+1:]...)
				if prio == 0 {
					g.urgent--
				}
				g.grant()
				g.mu.Unlock()
				return ctx.Err()
			}
		}
		g.mu.Unlock()
		g.release(ctx) // granted meanwhile: pass the slot on
		return ctx.Err()
	}
}

func (g *gate) release(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if isUrgent(ctx) {
		g.urgent--
	}
	g.grant()
}

// grant lets waiting requests in while there is room, urgent ones first,
// and every waiting one once no urgent request is left. Callers hold g.mu.
func (g *gate) grant() {
	for p := range g.waiting {
		for len(g.waiting[p]) > 0 && (g.inflight < g.limit || g.urgent == 0) {
			close(g.waiting[p][0])
			g.waiting[p] = g.waiting[p][1:]
			g.inflight++
		}
	}
}

// gatedTransport passes the data plane's requests through the gate; the
// control plane's (tables, TTL settings, stream descriptions) go straight on.
type gatedTransport struct {
	g  *gate
	rt http.RoundTripper
}

func (t gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.g.pass(req, t.rt.RoundTrip)
}

// gatedClient is an SDK client's HTTP client behind the gate.
type gatedClient struct {
	g *gate
	c interface {
		Do(*http.Request) (*http.Response, error)
	}
}

func (c gatedClient) Do(req *http.Request) (*http.Response, error) { return c.g.pass(req, c.c.Do) }

// pass sends req through send once the gate lets it.
func (g *gate) pass(req *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if g == nil || !dataPlane(req.Header.Get("X-Amz-Target")) {
		return send(req)
	}
	if err := g.acquire(req.Context()); err != nil {
		return nil, err
	}
	defer g.release(req.Context())
	return send(req)
}

// dataPlane says whether target reads or writes items or stream records.
func dataPlane(target string) bool {
	op := target[strings.LastIndexByte(target, '.')+1:]
	switch op {
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "BatchWriteItem",
		"Query", "Scan", "TransactGetItems", "TransactWriteItems",
		"ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction", "GetRecords":
		return true
	}
	return false
}
