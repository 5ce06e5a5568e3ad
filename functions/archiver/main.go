// Command archiver is the Lambda that writes TTL removals of orders and carts
// to the S3 archive (package archiving).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/tracing"
	"github.com/shopstream/shopstream/shared/wiring"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("archiver stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	bucket := getenv(envcontract.ArchiveBucket)
	if bucket == "" {
		return fmt.Errorf("config: %s is not set", envcontract.ArchiveBucket)
	}
	tbls, err := envcontract.Of(wiring.Archiver).ReadTables(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	// Path-style addressing when an endpoint is given (the local S3).
	pathStyle := getenv(envcontract.S3Endpoint) != "" || getenv(envcontract.Endpoint) != ""
	tr, err := tracing.ForFunction(ctx, wiring.Archiver, getenv, awsCfg)
	if err != nil {
		return err
	}
	logger := tracing.Logger(lambdacontext.NewLogger().With("function", wiring.Archiver))
	h := archiving.New(archiving.Deps{
		S3:       s3.NewFromConfig(awsCfg, tr.S3(), func(o *s3.Options) { o.UsePathStyle = pathStyle }),
		Bucket:   bucket,
		Tables:   tbls,
		Logger:   logger,
		Reporter: &batchmetrics.Reporter{Function: wiring.Archiver, Logger: logger, Metrics: os.Stdout},
	})
	lambda.StartHandlerFunc(tracing.Flushing(tr, tr.Stream(wiring.Archiver, h.Handle)))
	return nil
}
