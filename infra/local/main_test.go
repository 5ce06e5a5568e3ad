package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/ports"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

func TestLoadSettings(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	got, err := load(env(nil))
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if got.DynamoDBPort != 8000 || got.S3Port != 9000 || got.SearchPort != 9200 || got.APIPort != 3000 || got.SweepInterval != 5*time.Second || got.ArchiveBucket != "shopstream-archive" ||
		got.FailureBucket != "shopstream-failures" {
		t.Errorf("defaults: got %+v", got)
	}
	if got.DuplicateEvery != 0 {
		t.Errorf("DuplicateEvery: got %d, want 0 (system.DefaultDuplicateEvery)", got.DuplicateEvery)
	}
	got, err = load(env(map[string]string{"DYNAMODB_PORT": "8100", "TTL_SWEEP_INTERVAL": "2s", "FAILURE_BUCKET": "drill-failures", "DUPLICATE_BATCH_EVERY": "3"}))
	if err != nil || got.DynamoDBPort != 8100 || got.SweepInterval != 2*time.Second || got.FailureBucket != "drill-failures" || got.DuplicateEvery != 3 {
		t.Errorf("overrides: got %+v, %v", got, err)
	}
	if got, err = load(env(map[string]string{"DUPLICATE_BATCH_EVERY": "off"})); err != nil || got.DuplicateEvery >= 0 {
		t.Errorf("DUPLICATE_BATCH_EVERY=off: got %d, %v; want a negative number", got.DuplicateEvery, err)
	}
	if got, err = load(env(map[string]string{"DYNAMODB_STALE_READS": "50ms"})); err != nil || got.Limits.StaleReads != 50*time.Millisecond {
		t.Errorf("DYNAMODB_STALE_READS=50ms: got %v, %v", got.Limits.StaleReads, err)
	}
	if got, err = load(env(map[string]string{"DYNAMODB_STALE_READS": "off"})); err != nil || got.Limits.StaleReads >= 0 {
		t.Errorf("DYNAMODB_STALE_READS=off: got %v, %v; want a negative duration", got.Limits.StaleReads, err)
	}
	if got, err = load(env(map[string]string{"STREAM_PARTITIONS": "1"})); err != nil || got.StreamPartitions != 1 {
		t.Errorf("STREAM_PARTITIONS=1: got %d, %v", got.StreamPartitions, err)
	}
	if got, err = load(env(nil)); err != nil || got.ReservedConcurrency != nil {
		t.Errorf("ReservedConcurrency by default: got %v, %v; want nil (prod's)", got.ReservedConcurrency, err)
	}
	for v, want := range map[string]map[string]int{
		"none": {}, "prod": wiring.ProdReservedConcurrency(),
		"archiver=2, stream-indexer=3": {wiring.Archiver: 2, wiring.StreamIndexer: 3},
	} {
		if got, err = load(env(map[string]string{"RESERVED_CONCURRENCY": v})); err != nil || !maps.Equal(got.ReservedConcurrency, want) {
			t.Errorf("RESERVED_CONCURRENCY=%s: got %v, %v; want %v", v, got.ReservedConcurrency, err, want)
		}
	}
	if got, err = load(env(nil)); err != nil || got.StreamPartitions != 0 {
		t.Errorf("StreamPartitions: got %d, %v; want 0 (system.DefaultStreamPartitions)", got.StreamPartitions, err)
	}
	if got, err = load(env(nil)); err != nil || got.NoAPIThrottle || got.APIThrottle != routes.ProdThrottle {
		t.Errorf("API throttling by default: got %+v off=%v, %v; want prod's %+v", got.APIThrottle, got.NoAPIThrottle, err, routes.ProdThrottle)
	}
	if got, err = load(env(map[string]string{"API_RATE_LIMIT": "50", "API_BURST_LIMIT": "100"})); err != nil || got.APIThrottle != (routes.Throttle{Rate: 50, Burst: 100}) {
		t.Errorf("API_RATE_LIMIT=50 API_BURST_LIMIT=100: got %+v, %v", got.APIThrottle, err)
	}
	if got, err = load(env(map[string]string{"API_THROTTLING": "off"})); err != nil || !got.NoAPIThrottle {
		t.Errorf("API_THROTTLING=off: got off=%v, %v", got.NoAPIThrottle, err)
	}
	for _, bad := range []map[string]string{{"S3_PORT": "x"}, {"API_PORT": "70000"}, {"TTL_SWEEP_INTERVAL": "5"}, {"TTL_SWEEP_INTERVAL": "-1s"},
		{"DUPLICATE_BATCH_EVERY": "-1"}, {"DUPLICATE_BATCH_EVERY": "x"}, {"DUPLICATE_BATCH_EVERY": "0"},
		{"API_THROTTLING": "no"}, {"API_RATE_LIMIT": "0"}, {"STREAM_PARTITIONS": "0"}, {"STREAM_PARTITIONS": "65"}, {"DYNAMODB_STALE_READS": "0s"}, {"DYNAMODB_STALE_READS": "x"}, {"API_BURST_LIMIT": "1.5"},
		{"RESERVED_CONCURRENCY": "api=2"}, {"RESERVED_CONCURRENCY": "archiver=0"}, {"RESERVED_CONCURRENCY": "archiver"}, {"RESERVED_CONCURRENCY": "archiver=1,archiver=2"}} {
		if _, err := load(env(bad)); err == nil {
			t.Errorf("%v: got nil error, want one", bad)
		}
	}
}

// TestTokenCommand: `make token` prints a token whose email claim is EMAIL=
// when given, else <sub>@example.com.
func TestTokenCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"-sub", "u1"}, map[string]any{"sub": "u1", "email": "u1@example.com", "email_verified": true}},
		{[]string{"-sub", "u2", "-admin", "-email", "grace@example.com"}, map[string]any{"sub": "u2", "email": "grace@example.com", "email_verified": true, "cognito:groups": []any{"admin"}}},
		// make token UNVERIFIED=1: Cognito's ID token after an address change
		// not yet confirmed, a JSON boolean as Cognito signs it.
		{[]string{"-sub", "u3", "-email", "victim@example.com", "-unverified"}, map[string]any{"sub": "u3", "email": "victim@example.com", "email_verified": false}},
	} {
		var out bytes.Buffer
		if err := token(tc.args, func(string) string { return "" }, &out); err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(strings.TrimSpace(out.String()), ".")
		if len(parts) != 3 {
			t.Fatalf("got %q, want a JWT", out.String())
		}
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		var claims map[string]any
		if err := json.Unmarshal(raw, &claims); err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.want {
			if got, _ := json.Marshal(claims[k]); string(got) != mustJSON(t, v) {
				t.Errorf("%v: got %s = %s, want %s", tc.args, k, got, mustJSON(t, v))
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type proc struct {
	cmd    *exec.Cmd
	jvmPid int
	ddbURL string
	s3URL  string
	apiURL string
	// gets and getReadMilliUnits count the API's GET /products/{productId}
	// requests and the read units they consumed (thousandths), from its
	// request log lines.
	gets, getReadMilliUnits atomic.Int64
}

// startBinary runs the built stack and waits for its "ready" log line.
func startBinary(t testing.TB, bin string, env []string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stack: %v", err)
	}
	p := &proc{cmd: cmd}
	// A test that fails before it stops the stack leaves no process behind.
	t.Cleanup(func() {
		if syscall.Kill(cmd.Process.Pid, 0) == nil {
			cmd.Process.Kill()
		}
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		var last []string // the stack's last lines, for a stack that exits
		for sc.Scan() {
			if !sent {
				last = append(last, sc.Text())
				if len(last) > 12 {
					last = last[1:]
				}
			}
			var line struct {
				Msg              string  `json:"msg"`
				Service          string  `json:"service"`
				URL              string  `json:"url"`
				DynamoDBLocalPid int     `json:"dynamodbLocalPid"`
				Route            string  `json:"route"`
				ReadUnits        float64 `json:"readUnits"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case line.Msg == "endpoint" && line.Service == "dynamodb":
				p.ddbURL, p.jvmPid = line.URL, line.DynamoDBLocalPid
			case line.Msg == "endpoint" && line.Service == "s3":
				p.s3URL = line.URL
			case line.Msg == "endpoint" && line.Service == "api":
				p.apiURL = line.URL
			case line.Msg == "request" && line.Route == "GET /products/{productId}":
				p.gets.Add(1)
				p.getReadMilliUnits.Add(int64(line.ReadUnits * 1000))
			case line.Msg == "ready" && !sent:
				ready <- nil
				sent = true
			}
		}
		if !sent {
			ready <- fmt.Errorf("stack exited before it was ready; its last lines:\n%s", strings.Join(last, "\n"))
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatal("stack not ready after 90s")
	}
	return p
}

func TestKillNineKeepsAcknowledgedWritesAndLeavesNoOrphan(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "local")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := []string{
		"DATA_DIR=" + filepath.Join(dir, "data"),
		"DYNAMODB_PORT=" + strconv.Itoa(freePort(t)),
		"S3_PORT=" + strconv.Itoa(freePort(t)),
		"SEARCH_PORT=" + strconv.Itoa(freePort(t)),
		"OTLP_PORT=" + strconv.Itoa(freePort(t)),
		"API_PORT=" + strconv.Itoa(freePort(t)),
		"TTL_SWEEP_INTERVAL=200ms",
		"LOG_LEVEL=INFO",
	}
	p := startBinary(t, bin, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := endpoints.AWSConfig()
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(p.ddbURL) })
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(p.s3URL); o.UsePathStyle = true })

	orders := tables.Physical("", tables.Orders)
	const n = 50
	for i := 0; i < n; i++ {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(orders), Item: map[string]types.AttributeValue{
			"userId": &types.AttributeValueMemberS{Value: "u1"}, "orderId": &types.AttributeValueMemberS{Value: "o" + strconv.Itoa(1000+i)},
		}}); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	expired := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(orders), Item: map[string]types.AttributeValue{
		"userId": &types.AttributeValueMemberS{Value: "u2"}, "orderId": &types.AttributeValueMemberS{Value: "old"},
		"expiresAt": &types.AttributeValueMemberN{Value: expired},
	}}); err != nil {
		t.Fatalf("put expired: %v", err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("shopstream-archive"), Key: aws.String("k/1"), Body: bytes.NewReader([]byte("kept"))}); err != nil {
		t.Fatalf("put object: %v", err)
	}
	// Wait until the sweeper has removed the expired order.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(orders), Key: map[string]types.AttributeValue{
			"userId": &types.AttributeValueMemberS{Value: "u2"}, "orderId": &types.AttributeValueMemberS{Value: "old"}},
			ConsistentRead: aws.Bool(true)}) // an eventually consistent read may not see the item yet
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if out.Item == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("expired order not swept after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	if p.jvmPid == 0 {
		t.Fatal("the stack did not log DynamoDB Local's pid")
	}
	deadline = time.Now().Add(15 * time.Second)
	for syscall.Kill(p.jvmPid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(p.jvmPid, syscall.SIGKILL)
			t.Fatalf("DynamoDB Local (pid %d) outlived the killed stack", p.jvmPid)
		}
		time.Sleep(50 * time.Millisecond)
	}

	p = startBinary(t, bin, env)
	stopped := false
	defer func() {
		if !stopped {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}()
	db = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(p.ddbURL) })
	s3c = s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(p.s3URL); o.UsePathStyle = true })
	count, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(orders), KeyConditionExpression: aws.String("userId = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberS{Value: "u1"}}, Select: types.SelectCount})
	if err != nil || count.Count != n {
		t.Fatalf("orders after kill -9: got %d (err %v), want %d", count.Count, err, n)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(orders)})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Fatalf("ttl after kill -9: got %+v (err %v)", ttl.TimeToLiveDescription, err)
	}
	obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("shopstream-archive"), Key: aws.String("k/1")})
	if err != nil {
		t.Fatalf("object after kill -9: %v", err)
	}
	body, _ := io.ReadAll(obj.Body)
	if string(body) != "kept" {
		t.Errorf("object body: got %q, want %q", body, "kept")
	}
	// Every stream record is still there, and the sweeper's removal still reads as the service's.
	streams := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(p.ddbURL) })
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(orders)})
	if err != nil {
		t.Fatal(err)
	}
	sd, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	inserts, serviceRemovals := 0, 0
	for _, sh := range sd.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: desc.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: "TRIM_HORIZON"})
		if err != nil {
			t.Fatal(err)
		}
		for next := it.ShardIterator; next != nil; {
			page, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				switch {
				case r.EventName == "INSERT":
					inserts++
				case r.EventName == "REMOVE" && r.UserIdentity != nil && strings.EqualFold(aws.ToString(r.UserIdentity.PrincipalId), "dynamodb.amazonaws.com"):
					serviceRemovals++
				}
			}
			if len(page.Records) == 0 {
				break
			}
			next = page.NextShardIterator
		}
	}
	if inserts != n+1 || serviceRemovals != 1 {
		t.Errorf("stream after kill -9: got %d inserts and %d service removals, want %d and 1", inserts, serviceRemovals, n+1)
	}

	// SIGTERM stops the stack cleanly, JVM included.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("exit after SIGTERM: got %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("stack still running 20s after SIGTERM")
	}
	if syscall.Kill(p.jvmPid, 0) == nil {
		t.Errorf("DynamoDB Local (pid %d) still running after a clean stop", p.jvmPid)
	}
}

// TestSecondStackRefusedAndSIGHUPStopsCleanly runs the stack binary on a
// DATA_DIR, then a second one on the same directory, which exits at once
// with a clear message; closing the terminal (SIGHUP) then stops the first
// cleanly, DynamoDB Local included, and frees the directory.
func TestSecondStackRefusedAndSIGHUPStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "local")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := func() []string {
		return []string{
			"DATA_DIR=" + filepath.Join(dir, "data"),
			"DYNAMODB_PORT=" + strconv.Itoa(freePort(t)),
			"S3_PORT=" + strconv.Itoa(freePort(t)),
			"SEARCH_PORT=" + strconv.Itoa(freePort(t)),
			"OTLP_PORT=" + strconv.Itoa(freePort(t)),
			"API_PORT=" + strconv.Itoa(freePort(t)),
		}
	}
	p := startBinary(t, bin, env())

	second := exec.Command(bin)
	second.Env = append(os.Environ(), env()...)
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another local stack") {
		t.Errorf("second stack: got %v\n%s\nwant a refusal naming the DATA_DIR in use", err, out)
	}
	if syscall.Kill(p.jvmPid, 0) != nil {
		t.Fatalf("the first stack's DynamoDB Local died when the second was refused")
	}

	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGHUP: got %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Fatal("stack still running 20s after SIGHUP")
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(p.jvmPid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("DynamoDB Local (pid %d) still running after the stack stopped", p.jvmPid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	again := startBinary(t, bin, env())
	again.cmd.Process.Signal(syscall.SIGTERM)
	again.cmd.Wait()
}
