package s3server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// TestFaultsAnswerAsS3Does: a fault makes the named operation fail with S3's
// error, as many times as it says, and the SDK sees S3's code; the others
// pass; DELETE clears them.
func TestFaultsAnswerAsS3Does(t *testing.T) {
	srv := memServer(t)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := client(t, srv)
	post := func(body string) int {
		resp, err := http.Post(hs.URL+"/_local/faults", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, bad := range []string{`{"code":"Teapot"}`, `{"code":"SlowDown","operation":"PutObjectTagging"}`, `{"code":"SlowDown","times":-1}`} {
		if got := post(bad); got != http.StatusBadRequest {
			t.Fatalf("fault %s: %d, want 400 (it would never fire, or never end)", bad, got)
		}
	}
	if got := post(`{"bucket":"` + bucket + `","operation":"PutObject","code":"SlowDown","times":2}`); got != http.StatusNoContent {
		t.Fatalf("add fault: %d", got)
	}
	once := func(o *s3.Options) { o.RetryMaxAttempts = 1 }
	putOnce := func() error {
		_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader([]byte("v"))}, once)
		return err
	}
	for i := range 2 {
		var api smithy.APIError
		if err := putOnce(); !errors.As(err, &api) || api.ErrorCode() != "SlowDown" {
			t.Fatalf("put %d: %v, want SlowDown", i, err)
		}
	}
	if err := putOnce(); err != nil {
		t.Fatalf("put after the fault's times: %v", err)
	}
	post(`{"operation":"GetObject","code":"InternalError"}`)
	if _, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, once); err != nil {
		t.Fatalf("head, not faulted: %v", err)
	}
	var api smithy.APIError
	if _, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, once); !errors.As(err, &api) || api.ErrorCode() != "InternalError" {
		t.Fatalf("get: %v, want InternalError", err)
	}
	req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/_local/faults", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("clear: %v", err)
	}
	if _, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, once); err != nil {
		t.Fatalf("get after clearing: %v", err)
	}
}
