package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// readmeBlock is the first ```sh block of the README section headed heading.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatalf("README.md %q: no ```sh block", heading)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("README.md %q: unterminated block", heading)
	}
	return block
}

// awsShim stands in for the AWS CLI where it is not installed: the README's
// one call (aws --endpoint-url … --region … dynamodb scan --table-name …)
// through boto3, which reads the region as the CLI v1 does (--region, else
// AWS_DEFAULT_REGION; never AWS_REGION).
const awsShim = `aws() {
python3 - "$@" <<'PY'
import json, os, sys
import boto3
args, opts, pos = sys.argv[1:], {}, []
while args:
    a = args.pop(0)
    if a.startswith("--"):
        opts[a[2:]] = args.pop(0)
    else:
        pos.append(a)
if pos != ["dynamodb", "scan"]:
    sys.exit("aws stand-in: only dynamodb scan, got %s" % pos)
region = opts.get("region") or os.environ.get("AWS_DEFAULT_REGION")
if not region:
    sys.exit("You must specify a region.")
c = boto3.client("dynamodb", endpoint_url=opts.get("endpoint-url"), region_name=region)
out = c.scan(TableName=opts["table-name"])
out.pop("ResponseMetadata", None)
print(json.dumps(out, indent=4))
PY
}
`

// TestReadmeTryingIt runs the README's "Trying it" block as written, in one
// bash, from a fresh directory: only the ports are this test's (the block's
// localhost:3000 and 127.0.0.1:8000, and API_PORT… for make), and make reads
// the repository's Makefile. Every command must do what its comment says:
// the stack starts, the seed loads, the seeded u1 answers to u1's token, u1
// places an order of a kitchen product, a search finds the backpack, a new
// user registers, the AWS CLI (v1 or v2; boto3 where none is installed)
// scans the users, and kill %1 stops it all.
func TestReadmeTryingIt(t *testing.T) {
	block := readmeBlock(t, "Trying it")
	ports, env := stackPorts(t)
	for _, sub := range []struct{ from, to string }{
		{"localhost:3000", "localhost:" + strconv.Itoa(ports[0])},
		{"127.0.0.1:8000", "127.0.0.1:" + strconv.Itoa(ports[1])},
	} {
		if !strings.Contains(block, sub.from) {
			t.Fatalf("the README's block no longer names %s; change this test with it:\n%s", sub.from, block)
		}
		block = strings.ReplaceAll(block, sub.from, sub.to)
	}
	dir := t.TempDir()
	// make runs the repository's Makefile from the test's directory, as the
	// same process (kill %1 signals make itself, as in a user's shell).
	realMake, err := exec.LookPath("make")
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(dir, "bin")
	wrapper := "#!/bin/sh\nexec " + strconv.Quote(realMake) + " --no-print-directory -C " + strconv.Quote(repoRoot(t)) + ` "$@"` + "\n"
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "make"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "set -e\nexport PATH=" + strconv.Quote(binDir) + ":\"$PATH\"\n"
	if _, err := exec.LookPath("aws"); err != nil {
		t.Log("the AWS CLI is not installed: the README's aws line runs through boto3 with the CLI v1's region rules")
		script += awsShim
	}
	script += "set -x\n" + block + "wait\n"

	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	// The README's aws line says what it needs itself: the host's AWS
	// settings must not help it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append(env, "LOCAL_BIN="+filepath.Join(dir, "shopstream-local"),
		// and no AWS configuration files of the host's.
		"AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"))...)
	out, err := cmd.Output()
	var trace string
	if ee, ok := err.(*exec.ExitError); ok {
		trace = string(ee.Stderr)
	}
	stackLog, _ := os.ReadFile(filepath.Join(dir, "stack.log"))
	// The stack is stopped by the block's last line; whatever failed before
	// it, nothing is left running.
	var stackPid, jvmPid int
	sc := bufio.NewScanner(strings.NewReader(string(stackLog)))
	for sc.Scan() {
		var line struct {
			Msg              string `json:"msg"`
			Pid              int    `json:"pid"`
			DynamoDBLocalPid int    `json:"dynamodbLocalPid"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			if line.Msg == "ready" {
				stackPid = line.Pid
			}
			if line.DynamoDBLocalPid != 0 {
				jvmPid = line.DynamoDBLocalPid
			}
		}
	}
	t.Cleanup(func() {
		for _, pid := range []int{stackPid, jvmPid} {
			if pid > 0 && alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if err != nil {
		t.Fatalf("the README's block failed: %v\n%s\n%s\nstack.log:\n%s", err, out, trace, stackLog)
	}
	if stackPid == 0 {
		t.Fatalf("no ready line in stack.log:\n%s", stackLog)
	}
	// "its JSON log in stack.log": the stack's lines from the first on,
	// no line of make's before them.
	if first, _, _ := strings.Cut(string(stackLog), "\n"); !json.Valid([]byte(first)) {
		t.Errorf("stack.log's first line is not JSON: %q", first)
	}
	waitGone(t, "the stack", stackPid)
	waitGone(t, "DynamoDB Local", jvmPid)

	got := string(out)
	for _, want := range []string{
		`"Copper Kettle"`,                   // the seeded kitchen products
		`"userId":"u1"`, `"u1@example.com"`, // the seeded u1, read with u1's token
		`"status":"PLACED"`, `"quantity":1`, // u1's order
		`"Trail Backpack"`,                  // the search
		`"userId":"u3"`, `"u3@example.com"`, // the new user
		`"S": "u3"`, `"ScannedCount"`, // the AWS CLI's scan of users
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the README's block printed no %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "application/problem+json") || strings.Contains(got, `"status":4`) || strings.Contains(got, `"status":5`) {
		t.Errorf("an API call of the README's block failed:\n%s", got)
	}
	if !strings.Contains(string(stackLog), `"msg":"stopping"`) {
		t.Errorf("kill %%1 did not stop the stack cleanly; stack.log:\n%s", stackLog)
	}
}
