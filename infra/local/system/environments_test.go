package system

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/infra/local/apigw"
)

// counting is an environment that records how many requests it serves at
// once, at most.
type counting struct {
	now, most atomic.Int32
	served    atomic.Int32
	hold      time.Duration
}

func (c *counting) Handle(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	n := c.now.Add(1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(c.hold)
	c.now.Add(-1)
	c.served.Add(1)
	return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
}

// TestAnEnvironmentServesOneRequestAtATime: concurrent requests each get an
// environment of their own, as Lambda runs them; requests one after another
// reuse the environments that are idle, in no fixed order.
func TestAnEnvironmentServesOneRequestAtATime(t *testing.T) {
	var mu sync.Mutex
	var built []*counting
	envs := newEnvironments(func() apigw.Invoker {
		c := &counting{hold: 20 * time.Millisecond}
		mu.Lock()
		built = append(built, c)
		mu.Unlock()
		return c
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := envs.Handle(context.Background(), events.APIGatewayV2HTTPRequest{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	started := envs.Started()
	if started < 2 || started != len(built) {
		t.Fatalf("8 concurrent requests started %d environments (%d built); want more than one", started, len(built))
	}
	for i := range 5 {
		if _, err := envs.Handle(context.Background(), events.APIGatewayV2HTTPRequest{}); err != nil {
			t.Fatal(err)
		}
		if envs.Started() != started {
			t.Fatalf("request %d after the others started an environment while %d were idle", i, started)
		}
	}
	// Requests one after another meet the idle environments in no fixed
	// order: a client cannot count on the one it met before.
	before := map[*counting]int32{}
	for _, c := range built {
		before[c] = c.served.Load()
	}
	for range 50 {
		if _, err := envs.Handle(context.Background(), events.APIGatewayV2HTTPRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	met := 0
	for _, c := range built {
		if c.served.Load() > before[c] {
			met++
		}
	}
	if met < 2 {
		t.Errorf("50 requests one after another met %d of %d idle environments; want them spread", met, len(built))
	}
	served := int32(0)
	for i, c := range built {
		if m := c.most.Load(); m != 1 {
			t.Errorf("environment %d served %d requests at once", i, m)
		}
		served += c.served.Load()
	}
	if served != 63 {
		t.Errorf("%d requests served, want 63", served)
	}
}

// TestAnIdleEnvironmentIsShutDown: an environment idle for idleFor is gone;
// the next request starts a new one, with fresh memory.
func TestAnIdleEnvironmentIsShutDown(t *testing.T) {
	var built []*counting
	envs := newEnvironments(func() apigw.Invoker {
		c := &counting{}
		built = append(built, c)
		return c
	})
	clock := time.Unix(1_800_000_000, 0)
	envs.now = func() time.Time { return clock }
	call := func() {
		if _, err := envs.Handle(context.Background(), events.APIGatewayV2HTTPRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	call()
	clock = clock.Add(idleFor - time.Second)
	call()
	if len(built) != 1 {
		t.Fatalf("a request within %v of the last: %d environments built, want the idle one reused", idleFor, len(built))
	}
	clock = clock.Add(idleFor)
	call()
	if len(built) != 2 || built[1].served.Load() != 1 {
		t.Fatalf("a request %v after the last: %d environments built; want a new one", idleFor, len(built))
	}
}
