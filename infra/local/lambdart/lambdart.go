// Package lambdart serves a minimal Lambda Runtime API (the interface a
// provided.al2023 bootstrap polls through AWS_LAMBDA_RUNTIME_API), so a built
// function binary can be run on events without Docker: by `make invoke`
// (infra/local/invoke), by the sample-event tests and by the cold-start
// measurements.
package lambdart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"
)

// Result is one invocation's outcome.
type Result struct {
	// Response is the function's response payload; nil when it failed.
	Response []byte
	// Err is the function's reported error (invocation or init), if any.
	Err error
	// Elapsed runs from the moment the event was handed out to the response.
	Elapsed time.Duration
}

// Runtime is a running Runtime API endpoint that hands out queued events.
type Runtime struct {
	addr     string
	srv      *http.Server
	events   chan []byte
	results  chan Result
	seq      atomic.Int64
	fnName   string
	timeout  time.Duration
	handedAt atomic.Int64
	// FirstPoll is when the function first asked for an event (its init done).
	firstPoll atomic.Int64
}

// Start serves the Runtime API on a free 127.0.0.1 port.
func Start(function string, timeout time.Duration) (*Runtime, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtime api: %w", err)
	}
	rt := &Runtime{addr: ln.Addr().String(), events: make(chan []byte, 16), results: make(chan Result, 16), fnName: function, timeout: timeout}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", rt.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		rt.results <- Result{Response: body, Elapsed: rt.elapsed()}
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		rt.results <- Result{Err: fmt.Errorf("function error: %s", body), Elapsed: rt.elapsed()}
	})
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		rt.results <- Result{Err: fmt.Errorf("init error: %s", body)}
	})
	rt.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go rt.srv.Serve(ln)
	return rt, nil
}

func (rt *Runtime) elapsed() time.Duration {
	return time.Duration(time.Now().UnixNano() - rt.handedAt.Load())
}

func (rt *Runtime) next(w http.ResponseWriter, r *http.Request) {
	rt.firstPoll.CompareAndSwap(0, time.Now().UnixNano())
	select {
	case ev := <-rt.events:
		id := rt.seq.Add(1)
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "local-"+strconv.FormatInt(id, 10))
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(rt.timeout).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:"+rt.fnName)
		rt.handedAt.Store(time.Now().UnixNano())
		w.Write(ev)
	case <-r.Context().Done():
	}
}

// Addr is the value for AWS_LAMBDA_RUNTIME_API.
func (rt *Runtime) Addr() string { return rt.addr }

// FirstPoll is when the function first asked for work, zero before.
func (rt *Runtime) FirstPoll() time.Time {
	n := rt.firstPoll.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Invoke queues an event and waits for its result.
func (rt *Runtime) Invoke(ctx context.Context, event []byte) (Result, error) {
	select {
	case rt.events <- event:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	select {
	case res := <-rt.results:
		return res, nil
	case <-ctx.Done():
		return Result{}, fmt.Errorf("no answer from %s: %w", rt.fnName, ctx.Err())
	}
}

// Close stops the endpoint.
func (rt *Runtime) Close() error { return rt.srv.Shutdown(context.Background()) }

// Process is a function binary running against a Runtime.
type Process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	Started time.Time
}

// Run starts the function binary bin with exactly env and
// AWS_LAMBDA_RUNTIME_API pointing at the runtime: nothing of this process's
// own environment reaches the function, as nothing of the caller's reaches a
// Lambda function. Its output goes to out (a Tagged out tags its lines).
func (rt *Runtime) Run(bin string, env []string, out io.Writer) (*Process, error) {
	cmd := exec.Command(bin)
	cmd.Env = append(append([]string(nil), env...), "AWS_LAMBDA_RUNTIME_API="+rt.addr)
	var lines *lineWriter
	if t, ok := out.(*Tagged); ok {
		lines = t.forProcess()
		out = lines
	}
	cmd.Stdout, cmd.Stderr = out, out
	p := &Process{cmd: cmd, Started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan struct{})
	p.done = done
	go func() {
		p.err = cmd.Wait()
		if lines != nil {
			lines.flush()
		}
		close(done)
	}()
	return p, nil
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Stop kills the process and waits for it.
func (p *Process) Stop() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop function: %w", err)
	}
	<-p.done
	return nil
}

// Build compiles ./functions/<fn> for this machine with Lambda's build tags
// into dir and returns the binary's path.
func Build(ctx context.Context, moduleRoot, fn, dir string) (string, error) {
	bin := dir + "/" + fn + "-bootstrap"
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, "./functions/"+fn)
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", fn, err, out)
	}
	return bin, nil
}

// Pool runs a function binary in n execution environments, each a process
// behind a Runtime API of its own, and hands each invocation to a free one,
// as Lambda hands concurrent requests to separate environments (one event
// at a time each).
type Pool struct {
	free chan *instance
	all  []*instance
}

type instance struct {
	rt *Runtime
	p  *Process
}

// StartPool starts n processes of bin with env (as Run gives it), each with
// the function's timeout; their output goes to out.
func StartPool(function, bin string, env []string, n int, timeout time.Duration, out io.Writer) (*Pool, error) {
	pool := &Pool{free: make(chan *instance, n)}
	for range n {
		rt, err := Start(function, timeout)
		if err != nil {
			pool.Close()
			return nil, err
		}
		p, err := rt.Run(bin, env, out)
		if err != nil {
			rt.Close()
			pool.Close()
			return nil, err
		}
		in := &instance{rt: rt, p: p}
		pool.all = append(pool.all, in)
		pool.free <- in
	}
	return pool, nil
}

// Invoke runs one event on a free environment and returns its result; an
// environment whose process exited answers with an error.
func (pool *Pool) Invoke(ctx context.Context, event []byte) (Result, error) {
	var in *instance
	select {
	case in = <-pool.free:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	select {
	case in.rt.events <- event:
	case <-in.p.Exited():
		pool.free <- in
		return Result{}, fmt.Errorf("%s: the function's process exited: %v", in.rt.fnName, in.p.err)
	case <-ctx.Done():
		pool.free <- in
		return Result{}, ctx.Err()
	}
	select {
	case res := <-in.rt.results:
		pool.free <- in
		return res, nil
	case <-in.p.Exited():
		pool.free <- in
		return Result{}, fmt.Errorf("%s: the function's process exited during an invocation: %v", in.rt.fnName, in.p.err)
	case <-ctx.Done():
		// The environment is busy until the function answers: it goes
		// back to the pool then, so its answer is not taken for the next.
		go func() {
			select {
			case <-in.rt.results:
			case <-in.p.Exited():
			}
			pool.free <- in
		}()
		return Result{}, fmt.Errorf("no answer from %s: %w", in.rt.fnName, ctx.Err())
	}
}

// Close stops every environment.
func (pool *Pool) Close() error {
	var errs []error
	for _, in := range pool.all {
		errs = append(errs, in.p.Stop(), in.rt.Close())
	}
	return errors.Join(errs...)
}
