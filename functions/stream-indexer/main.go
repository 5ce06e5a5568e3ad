// Command stream-indexer is the Lambda that keeps the products search index in
// step with the products stream (package indexing).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	requestsigner "github.com/opensearch-project/opensearch-go/v4/signer/awsv2"

	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/shared/batchmetrics"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("stream-indexer stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	url := getenv("SEARCH_URL")
	if url == "" {
		return errors.New("config: SEARCH_URL is not set")
	}
	// Requests are SigV4-signed for Amazon OpenSearch Service; the local
	// search service ignores the signature.
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	signer, err := requestsigner.NewSignerWithService(awsCfg, "es")
	if err != nil {
		return fmt.Errorf("sigv4 signer: %w", err)
	}
	osCfg := opensearch.Config{Addresses: []string{url}, Signer: signer,
		Transport: &http.Transport{ResponseHeaderTimeout: 10 * time.Second}}
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: osCfg})
	if err != nil {
		return fmt.Errorf("search client: %w", err)
	}
	logger := lambdacontext.NewLogger()
	h := indexing.New(indexing.Deps{
		Search:   client,
		Logger:   logger,
		Reporter: &batchmetrics.Reporter{Function: "stream-indexer", Logger: logger, Metrics: os.Stdout},
	})
	lambda.StartHandlerFunc(h.Handle)
	return nil
}
