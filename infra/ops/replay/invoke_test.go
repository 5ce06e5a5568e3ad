package replay

import (
	"context"
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
