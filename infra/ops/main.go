// Command ops runs the operator commands of docs/contract.md#6-operations against `make run`'s
// local stack or, with STAGE set, a deployed stage (names from its stack's
// outputs, see package target):
//
//	bin/ops replay [-mapping m]   # make replay [MAPPING=m]
//	bin/ops audit [-repair]       # make audit [REPAIR=1]
//	bin/ops reindex               # make reindex
//	bin/ops migrate [-dry-run]    # make migrate [DRY_RUN=1]
//	bin/ops admin -user u [-remove] # make admin-add|admin-remove WHO=u STAGE=s
//
// (`make ops` builds bin/ops.) Each command resolves the same target and exits
// 0 when it left everything right, 1 when something remains (records still
// failing, drift), 2 when it could not run. Scripts run bin/ops to see these:
// make exits 2 whenever a recipe fails, and `go run` exits 1 whenever the
// program does not exit 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/shopstream/shopstream/infra/ops/target"
)

// command is one operator command.
type command struct {
	name, usage string
	run         func(ctx context.Context, t *target.Target, args []string, env env) error
}

// env is what a command may use besides its target and arguments.
type env struct {
	stdout io.Writer
	// stderr takes the long commands' progress lines and every command's
	// error (stdout when nil): standard error, so that standard output
	// holds the report alone (`make audit` keeps it apart).
	stderr io.Writer
	logger *slog.Logger
	getenv func(string) string
}

func commands() []command {
	return []command{
		{"replay", "replay [-mapping m] | replay -retire key -reason why: re-drive every failed stream batch not yet replayed, or give up on one", replayCommand},
		{"audit", "audit [-repair] [-settle d] [-max-wait d]: recompute every counter from the tables and the archive, print (and repair) drift", auditCommand},
		{"reindex", "reindex [-segments n] [-batch n]: rebuild the products search index from the products table", reindexCommand},
		{"migrate", "migrate [-dry-run] [-rate n] [-page n]: run every data migration not yet done (item shapes of earlier releases to the current ones), resumable", migrateCommand},
		{"admin", "admin -user u [-remove]: add a user with TOTP to a stage's admin group, signed out everywhere first (or take one out and sign them out)", adminCommand},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if pid, err := strconv.Atoi(os.Getenv("OPS_STOP_WITH")); err == nil && pid > 1 {
		go stopWith(pid, stop)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	os.Exit(run(ctx, os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, logger: logger, getenv: os.Getenv}))
}

// run runs one command and returns the exit status.
func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		usage(e.stdout)
		return 2
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		if asksHelp(args[1:]) {
			// Every command parses its flags before it reaches the
			// target: its help needs no stack and no stage, only the
			// stage's name (some defaults differ on a stage).
			if err := c.run(ctx, &target.Target{Stage: e.getenv("STAGE")}, args[1:], e); !errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(e.stdout, "%s: -h: %v\n", c.name, err)
				return 2
			}
			return 0
		}
		t, err := target.Resolve(ctx, e.getenv)
		if err != nil {
			fmt.Fprintf(e.errOut(), "%s: %v\n", c.name, err)
			return 2
		}
		if err := t.Check(ctx); err != nil {
			fmt.Fprintf(e.errOut(), "%s: %v\n", c.name, err)
			return 2
		}
		fmt.Fprintf(e.stdout, "%s on the %s\n", c.name, t)
		err = c.run(ctx, t, args[1:], e)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, target.ErrIncomplete):
			fmt.Fprintf(e.errOut(), "%s: %v\n", c.name, err)
			return 1
		default:
			fmt.Fprintf(e.errOut(), "%s: %v\n", c.name, err)
			return 2
		}
	}
	usage(e.stdout)
	return 2
}

// asksHelp says whether a command's arguments ask for its flags: -h (or
// -help) first, which its flag set answers before it reads anything else
// and before the command reaches its target. Anywhere else -h may be a
// flag's value (-reason -h), and the command runs as usual.
func asksHelp(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "-h", "-help", "--help", "--h":
		return true
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: bin/ops <command> [flags] (make ops builds it); against the local stack, or a deployed stage with STAGE=<stage>")
	for _, c := range commands() {
		fmt.Fprintln(w, "  "+c.usage)
	}
}

// errOut is where progress lines and errors go.
func (e env) errOut() io.Writer {
	if e.stderr != nil {
		return e.stderr
	}
	return e.stdout
}

// stopWith stops the command, as an interrupt does, once process pid is
// gone: `make audit` runs it while make reads the Makefile, and make, when
// it is stopped, neither waits for it nor passes the signal on.
func stopWith(pid int, stop func()) {
	for {
		time.Sleep(250 * time.Millisecond)
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			stop()
			return
		}
	}
}
