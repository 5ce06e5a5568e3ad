// Package smoke holds the pre-traffic check of an API release: before
// CodeDeploy shifts any traffic to a new version of the API, a few public
// requests go through that version, and the verdict goes back to CodeDeploy,
// which rolls the release back on a failure.
package smoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/codedeploy"
	"github.com/aws/aws-sdk-go-v2/service/codedeploy/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// Event is what CodeDeploy sends a lifecycle hook.
type Event struct {
	DeploymentID                  string `json:"DeploymentId"`
	LifecycleEventHookExecutionID string `json:"LifecycleEventHookExecutionId"`
}

type invoker interface {
	Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

type reporter interface {
	PutLifecycleEventHookExecutionStatus(context.Context, *codedeploy.PutLifecycleEventHookExecutionStatusInput, ...func(*codedeploy.Options)) (*codedeploy.PutLifecycleEventHookExecutionStatusOutput, error)
}

// Handler runs the check.
type Handler struct {
	Lambda     invoker
	CodeDeploy reporter
	// Target is the ARN of the version under release.
	Target string
	Logger *slog.Logger
}

// Probe is one request of the check and the status it must answer.
type Probe struct {
	Path   string
	Query  string
	Status int
}

// Probes are public requests that need no data: the health check, and a
// category list that reads the products index (the tables, the role and
// the cursor key are in order).
var Probes = []Probe{
	{Path: "/healthz", Status: 200},
	{Path: "/products", Query: "category=release-smoke-check", Status: 200},
}

// Result is the verdict the hook reported.
type Result struct {
	Status string `json:"status"`
}

// Handle checks the target and reports the verdict. It fails only when the
// verdict cannot be reported: CodeDeploy then times the hook out and rolls
// the release back.
func (h *Handler) Handle(ctx context.Context, ev Event) (Result, error) {
	if ev.DeploymentID == "" || ev.LifecycleEventHookExecutionID == "" {
		return Result{}, errors.New("not a CodeDeploy lifecycle event: no DeploymentId or LifecycleEventHookExecutionId")
	}
	status := types.LifecycleEventStatusSucceeded
	if err := h.check(ctx); err != nil {
		h.Logger.ErrorContext(ctx, "release smoke check failed", "deploymentId", ev.DeploymentID, "target", h.Target, "error", err.Error())
		status = types.LifecycleEventStatusFailed
	} else {
		h.Logger.InfoContext(ctx, "release smoke check passed", "deploymentId", ev.DeploymentID, "target", h.Target, "count", len(Probes))
	}
	_, err := h.CodeDeploy.PutLifecycleEventHookExecutionStatus(ctx, &codedeploy.PutLifecycleEventHookExecutionStatusInput{
		DeploymentId:                  aws.String(ev.DeploymentID),
		LifecycleEventHookExecutionId: aws.String(ev.LifecycleEventHookExecutionID),
		Status:                        status,
	})
	if err != nil {
		return Result{}, fmt.Errorf("report %s of deployment %s: %w", status, ev.DeploymentID, err)
	}
	return Result{Status: string(status)}, nil
}

func (h *Handler) check(ctx context.Context) error {
	for _, p := range Probes {
		if err := h.probe(ctx, p); err != nil {
			return fmt.Errorf("GET %s: %w", p.Path, err)
		}
	}
	return nil
}

func (h *Handler) probe(ctx context.Context, p Probe) error {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "GET " + p.Path, RawPath: p.Path, RawQueryString: p.Query,
		Headers: map[string]string{"user-agent": "shopstream-release-smoke"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: "GET " + p.Path, Stage: "$default", RequestID: "release-smoke",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: p.Path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
	}
	if p.Query != "" {
		q := map[string]string{}
		for _, kv := range splitQuery(p.Query) {
			q[kv[0]] = kv[1]
		}
		ev.QueryStringParameters = q
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	out, err := h.Lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(h.Target), Payload: payload})
	if err != nil {
		return fmt.Errorf("invoke: %w", err)
	}
	if out.FunctionError != nil {
		return fmt.Errorf("function error %s: %s", aws.ToString(out.FunctionError), out.Payload)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out.Payload, &resp); err != nil {
		return fmt.Errorf("answer %q: %w", out.Payload, err)
	}
	if resp.StatusCode != p.Status {
		return fmt.Errorf("got %d %s, want %d", resp.StatusCode, resp.Body, p.Status)
	}
	return nil
}

// splitQuery splits "a=b&c=d" (the probes' own, unescaped).
func splitQuery(q string) [][2]string {
	var out [][2]string
	for _, pair := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(pair, "=")
		out = append(out, [2]string{k, v})
	}
	return out
}
