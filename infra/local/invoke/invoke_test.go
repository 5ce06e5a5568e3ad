package invoke_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/local/invoke"
)

// root is the repository root (the folder of go.mod and template.yaml).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

const sampleTemplate = `AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Stage: {Type: String, Default: dev}
  Url: {Type: String, Default: ""}
Globals:
  Function:
    CodeUri: .
    Runtime: provided.al2023
    Handler: bootstrap
    Timeout: 7
    LoggingConfig: {LogFormat: JSON}
    Environment:
      Variables:
        FROM_GLOBALS: g
        OVERRIDDEN: global
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  OneFunction:
    Type: AWS::Serverless::Function
    Metadata: {BuildMethod: makefile}
    Properties:
      FunctionName: !Sub app-${Stage}-one
      MemorySize: 256
      Environment:
        Variables:
          OVERRIDDEN: local
          TABLE: !Ref Table
          URL: !Ref Url
          NAME: !Sub "${Table}-${AWS::Region}-${Stage}-${!Literal}"
          ARN: !GetAtt Table.Arn
          COUNT: 10
          RATIO: 1.5
          ENABLED: true
          EMPTY: ""
          FROM_SHELL: template
          FROM_FILE: template
          FROM_BOTH: template
  TwoFunction:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: !Sub [ "app-${S}-two", {S: !Ref Stage} ]
      Timeout: 30
`

func loadSample(t *testing.T, params map[string]string) *invoke.Template {
	t.Helper()
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(sampleTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := invoke.Load(path, params)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestTemplateAsSAMReadsIt: short tags, Globals merged as SAM merges them,
// Ref and Sub resolved as SAM resolves them locally, SAM's defaults.
func TestTemplateAsSAMReadsIt(t *testing.T) {
	tmpl := loadSample(t, nil)
	one, err := tmpl.Function("OneFunction")
	if err != nil {
		t.Fatal(err)
	}
	if one.Name != "app-dev-one" || one.MemoryMiB != 256 || one.Timeout != 7*time.Second || one.Handler != "bootstrap" ||
		one.Runtime != "provided.al2023" || one.BuildMethod != "makefile" || one.LogFormat != "JSON" || one.CodeDir != tmpl.Dir {
		t.Errorf("OneFunction: got %+v", one)
	}
	want := map[string]any{
		"FROM_GLOBALS": "g", "OVERRIDDEN": "local",
		"TABLE": "Table", // a resource's Ref is its logical id locally
		"URL":   "", "NAME": "Table-us-east-1-dev-${Literal}",
		"ARN":   map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}},
		"COUNT": 10, "RATIO": 1.5, "ENABLED": true, "EMPTY": "",
		"FROM_SHELL": "template", "FROM_FILE": "template", "FROM_BOTH": "template",
	}
	if d := cmp.Diff(want, one.Variables); d != "" {
		t.Errorf("variables (-want +got):\n%s", d)
	}
	two, err := tmpl.Function("TwoFunction")
	if err != nil {
		t.Fatal(err)
	}
	if two.Name != "app-dev-two" || two.MemoryMiB != invoke.DefaultMemoryMiB || two.Timeout != 30*time.Second || two.BuildMethod != "" {
		t.Errorf("TwoFunction: got %+v", two)
	}
	if prod, _ := loadSample(t, map[string]string{"Stage": "prod"}).Function("OneFunction"); prod == nil || prod.Name != "app-prod-one" {
		t.Errorf("with Stage=prod: got %+v", prod)
	}
	if _, err := tmpl.Function("Table"); err == nil {
		t.Error("a table found as a function")
	}
}

// TestEnvironmentAsSAMGivesIt follows samcli/local/lambdafn/env_vars.py and
// local_lambda.py: only declared variables; template, then shell (even an
// empty value), then the file ("Parameters", then the function's own entry);
// non-string values stringified as SAM does; SAM's AWS_* variables.
func TestEnvironmentAsSAMGivesIt(t *testing.T) {
	one, err := loadSample(t, nil).Function("OneFunction")
	if err != nil {
		t.Fatal(err)
	}
	shell := map[string]string{"FROM_SHELL": "shell", "FROM_BOTH": "shell", "EMPTY": "", "COUNT": "", "UNDECLARED": "x", "AWS_ACCESS_KEY_ID": "AKIDSHELL", "AWS_SECRET_ACCESS_KEY": "secret"}
	lookup := func(k string) (string, bool) { v, ok := shell[k]; return v, ok }
	file, err := invoke.ParseEnvVars([]byte(`{
	  "Parameters": {"FROM_FILE": "parameters", "FROM_BOTH": "parameters", "RATIO": 2, "ALSO_UNDECLARED": "y"},
	  "OneFunction": {"FROM_BOTH": "function", "ENABLED": false, "ARN": {"Fn::GetAtt": ["x", "y"]}, "URL": null, "NAME": 1e-05, "TABLE": 3.0},
	  "TwoFunction": {"FROM_FILE": "not this one"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	got := one.Environment(lookup, file, invoke.ShellCredentials(lookup))
	want := map[string]string{
		"FROM_GLOBALS": "g", "OVERRIDDEN": "local",
		"FROM_SHELL": "shell", "FROM_FILE": "parameters", "FROM_BOTH": "function",
		"EMPTY": "", "COUNT": "", "RATIO": "2", "ENABLED": "false", "ARN": "", "URL": "",
		"NAME": "1e-05", "TABLE": "3.0",
		"AWS_SAM_LOCAL": "true", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "AWS_LAMBDA_FUNCTION_TIMEOUT": "7",
		"AWS_LAMBDA_FUNCTION_HANDLER": "bootstrap", "AWS_LAMBDA_FUNCTION_NAME": "OneFunction",
		"AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_LAMBDA_LOG_GROUP_NAME": "aws/lambda/OneFunction",
		"AWS_LAMBDA_LOG_STREAM_NAME": "$LATEST", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "AKIDSHELL", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_ACCOUNT_ID": "123456789012",
		"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand", "AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "INFO",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("environment (-want +got):\n%s", d)
	}
	// Without the shell's credentials: SAM's placeholders.
	none := func(string) (string, bool) { return "", false }
	env := one.Environment(none, nil, invoke.ShellCredentials(none))
	if env["AWS_ACCESS_KEY_ID"] != "defaultkey" || env["AWS_SECRET_ACCESS_KEY"] != "defaultsecret" || env["FROM_SHELL"] != "template" || env["COUNT"] != "10" || env["RATIO"] != "1.5" || env["ENABLED"] != "true" {
		t.Errorf("defaults: got %v", env)
	}
	if _, err := invoke.ParseEnvVars([]byte(`{"OneFunction": "FOO=bar"}`)); err == nil {
		t.Error("an entry that is not an object: got no error")
	}
}

// TestProcessGetsNothingElse: the bootstrap's environment is SAM's plus what
// the execution environment defines, never the caller's.
func TestProcessGetsNothingElse(t *testing.T) {
	one, err := loadSample(t, nil).Function("OneFunction")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHOPSTREAM_HOST_ONLY", "leak")
	env := invoke.ProcessEnv(one, "/task/bootstrap", map[string]string{"A": "1"})
	want := []string{"A=1", "LAMBDA_RUNTIME_DIR=/var/runtime", "LAMBDA_TASK_ROOT=/task", "LANG=en_US.UTF-8",
		"PATH=/usr/local/bin:/usr/bin/:/bin:/opt/bin", "TZ=:UTC", "_HANDLER=bootstrap"}
	if d := cmp.Diff(want, env); d != "" {
		t.Errorf("process environment (-want +got):\n%s", d)
	}
}

// TestRepositoryTemplate: template.yaml's functions are found by logical id,
// FunctionName or folder; events/sam-env.json gives every declared variable
// of every function its local value, so nothing falls back to a real AWS
// endpoint, table or secret (only CURSOR_SECRET_ARN is empty there: locally
// CURSOR_SECRET is the key); the SDK endpoint variables are declared and
// empty in the template.
func TestRepositoryTemplate(t *testing.T) {
	dir := root(t)
	tmpl, err := invoke.Load(filepath.Join(dir, "template.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	file, err := invoke.ReadEnvVars(filepath.Join(dir, "events", "sam-env.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{
		"ApiFunction": "ApiFunction", "api": "ApiFunction", "shopstream-dev-api": "ApiFunction",
		"counters": "CountersFunction", "stream-indexer": "StreamIndexerFunction", "archiver": "ArchiverFunction",
	} {
		f, err := tmpl.Function(name)
		if err != nil || f.LogicalID != id {
			t.Errorf("function %q: got %v, %v; want %s", name, f, err, id)
		}
	}
	for _, name := range []string{"indexer", "functions", ""} {
		if f, err := tmpl.Function(name); err == nil {
			t.Errorf("function %q: got %s, want none", name, f.LogicalID)
		}
	}
	fns, err := tmpl.Functions()
	if err != nil || len(fns) == 0 {
		t.Fatalf("functions: %v, %v", fns, err)
	}
	none := func(string) (string, bool) { return "", false }
	for _, f := range fns {
		env := f.Environment(none, file, invoke.ShellCredentials(none))
		for name, v := range f.Variables {
			if strings.HasPrefix(name, "AWS_ENDPOINT_URL") && v != "" {
				t.Errorf("%s: %s is %v in the template, want empty", f.LogicalID, name, v)
			}
			if _, ok := file["Parameters"][name]; !ok {
				t.Errorf("%s: events/sam-env.json does not give %s", f.LogicalID, name)
			} else if env[name] == "" && name != "CURSOR_SECRET_ARN" {
				t.Errorf("%s: %s is empty in events/sam-env.json", f.LogicalID, name)
			}
		}
		if f.BuildMethod != "makefile" || f.CodeDir != dir {
			t.Errorf("%s: BuildMethod %q in %s, want makefile in %s", f.LogicalID, f.BuildMethod, f.CodeDir, dir)
		}
	}
}

// TestMakefileBuildsForSAM: `sam build` runs build-<LogicalId> with
// ARTIFACTS_DIR set; every function's target builds ./functions/<folder> for
// provided.al2023 on arm64 into $ARTIFACTS_DIR/bootstrap (dry run: make -n).
func TestMakefileBuildsForSAM(t *testing.T) {
	dir := root(t)
	tmpl, err := invoke.Load(filepath.Join(dir, "template.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := tmpl.Functions()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		folder := f.Name[strings.LastIndex(f.Name, "-dev-")+len("-dev-"):]
		cmd := exec.Command("make", "-n", "--no-print-directory", "--makefile", filepath.Join(f.CodeDir, "Makefile"), "build-"+f.LogicalID)
		cmd.Dir = f.CodeDir
		cmd.Env = append(os.Environ(), "ARTIFACTS_DIR=/sam/artifacts/"+f.LogicalID)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("make build-%s: %v\n%s", f.LogicalID, err, out)
			continue
		}
		for _, want := range []string{"GOOS=linux GOARCH=arm64 CGO_ENABLED=0", "-tags lambda.norpc", "-o /sam/artifacts/" + f.LogicalID + "/bootstrap ./functions/" + folder + "\n"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("make build-%s: %q not in\n%s", f.LogicalID, want, out)
			}
		}
	}
}

// TestSDKIgnoresAnEmptyEndpoint: the template declares the endpoint variables
// empty because the SDK then resolves the regional endpoint as if unset
// (config's EnvConfig.GetServiceBaseEndpoint skips ""), and uses a set one.
func TestSDKIgnoresAnEmptyEndpoint(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_REGION", "us-east-1")
	endpoints := func() (ddb, s3e *string) {
		cfg, err := config.LoadDefaultConfig(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return dynamodb.NewFromConfig(cfg).Options().BaseEndpoint, s3.NewFromConfig(cfg).Options().BaseEndpoint
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	if d, s := endpoints(); d != nil || s != nil {
		t.Errorf("empty variables: got endpoints %v, %v; want none (regional)", d, s)
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
	if d, s := endpoints(); d == nil || *d != "http://127.0.0.1:8000" || s == nil || *s != "http://127.0.0.1:9000" {
		t.Errorf("set variables: got endpoints %v, %v", d, s)
	}
}

// TestRunEndsAtTheFunctionsTimeout: a function that never answers is
// stopped after its Timeout and the invocation reports it.
func TestRunEndsAtTheFunctionsTimeout(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &invoke.Function{LogicalID: "SlowFunction", Handler: "bootstrap", Timeout: time.Second}
	res, err := invoke.Run(context.Background(), f, bin, invoke.ProcessEnv(f, bin, nil), []byte(`{}`), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "timed out after 1s") {
		t.Errorf("got %v, want a timeout after 1s", res.Err)
	}
}
