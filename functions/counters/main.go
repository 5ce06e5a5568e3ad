// Command counters is the Lambda that keeps users' and products' counters
// exact from the orders and reviews streams (package counting).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/tracing"
	"github.com/shopstream/shopstream/shared/wiring"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("counters stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	t, err := envcontract.Of(wiring.Counters).ReadTables(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(func() aws.Retryer { return retry.NewAdaptiveMode() }))
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	tr, err := tracing.ForFunction(ctx, wiring.Counters, getenv, awsCfg)
	if err != nil {
		return err
	}
	logger := tracing.Logger(lambdacontext.NewLogger().With("function", wiring.Counters))
	// The counters' writes on products carry their batch's traceparent, so
	// the indexer's batch links to them.
	h := counting.New(counting.Deps{
		DB:       dynamodb.NewFromConfig(awsCfg, tr.DynamoDB(), tracing.Stamp(t.Products)),
		Tables:   t,
		Logger:   logger,
		Reporter: &batchmetrics.Reporter{Function: wiring.Counters, Logger: logger, Metrics: os.Stdout},
	})
	lambda.StartHandlerFunc(tracing.Flushing(tr, tr.Stream(wiring.Counters, h.Handle)))
	return nil
}
