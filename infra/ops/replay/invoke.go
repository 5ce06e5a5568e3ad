package replay

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shopstream/shopstream/shared/wiring"
)

// Handler is a stream function's handler, as the local mappings call it.
type Handler interface {
	Handle(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

// Handlers invokes in-process handlers by function name (the local stack's
// way): with a Lambda context and the function's timeout, a panic being a
// function error, as the local event-source mappings invoke them.
type Handlers map[string]Handler

// Invoke runs the function's handler on ev.
func (h Handlers) Invoke(ctx context.Context, function string, ev events.DynamoDBEvent) (resp events.DynamoDBEventResponse, err error) {
	handler, ok := h[function]
	if !ok {
		return resp, fmt.Errorf("no function %q: %w", function, ErrCall)
	}
	var id [16]byte
	rand.Read(id[:])
	lc := &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("%x-%x-%x-%x-%x", id[:4], id[4:6], id[6:8], id[8:10], id[10:]),
		InvokedFunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:" + function}
	ctx, cancel := context.WithTimeout(lambdacontext.NewContext(ctx, lc), wiring.Timeout(function))
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("function %s panicked: %v", function, v)
		}
	}()
	return handler.Handle(ctx, ev)
}

// LiveAlias is the alias every deployed function serves its traffic by.
const LiveAlias = "live"

type lambdaInvoker interface {
	Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Lambda invokes the deployed functions (a stage's way): a synchronous
// lambda:Invoke with the batch as payload, the event the mapping would give.
type Lambda struct {
	Client lambdaInvoker
	// Names maps a function (shared/wiring) to its deployed name.
	Names map[string]string
}

// Invoke calls the deployed function. A function error (an unhandled error,
// a timeout) is an error naming it; the answer is the function's response.
func (l *Lambda) Invoke(ctx context.Context, function string, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	name := l.Names[function]
	if name == "" {
		return resp, fmt.Errorf("no deployed name for function %q: %w", function, ErrCall)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return resp, fmt.Errorf("encode event for %s: %w: %w", name, ErrCall, err)
	}
	// The live alias, as the mappings call it: during or after a release
	// that rolled back, $LATEST holds the code the alias moved away from.
	out, err := l.Client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(name), Qualifier: aws.String(LiveAlias), Payload: payload})
	if err != nil {
		return resp, fmt.Errorf("invoke %s: %w: %w", name, ErrCall, err)
	}
	if out.FunctionError != nil {
		return resp, fmt.Errorf("invoke %s: %s: %s", name, aws.ToString(out.FunctionError), out.Payload)
	}
	if err := json.Unmarshal(out.Payload, &resp); err != nil {
		return resp, fmt.Errorf("invoke %s: answer %q: %w", name, out.Payload, err)
	}
	return resp, nil
}
