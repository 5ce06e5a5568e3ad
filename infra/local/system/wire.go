package system

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/esm"
	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/wiring"
)

// gateway puts the API Gateway emulation in front of the API function.
func gateway(h apigw.Invoker, cfg Config) http.Handler {
	return apigw.New(apigw.Config{Handler: h, Secret: cfg.JWTSecret, Routes: routes.All(), Logger: cfg.Logger.With("service", "apigateway")})
}

// FunctionDeps are the stream functions' collaborators besides their
// environment.
type FunctionDeps struct {
	DynamoDB *dynamodb.Client
	S3       *s3.Client
	Logger   *slog.Logger
	// Metrics receives the functions' EMF lines; nil discards them.
	Metrics io.Writer
}

// StreamFunctions builds the stream functions, by name, from the environment
// they read on AWS (table variables, ARCHIVE_BUCKET, SEARCH_URL): the
// handlers the local event-source mappings invoke, and `make replay` locally.
func StreamFunctions(getenv func(string) string, d FunctionDeps) (map[string]esm.Invoker, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	counterTables, err := counting.TablesFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("counters config: %w", err)
	}
	archived, err := archiving.TablesFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("archiver config: %w", err)
	}
	search, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{getenv("SEARCH_URL")}}})
	if err != nil {
		return nil, fmt.Errorf("search client: %w", err)
	}
	reporter := func(fn string) *batchmetrics.Reporter {
		return &batchmetrics.Reporter{Function: fn, Logger: d.Logger.With("function", fn), Metrics: d.Metrics}
	}
	return map[string]esm.Invoker{
		wiring.Counters: counting.New(counting.Deps{DB: d.DynamoDB, Tables: counterTables,
			Logger: d.Logger.With("function", wiring.Counters), Reporter: reporter(wiring.Counters)}),
		wiring.StreamIndexer: indexing.New(indexing.Deps{Search: search,
			Logger: d.Logger.With("function", wiring.StreamIndexer), Reporter: reporter(wiring.StreamIndexer)}),
		wiring.Archiver: archiving.New(archiving.Deps{S3: d.S3, Bucket: getenv("ARCHIVE_BUCKET"), Tables: archived,
			Logger: d.Logger.With("function", wiring.Archiver), Reporter: reporter(wiring.Archiver)}),
	}, nil
}

// processors builds the stream functions from the same environment they read
// on AWS and starts the event-source mappings of shared/wiring.
func (s *System) processors(ctx context.Context, getenv func(string) string, cfg Config) error {
	functions, err := StreamFunctions(getenv, FunctionDeps{DynamoDB: s.DynamoDB(), S3: s.S3(), Logger: cfg.Logger,
		Metrics: cfg.Metrics})
	if err != nil {
		return err
	}
	s.Functions = functions
	if cfg.NoMappings {
		return nil
	}
	dataDir := ""
	if cfg.Stack.DataDir != "" {
		dataDir = cfg.Stack.DataDir + "/lambda"
	}
	mappings := cfg.Mappings
	if mappings == nil {
		mappings = wiring.Mappings()
	}
	poller, err := esm.Start(ctx, esm.Config{
		DynamoDB: s.DynamoDB(), Streams: s.Streams(), TablePrefix: cfg.TablePrefix,
		Mappings: mappings, Functions: functions, PollInterval: cfg.PollInterval,
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
