package target

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
)

// TestPatientWaitsOutThrottlingOnly: the operator commands' clients try a
// call PatientAttempts times; after a throttle the wait grows toward 20 s,
// after any other failure it stays under a second, so a gone endpoint ends
// a run in seconds.
func TestPatientWaitsOutThrottlingOnly(t *testing.T) {
	r := Patient()
	if r.MaxAttempts() != PatientAttempts {
		t.Fatalf("attempts %d, want %d", r.MaxAttempts(), PatientAttempts)
	}
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	slowDown := &smithy.GenericAPIError{Code: "SlowDown"}
	gone := errors.New("dial tcp 127.0.0.1:8000: connect: connection refused")
	var longest time.Duration
	for range 200 {
		for _, err := range []error{throttle, slowDown} {
			d, e := r.RetryDelay(10, err)
			if e != nil || d > 20*time.Second {
				t.Fatalf("delay after %v: %v, %v; want at most 20 s", err, d, e)
			}
			longest = max(longest, d)
		}
		if d, e := r.RetryDelay(10, gone); e != nil || d > time.Second {
			t.Fatalf("delay after a refused connection: %v, %v; want at most 1 s", d, e)
		}
	}
	// Not every worker in step: the waits after failures differ.
	waits := map[time.Duration]bool{}
	for range 20 {
		d, _ := r.RetryDelay(5, gone)
		waits[d] = true
	}
	if len(waits) < 2 {
		t.Errorf("20 waits after a failure: %v; want them drawn at random", waits)
	}
	// AWS_MAX_ATTEMPTS (the configuration's RetryMaxAttempts) does not cut
	// the operator commands' attempts short.
	tg := &Target{AWS: aws.Config{Region: "us-east-1", RetryMaxAttempts: 3}, DynamoDBURL: "http://127.0.0.1:1", S3URL: "http://127.0.0.1:1"}
	if got := tg.DynamoDB().Options().Retryer.MaxAttempts(); got != PatientAttempts {
		t.Errorf("DynamoDB client with RetryMaxAttempts 3 configured: %d attempts, want %d", got, PatientAttempts)
	}
	if got := tg.S3().Options().Retryer.MaxAttempts(); got != PatientAttempts {
		t.Errorf("S3 client with RetryMaxAttempts 3 configured: %d attempts, want %d", got, PatientAttempts)
	}
	if longest < 2*time.Second {
		t.Errorf("longest wait after a throttle in 400 draws: %v; want it to grow past 2 s", longest)
	}
	var _ aws.Retryer = r
}
