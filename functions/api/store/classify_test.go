package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/shared/errcode"
)

// TestBusyDatabaseIsUnavailable: every answer by which DynamoDB says "not
// now" reaches the client as a 503 to retry, never a 500, once the SDK's
// own retries are spent: TransactionInProgressException included, which a
// retried TransactWriteItems gets while its first attempt is still held.
func TestBusyDatabaseIsUnavailable(t *testing.T) {
	for _, code := range []string{
		"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
		"TransactionConflictException", "TransactionInProgressException",
		"InternalServerError", "ServiceUnavailable", "LimitExceededException",
	} {
		err := classify(fmt.Errorf("put: %w", &smithy.GenericAPIError{Code: code, Message: "busy"}))
		var ec *errcode.Error
		if !errors.As(err, &ec) || ec.Code != errcode.Unavailable {
			t.Errorf("%s: got %v, want errcode.Unavailable", code, err)
		}
	}
	if err := classify(&smithy.GenericAPIError{Code: "ValidationException", Message: "Invalid UpdateExpression"}); errors.As(err, new(*errcode.Error)) {
		t.Errorf("a malformed expression is the code's fault, not the client's: %v", err)
	}
}
