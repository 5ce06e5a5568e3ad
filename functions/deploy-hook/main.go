// Command deploy-hook is the API's pre-traffic hook: CodeDeploy invokes it
// before shifting any traffic to a new API version, and it sends a few
// public requests through that version (package smoke).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/codedeploy"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shopstream/shopstream/functions/deploy-hook/smoke"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("deploy-hook stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	target := getenv("TARGET_VERSION_ARN")
	if target == "" {
		return errors.New("config: TARGET_VERSION_ARN is not set")
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	h := &smoke.Handler{
		Lambda:     awslambda.NewFromConfig(awsCfg),
		CodeDeploy: codedeploy.NewFromConfig(awsCfg),
		Target:     target,
		Logger:     lambdacontext.NewLogger().With("function", "deploy-hook"),
	}
	lambda.StartHandlerFunc(h.Handle)
	return nil
}
