// Command stream-indexer is the Lambda that keeps the products search index in
// step with the products stream (package indexing).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	requestsigner "github.com/opensearch-project/opensearch-go/v4/signer/awsv2"

	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/tracing"
	"github.com/shopstream/shopstream/shared/wiring"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("stream-indexer stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	tr, err := tracing.ForFunction(ctx, wiring.StreamIndexer, getenv, awsCfg)
	if err != nil {
		return err
	}
	client, err := searchClient(getenv, awsCfg, tr)
	if err != nil {
		return err
	}
	logger := tracing.Logger(lambdacontext.NewLogger().With("function", wiring.StreamIndexer))
	h := indexing.New(indexing.Deps{
		Search:   client,
		Logger:   logger,
		Reporter: &batchmetrics.Reporter{Function: wiring.StreamIndexer, Logger: logger, Metrics: os.Stdout},
	})
	lambda.StartHandlerFunc(tracing.Flushing(tr, tr.Stream(wiring.StreamIndexer, h.Handle)))
	return nil
}

// searchClient connects to SEARCH_URL. Requests are SigV4-signed for Amazon
// OpenSearch Service: when SEARCH_SIGV4 says so, or, when it is unset, when the
// endpoint is an AWS one. The local search service gets plain HTTP.
func searchClient(getenv func(string) string, awsCfg aws.Config, tr *tracing.Tracing) (*opensearchapi.Client, error) {
	endpoint := getenv(envcontract.SearchURL)
	if endpoint == "" {
		return nil, fmt.Errorf("config: %s is not set", envcontract.SearchURL)
	}
	sign, err := productsearch.Signed(endpoint, getenv(envcontract.SearchSigV4))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	osCfg := opensearch.Config{Addresses: []string{endpoint},
		Transport: tr.Transport(&http.Transport{ResponseHeaderTimeout: 10 * time.Second})}
	if sign {
		if osCfg.Signer, err = requestsigner.NewSignerWithService(awsCfg, "es"); err != nil {
			return nil, fmt.Errorf("sigv4 signer: %w", err)
		}
	}
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: osCfg})
	if err != nil {
		return nil, fmt.Errorf("search client: %w", err)
	}
	return client, nil
}
