// Command archiver is the Lambda that writes TTL removals of orders and carts
// to the S3 archive (package archiving).
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
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/shared/batchmetrics"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("archiver stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	bucket := getenv("ARCHIVE_BUCKET")
	if bucket == "" {
		return errors.New("config: ARCHIVE_BUCKET is not set")
	}
	tbls, err := archiving.TablesFromEnv(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	// Path-style addressing when an endpoint is given (the local S3).
	pathStyle := getenv("AWS_ENDPOINT_URL_S3") != "" || getenv("AWS_ENDPOINT_URL") != ""
	logger := lambdacontext.NewLogger().With("function", "archiver")
	h := archiving.New(archiving.Deps{
		S3:       s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = pathStyle }),
		Bucket:   bucket,
		Tables:   tbls,
		Logger:   logger,
		Reporter: &batchmetrics.Reporter{Function: "archiver", Logger: logger, Metrics: os.Stdout},
	})
	lambda.StartHandlerFunc(h.Handle)
	return nil
}
