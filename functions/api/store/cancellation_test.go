package store

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestCancellationReasons(t *testing.T) {
	reasons := func(codes ...string) error {
		e := &types.TransactionCanceledException{Message: aws.String("cancelled")}
		for _, c := range codes {
			e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return fmt.Errorf("place order x: %w", e)
	}
	for _, tc := range []struct {
		name      string
		err       error
		failed    []int
		retryable bool
	}{
		{"stock condition on line 2", reasons("None", "None", "None", "ConditionalCheckFailed"), []int{3}, false},
		{"contention only", reasons("None", "TransactionConflict", "None"), nil, true},
		{"throttled", reasons("ThrottlingError", "None"), nil, true},
		{"condition beats contention", reasons("ConditionalCheckFailed", "TransactionConflict"), []int{0}, false},
		{"validation is not retried", reasons("ValidationError", "None"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := cancelled(tc.err)
			if !ok {
				t.Fatal("got no cancellation")
			}
			for i := range c.codes {
				want := false
				for _, f := range tc.failed {
					want = want || f == i
				}
				if got := c.failed(i); got != want {
					t.Errorf("failed(%d): got %v, want %v", i, got, want)
				}
			}
			if c.failed(-1) || c.failed(len(c.codes)) {
				t.Error("out-of-range actions must not report failure")
			}
			if got := c.retryable() && !c.anyCondition(); got != tc.retryable {
				t.Errorf("retryable: got %v, want %v", got, tc.retryable)
			}
		})
	}
	if _, ok := cancelled(fmt.Errorf("other")); ok {
		t.Error("a plain error is not a cancellation")
	}
}
