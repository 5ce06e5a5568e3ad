package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
)

// buildOps builds the operator commands as the README tells scripts to:
// `make ops`, into a directory of the test's own (OPS_BIN).
func buildOps(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "ops")
	cmd := exec.Command("make", "-s", "--no-print-directory", "ops", "OPS_BIN="+bin)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make ops: %v\n%s", err, out)
	}
	return bin
}

// runOps runs the built command with the shell's environment (no STAGE) and
// env on top, and returns its exit status and output.
func runOps(t *testing.T, bin string, env map[string]string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STAGE=") && !strings.HasPrefix(kv, "TABLE_PREFIX=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		t.Logf("ops %s: exit %d\n%s", strings.Join(args, " "), exit.ExitCode(), out)
		return exit.ExitCode(), string(out)
	default:
		t.Fatalf("ops %s: %v", strings.Join(args, " "), err)
		return 0, ""
	}
}

// runMake runs `make -s <goal>` at the repository's root with the shell's
// environment (no STAGE) and vars given on make's command line, as an
// operator types them, and returns make's exit status and its standard
// output and standard error apart.
func runMake(t *testing.T, bin string, vars map[string]string, goal string) (code int, stdout, stderr string) {
	t.Helper()
	args := []string{"-s", "--no-print-directory", goal, "OPS_BIN=" + bin}
	for k, v := range vars {
		args = append(args, k+"="+v)
	}
	cmd := exec.Command("make", args...)
	cmd.Dir = filepath.Join("..", "..")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STAGE=") && !strings.HasPrefix(kv, "TABLE_PREFIX=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("make %s: %v", goal, err)
	}
	t.Logf("make %s: exit %d\n%s%s", goal, code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return port
}

// TestOpsExitStatusForScripts: bin/ops, built by `make ops`, exits 2 when it
// cannot run (a stopped stack, saying which endpoint does not answer; tables
// of another TABLE_PREFIX, naming the tables and the prefix) and 1 on drift,
// the statuses make turns into its own 2; `make audit` hands them on.
func TestOpsExitStatusForScripts(t *testing.T) {
	bin := buildOps(t)

	t.Run("stopped stack", func(t *testing.T) {
		port := closedPort(t)
		for _, cmd := range []string{"audit", "replay", "reindex", "migrate"} {
			code, out := runOps(t, bin, map[string]string{"DYNAMODB_PORT": port, "S3_PORT": port, "SEARCH_PORT": port}, cmd)
			want := "DynamoDB endpoint http://127.0.0.1:" + port + " is not answering"
			if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, "make run") {
				t.Errorf("%s against a stopped stack: exit %d, %q; want 2 and %q, naming make run", cmd, code, out, want)
			}
		}
	})

	t.Run("help needs no stack", func(t *testing.T) {
		port := closedPort(t)
		for _, cmd := range []string{"audit", "replay", "reindex", "migrate", "admin"} {
			code, out := runOps(t, bin, map[string]string{"DYNAMODB_PORT": port, "S3_PORT": port, "SEARCH_PORT": port}, cmd, "-h")
			if code != 0 || !strings.Contains(out, "Usage of "+cmd) || strings.Contains(out, "not answering") {
				t.Errorf("%s -h with no stack running: exit %d, %q; want 0 and its flags", cmd, code, out)
			}
		}
	})

	d := startDrill(t, drillOptions{})
	env := map[string]string{}
	getenv := d.getenv()
	for _, k := range []string{"DYNAMODB_PORT", "S3_PORT", "SEARCH_PORT", "TABLE_PREFIX", "FAILURE_BUCKET", "ARCHIVE_BUCKET"} {
		env[k] = getenv(k)
	}

	t.Run("another TABLE_PREFIX", func(t *testing.T) {
		wrong := map[string]string{}
		for k, v := range env {
			wrong[k] = v
		}
		wrong["TABLE_PREFIX"] = "not-" + d.prefix
		code, out := runOps(t, bin, wrong, "audit")
		for _, want := range []string{"lacks the tables not-" + d.prefix + "users", `TABLE_PREFIX="not-` + d.prefix + `"`, "TABLE_PREFIX `make run` was started with"} {
			if !strings.Contains(out, want) {
				t.Errorf("audit with another prefix: %q not in %q", want, out)
			}
		}
		if code != 2 {
			t.Errorf("audit with another prefix: exit %d, want 2", code)
		}
	})

	// make admin-add works on a stage's user pool: the local stack has none,
	// and says what to use instead.
	t.Run("admin locally", func(t *testing.T) {
		if code, out := runOps(t, bin, env, "admin", "-user", "grace@example.com"); code != 2 || !strings.Contains(out, "no user pool") || !strings.Contains(out, "make token") {
			t.Errorf("admin on the local stack: exit %d, %q; want 2, no user pool, make token", code, out)
		}
		if code, out := runOps(t, bin, env, "admin"); code != 2 || !strings.Contains(out, "-user is required") {
			t.Errorf("admin without -user: exit %d, %q; want 2 and -user is required", code, out)
		}
	})

	t.Run("drift", func(t *testing.T) {
		d.api(201, "POST", "/users", "u1", map[string]any{"name": "U1"}, nil)
		if code, _ := runOps(t, bin, env, "audit", "-settle", "1s"); code != 0 {
			t.Fatalf("audit of exact counters: exit %d, want 0", code)
		}
		e, err := expression.NewBuilder().WithUpdate(expression.Add(expression.Name("orderCount"), expression.Value(2))).Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.sys.DynamoDB().UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:        aws.String(tables.Physical(d.prefix, tables.Users)),
			Key:              map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "u1"}},
			UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}); err != nil {
			t.Fatal(err)
		}
		if code, out := runOps(t, bin, env, "audit", "-settle", "1s"); code != 1 || !strings.Contains(strings.Join(strings.Fields(out), " "), "user/u1 orderCount 2 0 drift") {
			t.Errorf("audit of a drifted counter: exit %d, want 1 and the line: user/u1 orderCount 2 0 drift", code)
		}
		// `make audit` hands on the command's own status, as the contract
		// has it (0 agree, 1 drift), with the report on standard output.
		vars := map[string]string{"SETTLE": "1s"}
		for k, v := range env {
			vars[k] = v
		}
		code, out, _ := runMake(t, bin, vars, "audit")
		if code != 1 || !strings.Contains(strings.Join(strings.Fields(out), " "), "user/u1 orderCount 2 0 drift") {
			t.Errorf("make audit of a drifted counter: exit %d, stdout %q; want 1 and the line: user/u1 orderCount 2 0 drift", code, out)
		}
		vars["REPAIR"] = "1"
		if code, _, _ := runMake(t, bin, vars, "audit"); code != 0 {
			t.Errorf("make audit REPAIR=1: exit %d, want 0", code)
		}
		delete(vars, "REPAIR")
		if code, out, _ := runMake(t, bin, vars, "audit"); code != 0 || strings.Contains(out, "drift") {
			t.Errorf("make audit after the repair: exit %d, stdout %q; want 0 and no drift", code, out)
		}
		if code, _, errOut := runMake(t, bin, map[string]string{"DYNAMODB_PORT": closedPort(t)}, "audit"); code != 2 || !strings.Contains(errOut, "Error 2") {
			t.Errorf("make audit against a stopped stack: exit %d, stderr %q; want 2", code, errOut)
		}
	})
}

// TestStopWithAGoneProcess: `make audit` runs the command while make reads
// the Makefile, and a stopped make neither waits for it nor passes the
// signal on; with OPS_STOP_WITH the command stops, as at an interrupt, once
// that process is gone, and not before.
func TestStopWithAGoneProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go stopWith(cmd.Process.Pid, func() { close(stopped) })
	select {
	case <-stopped:
		t.Fatal("stopped while the process runs")
	case <-time.After(1200 * time.Millisecond): // several polls
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait() // gone, and reaped, as make is by its shell
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("not stopped 10 s after the process went")
	}
}
