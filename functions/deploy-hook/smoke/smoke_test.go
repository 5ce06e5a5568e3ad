package smoke

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/codedeploy"
	"github.com/aws/aws-sdk-go-v2/service/codedeploy/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// fakeLambda answers each invocation with answer(path) and records them.
type fakeLambda struct {
	answer func(ev events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error)
	got    []events.APIGatewayV2HTTPRequest
	target []string
}

func (f *fakeLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(in.Payload, &ev); err != nil {
		return nil, err
	}
	f.got = append(f.got, ev)
	f.target = append(f.target, aws.ToString(in.FunctionName))
	return f.answer(ev)
}

type fakeCodeDeploy struct {
	got []*codedeploy.PutLifecycleEventHookExecutionStatusInput
	err error
}

func (f *fakeCodeDeploy) PutLifecycleEventHookExecutionStatus(_ context.Context, in *codedeploy.PutLifecycleEventHookExecutionStatusInput, _ ...func(*codedeploy.Options)) (*codedeploy.PutLifecycleEventHookExecutionStatusOutput, error) {
	f.got = append(f.got, in)
	return &codedeploy.PutLifecycleEventHookExecutionStatusOutput{}, f.err
}

func answer(status int) *lambda.InvokeOutput {
	b, _ := json.Marshal(events.APIGatewayV2HTTPResponse{StatusCode: status, Body: `{}`})
	return &lambda.InvokeOutput{StatusCode: 200, Payload: b}
}

const target = "arn:aws:lambda:us-east-1:123456789012:function:shopstream-dev-api:7"

func TestVerdicts(t *testing.T) {
	ev := Event{DeploymentID: "d-ABC", LifecycleEventHookExecutionID: "hook-1"}
	tests := []struct {
		name   string
		answer func(events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error)
		want   types.LifecycleEventStatus
	}{
		{"every probe answers", func(events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error) { return answer(200), nil }, types.LifecycleEventStatusSucceeded},
		{"the list answers 500", func(e events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error) {
			if e.RawPath == "/products" {
				return answer(500), nil
			}
			return answer(200), nil
		}, types.LifecycleEventStatusFailed},
		{"the function throws", func(events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error) {
			return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorMessage":"boom"}`)}, nil
		}, types.LifecycleEventStatusFailed},
		{"the invocation fails", func(events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error) {
			return nil, errors.New("throttled")
		}, types.LifecycleEventStatusFailed},
		{"an answer that is not the API's", func(events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error) {
			return &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(`nope`)}, nil
		}, types.LifecycleEventStatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fl, fc := &fakeLambda{answer: tt.answer}, &fakeCodeDeploy{}
			h := &Handler{Lambda: fl, CodeDeploy: fc, Target: target, Logger: slog.New(slog.DiscardHandler)}
			if _, err := h.Handle(context.Background(), ev); err != nil {
				t.Fatalf("handle: %v", err)
			}
			if len(fc.got) != 1 {
				t.Fatalf("got %d reports, want 1", len(fc.got))
			}
			r := fc.got[0]
			if r.Status != tt.want || aws.ToString(r.DeploymentId) != "d-ABC" || aws.ToString(r.LifecycleEventHookExecutionId) != "hook-1" {
				t.Errorf("report: got %s for %s/%s, want %s for d-ABC/hook-1", r.Status, aws.ToString(r.DeploymentId), aws.ToString(r.LifecycleEventHookExecutionId), tt.want)
			}
			for _, got := range fl.target {
				if got != target {
					t.Errorf("invoked %s, want the version under release %s", got, target)
				}
			}
		})
	}
}

// TestProbesAreAPIEvents: the probes are public GET requests as API
// Gateway's HTTP API sends them (payload 2.0, no authorizer).
func TestProbesAreAPIEvents(t *testing.T) {
	fl := &fakeLambda{answer: func(events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error) { return answer(200), nil }}
	h := &Handler{Lambda: fl, CodeDeploy: &fakeCodeDeploy{}, Target: target, Logger: slog.New(slog.DiscardHandler)}
	if _, err := h.Handle(context.Background(), Event{DeploymentID: "d", LifecycleEventHookExecutionID: "h"}); err != nil {
		t.Fatal(err)
	}
	if len(fl.got) != len(Probes) {
		t.Fatalf("got %d requests, want %d", len(fl.got), len(Probes))
	}
	for i, ev := range fl.got {
		if ev.Version != "2.0" || ev.RequestContext.HTTP.Method != "GET" || ev.RawPath != Probes[i].Path || ev.RequestContext.Authorizer != nil {
			t.Errorf("probe %d: got %+v", i, ev)
		}
	}
	if got := fl.got[1].QueryStringParameters["category"]; got != "release-smoke-check" {
		t.Errorf("list probe's category: got %q", got)
	}
}

// TestUnreportableVerdictFails: when the verdict cannot reach CodeDeploy
// the invocation fails (CodeDeploy then times the hook out and rolls back),
// and an event without ids is refused before any probe.
func TestUnreportableVerdictFails(t *testing.T) {
	fl := &fakeLambda{answer: func(events.APIGatewayV2HTTPRequest) (*lambda.InvokeOutput, error) { return answer(200), nil }}
	h := &Handler{Lambda: fl, CodeDeploy: &fakeCodeDeploy{err: errors.New("denied")}, Target: target, Logger: slog.New(slog.DiscardHandler)}
	if _, err := h.Handle(context.Background(), Event{DeploymentID: "d", LifecycleEventHookExecutionID: "h"}); err == nil {
		t.Error("got nil, want the report's error")
	}
	fl.got = nil
	if _, err := h.Handle(context.Background(), Event{}); err == nil || len(fl.got) != 0 {
		t.Errorf("event without ids: got %v after %d probes, want an error before any", err, len(fl.got))
	}
}
