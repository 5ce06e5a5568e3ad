package replay

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

type recordingLambda struct{ got *lambda.InvokeInput }

func (r *recordingLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	r.got = in
	return &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`{"batchItemFailures":[]}`)}, nil
}

// TestReplayInvokesTheLiveAlias: a replay runs the code the mappings run,
// the live alias, not $LATEST (which a rolled-back release leaves behind).
func TestReplayInvokesTheLiveAlias(t *testing.T) {
	rec := &recordingLambda{}
	l := &Lambda{Client: rec, Names: map[string]string{"counters": "shopstream-dev-counters"}}
	if _, err := l.Invoke(context.Background(), "counters", events.DynamoDBEvent{}); err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(rec.got.FunctionName) + ":" + aws.ToString(rec.got.Qualifier); got != "shopstream-dev-counters:live" {
		t.Errorf("invoked %s, want shopstream-dev-counters:live", got)
	}
}

type answeringLambda struct {
	out *lambda.InvokeOutput
	err error
}

func (a answeringLambda) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return a.out, a.err
}

// TestCallFailuresAreNotFunctionErrors: a call the Lambda API refuses, or a
// function with no deployed name, is an ErrCall (the replay stops and marks
// nothing); an error the function itself returned is not.
func TestCallFailuresAreNotFunctionErrors(t *testing.T) {
	names := map[string]string{"counters": "shopstream-dev-counters"}
	for _, c := range []struct {
		name     string
		l        *Lambda
		function string
		call     bool
	}{
		{"api refused", &Lambda{Client: answeringLambda{err: errors.New("TooManyRequestsException: Rate exceeded")}, Names: names}, "counters", true},
		{"no deployed name", &Lambda{Client: answeringLambda{}, Names: names}, "archiver", true},
		{"function error", &Lambda{Client: answeringLambda{out: &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorMessage":"boom"}`)}}, Names: names}, "counters", false},
	} {
		_, err := c.l.Invoke(context.Background(), c.function, events.DynamoDBEvent{})
		if err == nil || errors.Is(err, ErrCall) != c.call {
			t.Errorf("%s: got %v, want an error that is an ErrCall: %v", c.name, err, c.call)
		}
	}
	if _, err := (Handlers{}).Invoke(context.Background(), "counters", events.DynamoDBEvent{}); !errors.Is(err, ErrCall) {
		t.Errorf("a missing local handler: got %v, want an ErrCall", err)
	}
}
