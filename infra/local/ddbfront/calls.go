package ddbfront

import (
	"maps"
	"net/http"
	"strings"
	"sync"
)

// UpstreamCalls counts the requests the front sent DynamoDB Local since it
// started, by operation: Passed are its clients' requests it passed on, Own
// the ones it made itself (reading the items a write replaces to price it,
// reading a Query or a batch again to charge what it read, describing
// tables, following the streams, sweeping expired items). DynamoDB Local
// serves all of them on one thread, so Own is what the emulation costs the
// code under test.
type UpstreamCalls struct {
	Passed, Own map[string]int64
}

// UpstreamCalls returns the counts so far.
func (f *Front) UpstreamCalls() UpstreamCalls {
	return f.calls.snapshot()
}

type callCounts struct {
	mu          sync.Mutex
	passed, own map[string]int64
}

func newCallCounts() *callCounts {
	return &callCounts{passed: map[string]int64{}, own: map[string]int64{}}
}

func (c *callCounts) add(own bool, target string) {
	op := target[strings.LastIndexByte(target, '.')+1:]
	c.mu.Lock()
	defer c.mu.Unlock()
	if own {
		c.own[op]++
	} else {
		c.passed[op]++
	}
}

func (c *callCounts) snapshot() UpstreamCalls {
	c.mu.Lock()
	defer c.mu.Unlock()
	return UpstreamCalls{Passed: maps.Clone(c.passed), Own: maps.Clone(c.own)}
}

// countedClient counts the front's own requests as it sends them.
type countedClient struct {
	n *callCounts
	c interface {
		Do(*http.Request) (*http.Response, error)
	}
}

func (c countedClient) Do(req *http.Request) (*http.Response, error) {
	c.n.add(true, req.Header.Get("X-Amz-Target"))
	return c.c.Do(req)
}
