// Command pre-token is the user pool's pre-token-generation trigger
// (package tokengate): the admin group reaches a token only for an admin
// with TOTP enabled.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"

	"github.com/shopstream/shopstream/functions/pre-token/tokengate"
)

func main() {
	if err := run(context.Background()); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("pre-token stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	h := &tokengate.Handler{
		// Two attempts: Cognito waits 5 s for the trigger, and the
		// handler's own 2 s bound must end before that.
		Users:  cip.NewFromConfig(awsCfg, func(o *cip.Options) { o.RetryMaxAttempts = 2 }),
		Logger: lambdacontext.NewLogger().With("function", "pre-token"),
	}
	lambda.StartHandlerFunc(h.Handle)
	return nil
}
