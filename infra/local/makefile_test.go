package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// phonyTargets returns the Makefile's .PHONY targets, continuation lines
// included.
func phonyTargets(t *testing.T, makefile string) []string {
	t.Helper()
	f, err := os.Open(makefile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, ".PHONY:"); ok {
			in, line = true, rest
		}
		if !in {
			continue
		}
		more := strings.HasSuffix(line, "\\")
		names = append(names, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		in = more
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestMakeHelpListsEveryTarget: every .PHONY target has its `## name:
// description` line, and `make help` prints each with its description.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	makefile := filepath.Join(dir, "Makefile")
	raw, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	phony := phonyTargets(t, makefile)
	if len(phony) < 10 {
		t.Fatalf("got %d .PHONY targets (%v), want the Makefile's list", len(phony), phony)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "help")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	for _, name := range phony {
		doc := regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(name) + `: \S`)
		if !doc.Match(raw) {
			t.Errorf("target %s: no `## %s: description` line in the Makefile", name, name)
		}
		listed := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` +\S`)
		if !listed.Match(out) {
			t.Errorf("target %s: not listed with a description by make help:\n%s", name, out)
		}
	}
}

// TestProdDeployNeedsAlarmEmail: a prod deploy that names no ALARM_EMAIL
// stops before it builds, since CloudFormation would remove the alarm
// e-mail subscription the last deploy made; ALARM_EMAIL=none is the way to
// deploy without one, and an address reaches the CDK app.
func TestProdDeployNeedsAlarmEmail(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ALARM_EMAIL=") && !strings.HasPrefix(kv, "STAGE=") {
			env = append(env, kv)
		}
	}
	mk := func(args ...string) (string, error) {
		cmd := exec.Command("make", append([]string{"-s", "--no-print-directory"}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := mk("deploy-check", "STAGE=prod")
	if err == nil || !strings.Contains(out, "needs ALARM_EMAIL") {
		t.Errorf("prod deploy without ALARM_EMAIL: err %v, output %q; want a refusal naming ALARM_EMAIL", err, out)
	}
	for _, args := range [][]string{{"STAGE=prod", "ALARM_EMAIL=none"}, {"STAGE=prod", "ALARM_EMAIL=oncall@example.com"}, {"STAGE=dev"}} {
		if out, err := mk(append([]string{"deploy-check"}, args...)...); err != nil {
			t.Errorf("deploy-check %v: %v\n%s", args, err, out)
		}
	}
	out, err = mk("-n", "deploy", "STAGE=prod", "ALARM_EMAIL=none")
	if err != nil || strings.Contains(out, "alarmEmail") {
		t.Errorf("make -n deploy ALARM_EMAIL=none: err %v; want no alarmEmail context:\n%s", err, out)
	}
	out, err = mk("-n", "deploy", "STAGE=prod", "ALARM_EMAIL=oncall@example.com")
	if err != nil || !strings.Contains(out, "-c alarmEmail=oncall@example.com") {
		t.Errorf("make -n deploy with an address: err %v; want -c alarmEmail=oncall@example.com:\n%s", err, out)
	}
}

// TestDeployKeepsTheCDNName: a deploy of a stage whose CDN answers at a name
// of its own stops unless CDN_DOMAIN is given again (CloudFormation would
// put the distribution back on its cloudfront.net name and TLSv1); each CDN
// setting reaches the CDK app on its own, so one without the other is the
// app's error, not silently dropped. The deployed stack is read through the
// aws CLI, here a stand-in on PATH.
func TestDeployKeepsTheCDNName(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	cdnURL := filepath.Join(bin, "cdn-url")
	script := "#!/bin/sh\ncat " + cdnURL + "\n"
	if err := os.WriteFile(filepath.Join(bin, "aws"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			env = append(env, "PATH="+bin+string(os.PathListSeparator)+strings.TrimPrefix(kv, "PATH="))
		case strings.HasPrefix(kv, "CDN_"), strings.HasPrefix(kv, "STAGE="), strings.HasPrefix(kv, "ALARM_EMAIL="):
		default:
			env = append(env, kv)
		}
	}
	mk := func(deployed string, args ...string) (string, error) {
		if err := os.WriteFile(cdnURL, []byte(deployed+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("make", append([]string{"-s", "--no-print-directory"}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := mk("https://shop.example.com", "deploy-check", "STAGE=dev"); err == nil || !strings.Contains(out, "pass CDN_DOMAIN") {
		t.Errorf("deploy of a stage with its own CDN name, without CDN_DOMAIN: err %v, output %q; want a refusal", err, out)
	}
	for _, tc := range []struct {
		deployed string
		args     []string
	}{
		{"https://shop.example.com", []string{"STAGE=dev", "CDN_DOMAIN=shop.example.com", "CDN_CERTIFICATE_ARN=arn"}},
		{"https://shop.example.com", []string{"STAGE=dev", "CDN_DOMAIN=none"}},
		{"https://d111111abcdef8.cloudfront.net", []string{"STAGE=dev"}},
		{"", []string{"STAGE=dev"}},
	} {
		if out, err := mk(tc.deployed, append([]string{"deploy-check"}, tc.args...)...); err != nil {
			t.Errorf("deploy-check with %q deployed, %v: %v\n%s", tc.deployed, tc.args, err, out)
		}
	}
	if out, err := mk("", "-n", "deploy", "STAGE=dev", "CDN_DOMAIN=none"); err != nil || strings.Contains(out, "cdnDomain") {
		t.Errorf("make -n deploy CDN_DOMAIN=none: err %v; want no cdnDomain context:\n%s", err, out)
	}
	out, err := mk("", "-n", "deploy", "STAGE=dev", "CDN_CERTIFICATE_ARN=arn:aws:acm:us-east-1:123456789012:certificate/x")
	if err != nil || !strings.Contains(out, "-c cdnCertificateArn=arn:aws:acm:us-east-1:123456789012:certificate/x") || strings.Contains(out, "cdnDomain") {
		t.Errorf("make -n deploy with a certificate alone: err %v; want it passed on alone, for the app to refuse:\n%s", err, out)
	}
}

// TestReplayRetireQuotesNothing: make replay RETIRE=… REASON=… hands both to
// bin/ops through the environment, so a reason with quotes or $( is the
// reason, never recipe text the shell would run.
func TestReplayRetireQuotesNothing(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "-n", "replay", "RETIRE=aws/lambda/k", `REASON=it "broke" $$(touch pwned)`, "FORCE=1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n replay: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `-retire "$RETIRE" -reason "$REASON" -force`) || strings.Contains(string(out), "broke") {
		t.Errorf("make -n replay: got\n%s\nwant the values passed as $RETIRE and $REASON, not as text", out)
	}
}

// TestAdminAddQuotesNothing: WHO reaches bin/ops as the environment variable
// $WHO, never as text of the recipe, so a quote or $( in it is never run.
func TestAdminAddQuotesNothing(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"admin-add", "admin-remove"} {
		cmd := exec.Command("make", "-s", "--no-print-directory", "-n", target, `WHO=grace"; $$(touch pwned)`)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		if !strings.Contains(string(out), `admin -user "$WHO"`) || strings.Contains(string(out), "pwned") {
			t.Errorf("make -n %s: got\n%s\nwant the value passed as $WHO, not as text", target, out)
		}
	}
}

// TestSwitchesAreOneOrZero: REPAIR, FORCE, DRY_RUN, ADMIN and UNVERIFIED
// turn their flag on only when 1; 0 leaves it off, as it reads, and any
// other value stops make before the command runs (REPAIR=no must not
// repair, FORCE=0 must not retire an archiver's batch for good).
func TestSwitchesAreOneOrZero(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target, name, flag string
		args               []string
	}{
		{"audit", "REPAIR", "-repair", nil},
		{"replay", "FORCE", "-force", []string{"RETIRE=aws/lambda/k", "REASON=r"}},
		{"migrate", "DRY_RUN", "-dry-run", nil},
		{"token", "ADMIN", "-admin", nil},
		{"token", "UNVERIFIED", "-unverified", nil},
	} {
		for _, value := range []string{"1", "0", "", "no", "true"} {
			args := append([]string{"-s", "--no-print-directory", "-n", "-o", "ops", tc.target, tc.name + "=" + value}, tc.args...)
			cmd := exec.Command("make", args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			switch value {
			case "1", "0", "":
				if err != nil {
					t.Errorf("make %s %s=%s: %v\n%s", tc.target, tc.name, value, err, out)
				}
				if on := strings.Contains(string(out), " "+tc.flag); on != (value == "1") {
					t.Errorf("make %s %s=%q: %s given: %v, want %v\n%s", tc.target, tc.name, value, tc.flag, on, value == "1", out)
				}
			default:
				if err == nil || strings.Contains(string(out), " "+tc.flag) || !strings.Contains(string(out), tc.name+"="+value+": give") {
					t.Errorf("make %s %s=%s: err %v; want make stopped, naming the switch\n%s", tc.target, tc.name, value, err, out)
				}
			}
		}
	}
}

// TestForceNeedsRetire: FORCE=1 without RETIRE names nothing to give up:
// make stops, rather than replay everything as if FORCE said nothing.
func TestForceNeedsRetire(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "-n", "-o", "ops", "replay", "FORCE=1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FORCE=1 gives up the objects RETIRE names") {
		t.Errorf("make replay FORCE=1: err %v; want make stopped, naming RETIRE\n%s", err, out)
	}
}

// TestReasonReachesTheCommandAsTyped: a reason, keys or a user given on
// make's command line reach the command as typed: make expands no $( and
// no $$ in them.
func TestReasonReachesTheCommandAsTyped(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	echo := filepath.Join(tmp, "ops")
	script := "#!/bin/sh\nprintf 'REASON=[%s] RETIRE=[%s] WHO=[%s]\\n' \"$REASON\" \"$RETIRE\" \"$WHO\"\n"
	if err := os.WriteFile(echo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	reason, keys, who := `poison $(HOME) $$x "q"`, `aws/lambda/$(k)`, `grace$$1`
	for _, target := range []string{"replay", "admin-add"} {
		cmd := exec.Command("make", "-s", "--no-print-directory", "-o", "ops", target, "OPS_BIN="+echo,
			"RETIRE="+keys, "REASON="+reason, "WHO="+who)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
		want := "REASON=[" + reason + "] RETIRE=[" + keys + "] WHO=[" + who + "]"
		if !strings.Contains(string(out), want) {
			t.Errorf("make %s: the command saw\n%s\nwant %s", target, out, want)
		}
	}
}
