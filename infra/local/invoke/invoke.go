package invoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/shopstream/shopstream/infra/local/lambdart"
)

// Build builds f's bootstrap into dir the way `sam build` does for
// BuildMethod: makefile (`make --makefile <CodeUri>/Makefile
// build-<LogicalId>` with ARTIFACTS_DIR set), in the source folder rather than
// a copy of it, for this machine's architecture (LAMBDA_GOARCH; the
// template's arm64 binary would need an emulator here). It returns the
// bootstrap's path.
func Build(ctx context.Context, f *Function, dir string) (string, error) {
	if f.BuildMethod != "makefile" {
		return "", fmt.Errorf("function %s: BuildMethod %q, want makefile", f.LogicalID, f.BuildMethod)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", f.LogicalID, err)
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "--makefile", filepath.Join(f.CodeDir, "Makefile"), "build-"+f.LogicalID)
	cmd.Dir = f.CodeDir
	cmd.Env = append(os.Environ(), "ARTIFACTS_DIR="+abs, "LAMBDA_GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s (make build-%s): %w\n%s", f.LogicalID, f.LogicalID, err, out)
	}
	bin := filepath.Join(abs, "bootstrap")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("build %s: make build-%s left no bootstrap in ARTIFACTS_DIR: %w", f.LogicalID, f.LogicalID, err)
	}
	return bin, nil
}

// ProcessEnv is the whole environment of the bootstrap process: env (SAM's,
// from Environment) and what a provided.al2023 execution environment defines
// besides (handler, task root, time zone, locale, path), sorted. The Runtime
// API's address is added when the process starts.
func ProcessEnv(f *Function, bin string, env map[string]string) []string {
	all := map[string]string{
		"_HANDLER":           f.Handler,
		"LAMBDA_TASK_ROOT":   filepath.Dir(bin),
		"LAMBDA_RUNTIME_DIR": "/var/runtime",
		"TZ":                 ":UTC",
		"LANG":               "en_US.UTF-8",
		"PATH":               "/usr/local/bin:/usr/bin/:/bin:/opt/bin",
	}
	for k, v := range env {
		all[k] = v
	}
	out := make([]string, 0, len(all))
	for k, v := range all {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Result is one invocation's outcome.
type Result struct {
	// Response is the function's response; nil when it failed.
	Response []byte
	// Err is the error the function reported (init or invocation) or the
	// timeout; nil on success.
	Err error
	// Init runs from the process's start to its first request for an event.
	Init time.Duration
	// ToResponse runs from the process's start to the response: the cold
	// start as a caller sees it.
	ToResponse time.Duration
}

// Run starts the bootstrap bin with exactly env (ProcessEnv's), hands it the
// event through a local Runtime API, waits for its answer within the
// function's Timeout, and stops it. The function's output goes to out.
func Run(ctx context.Context, f *Function, bin string, env []string, event []byte, out io.Writer) (Result, error) {
	rt, err := lambdart.Start(f.LogicalID, f.Timeout)
	if err != nil {
		return Result{}, err
	}
	defer rt.Close()
	p, err := rt.Run(bin, env, out)
	if err != nil {
		return Result{}, err
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	go func() {
		select {
		case <-p.Exited():
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := rt.Invoke(ctx, event)
	took := time.Since(p.Started)
	if err != nil {
		select {
		case <-p.Exited():
			return Result{}, fmt.Errorf("%s exited before answering (its output says why): %w", f.LogicalID, err)
		default:
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return Result{Err: fmt.Errorf("%s timed out after %s (Timeout)", f.LogicalID, f.Timeout), ToResponse: took}, nil
		}
		return Result{}, err
	}
	r := Result{Response: res.Response, Err: res.Err, ToResponse: took}
	if fp := rt.FirstPoll(); !fp.IsZero() {
		r.Init = fp.Sub(p.Started)
	}
	return r, nil
}
