package system

import (
	"context"
	"fmt"
	"net/http"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/esm"
	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/wiring"
)

// gateway puts the API Gateway emulation in front of the API handler.
func gateway(h *httpapi.Handler, cfg Config) http.Handler {
	return apigw.New(apigw.Config{Handler: h, Secret: cfg.JWTSecret, Routes: routes.All(), Logger: cfg.Logger.With("service", "apigateway")})
}

// processors builds the stream functions from the same environment they read
// on AWS and starts the event-source mappings of shared/wiring.
func (s *System) processors(ctx context.Context, getenv func(string) string, cfg Config) error {
	counterTables, err := counting.TablesFromEnv(getenv)
	if err != nil {
		return fmt.Errorf("counters config: %w", err)
	}
	archived, err := archiving.TablesFromEnv(getenv)
	if err != nil {
		return fmt.Errorf("archiver config: %w", err)
	}
	search, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{getenv("SEARCH_URL")}}})
	if err != nil {
		return fmt.Errorf("search client: %w", err)
	}
	reporter := func(fn string) *batchmetrics.Reporter {
		return &batchmetrics.Reporter{Function: fn, Logger: cfg.Logger.With("function", fn), Metrics: cfg.Metrics}
	}
	functions := map[string]esm.Invoker{
		wiring.Counters: counting.New(counting.Deps{DB: s.DynamoDB(), Tables: counterTables,
			Logger: cfg.Logger.With("function", wiring.Counters), Reporter: reporter(wiring.Counters)}),
		wiring.StreamIndexer: indexing.New(indexing.Deps{Search: search,
			Logger: cfg.Logger.With("function", wiring.StreamIndexer), Reporter: reporter(wiring.StreamIndexer)}),
		wiring.Archiver: archiving.New(archiving.Deps{S3: s.S3(), Bucket: getenv("ARCHIVE_BUCKET"), Tables: archived,
			Logger: cfg.Logger.With("function", wiring.Archiver), Reporter: reporter(wiring.Archiver)}),
	}
	s.Functions = functions
	if cfg.NoMappings {
		return nil
	}
	dataDir := ""
	if cfg.Stack.DataDir != "" {
		dataDir = cfg.Stack.DataDir + "/lambda"
	}
	poller, err := esm.Start(ctx, esm.Config{
		DynamoDB: s.DynamoDB(), Streams: s.Streams(), TablePrefix: cfg.TablePrefix,
		Mappings: wiring.Mappings(), Functions: functions, PollInterval: cfg.PollInterval,
		DataDir: dataDir, Logger: cfg.Logger.With("service", "event-source-mapping"),
		Destination: &esm.S3Destination{S3: s.S3(), Bucket: s.FailureBucket},
	})
	if err != nil {
		return err
	}
	s.Poller = poller
	s.closers = append(s.closers, poller.Close)
	return nil
}
