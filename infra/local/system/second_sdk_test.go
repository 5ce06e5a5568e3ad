package system_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestSecondSDK runs testdata/second_sdk.py against a running system: boto3
// (Python's AWS SDK, which checks DynamoDB's response checksums) on the
// DynamoDB, Streams and S3 endpoints, plain HTTP on the API. Another SDK must
// see what the Go SDK sees: tables, TTL, a sweep's REMOVE with its service
// identity, the archive object, the gateway's answers.
func TestSecondSDK(t *testing.T) {
	sys := start(t, nil, 200*time.Millisecond)
	var names []string
	for _, tb := range tables.All() {
		names = append(names, sys.Env[tb.EnvVar])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python(t), "testdata/second_sdk.py")
	cmd.Env = append(os.Environ(),
		"SHOPSTREAM_DYNAMODB="+sys.DynamoDBURL,
		"SHOPSTREAM_S3="+sys.S3URL,
		"SHOPSTREAM_API="+sys.APIURL,
		"SHOPSTREAM_BUCKET="+envcontract.LocalArchiveBucket,
		"SHOPSTREAM_CARTS_TABLE="+sys.Env["CARTS_TABLE"],
		"SHOPSTREAM_TABLES="+strings.Join(names, ","),
		// Endpoints and credentials come from the script alone.
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("second_sdk.py:\n%s", out)
	if err != nil {
		t.Fatalf("second_sdk.py: %v", err)
	}
	passed := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ok  ") {
			passed++
		}
	}
	if passed != 15 {
		t.Errorf("checks passed: got %d, want 15", passed)
	}
}

// python is the first Python 3 that has boto3: the one on PATH, else the
// system's (where Debian's python3-boto3 goes).
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import boto3").Run() == nil {
			return p
		}
	}
	t.Fatal("no python3 with boto3 (pip install boto3, or apt-get install python3-boto3; .ci/run does it)")
	return ""
}
