package endpoints_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/envcontract"
)

func TestS3PutGetList(t *testing.T) {
	st := stacktest.Stack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := st.S3()
	bucket := envcontract.LocalArchiveBucket
	prefix := stacktest.Prefix(t)
	keys := []string{prefix + "orders/year=2026/month=11/day=22/a.jsonl.gz", prefix + "orders/year=2026/month=11/day=22/b.jsonl.gz", prefix + "carts/x.jsonl.gz"}
	for i, k := range keys {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader([]byte(strings.Repeat("x", i+1))), ContentType: aws.String("application/gzip")}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(keys[1])})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	body, _ := io.ReadAll(out.Body)
	if got, want := string(body), "xx"; got != want {
		t.Errorf("body: got %q, want %q", got, want)
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "orders/")})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if got, want := len(list.Contents), 2; got != want {
		t.Errorf("listed: got %d, want %d", got, want)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + "missing")})
	if err == nil || !strings.Contains(err.Error(), "NoSuchKey") {
		t.Errorf("missing key: got %v, want NoSuchKey", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("no-such-bucket"), Key: aws.String("k"), Body: bytes.NewReader(nil)})
	if err == nil || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("missing bucket: got %v, want NoSuchBucket", err)
	}
}

func TestEndpointsBindLoopbackAndAnswer(t *testing.T) {
	st := stacktest.Stack(t)
	for name, url := range map[string]string{"dynamodb": st.DynamoDBURL, "s3": st.S3URL, "search": st.SearchURL} {
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Errorf("%s: got %q, want a 127.0.0.1 URL", name, url)
		}
	}
	resp, err := http.Get(st.SearchURL + "/")
	if err != nil {
		t.Fatalf("search root: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("search root: got %d, want 200", resp.StatusCode)
	}
}

// BenchmarkStart measures how long a whole stack takes to answer, JVM included.
func BenchmarkStart(b *testing.B) {
	for i := 0; i < b.N; i++ {
		start := time.Now()
		st, err := endpoints.Start(context.Background(), endpoints.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/start")
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNoWebPageReachesTheStack: a page open in the developer's browser can
// send requests to 127.0.0.1. The stack's ports refuse them (an Origin, a
// cross-site fetch, a preflight, a rebound name), and so does DynamoDB
// Local's own port behind the front; an SDK's request still passes.
func TestNoWebPageReachesTheStack(t *testing.T) {
	st := stacktest.Stack(t)
	send := func(method, url string, header map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// with: a DynamoDB Local ListTables as an SDK sends it, plus extra.
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"X-Amz-Target": "DynamoDB_20120810.ListTables", "Content-Type": "application/x-amz-json-1.0", "Authorization": "AWS4-HMAC-SHA256 Credential=local/20261126/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	page := with(map[string]string{"Origin": "https://evil.example"})
	for name, url := range map[string]string{"dynamodb": st.DynamoDBURL + "/", "faults": st.DynamoDBURL + "/_local/faults", "s3": st.S3URL + "/", "search": st.SearchURL + "/", "dynamodb-local": st.Upstream() + "/"} {
		if resp := send("POST", url, page); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: a page's request got %d, want 403", name, resp.StatusCode)
		}
		if resp := send("OPTIONS", url, map[string]string{"Access-Control-Request-Method": "POST"}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: a preflight got %d, want 403", name, resp.StatusCode)
		}
		if resp := send("POST", url, with(map[string]string{"Host": "rebound.evil.example"})); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: a rebound name got %d, want 403", name, resp.StatusCode)
		}
		if resp := send("POST", url, with(map[string]string{"Sec-Fetch-Site": "cross-site"})); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: a cross-site fetch got %d, want 403", name, resp.StatusCode)
		}
	}
	for _, host := range []string{"localhost", "127.0.0.1", "[::1]", "LOCALHOST."} {
		u := strings.Replace(st.Upstream(), "127.0.0.1", host, 1)
		if resp := send("POST", st.Upstream()+"/", with(map[string]string{"Host": strings.TrimPrefix(u, "http://")})); resp.StatusCode != http.StatusOK {
			t.Errorf("dynamodb-local: a request addressed to %s got %d, want 200", host, resp.StatusCode)
		}
	}
	if _, err := stacktest.DynamoDB(t).ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("an SDK's request: %v", err)
	}
}
