// Package streamfunctions builds the stream functions (counters,
// stream-indexer, archiver) in-process from the environment they read on
// AWS: the local stack's event-source mappings invoke them, and `make replay`
// hands them the failure bucket's batches against the local stack. It links
// the functions' handlers and the AWS clients only, no emulator, so the
// operator commands can use it.
package streamfunctions

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/shopstream/shopstream/functions/archiver/archiving"
	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/functions/stream-indexer/indexing"
	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Handler is a stream function: one batch of records in, the records that
// failed out.
type Handler interface {
	Handle(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

// Deps are the functions' collaborators besides their environment.
type Deps struct {
	DynamoDB *dynamodb.Client
	S3       *s3.Client
	Logger   *slog.Logger
	// Metrics receives the functions' EMF lines; nil discards them.
	Metrics io.Writer
}

// Build returns the stream functions by name (shared/wiring's names), from
// the environment they read on AWS (table variables, ARCHIVE_BUCKET,
// SEARCH_URL).
func Build(getenv func(string) string, d Deps) (map[string]Handler, error) {
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
	return map[string]Handler{
		wiring.Counters: counting.New(counting.Deps{DB: d.DynamoDB, Tables: counterTables,
			Logger: d.Logger.With("function", wiring.Counters), Reporter: reporter(wiring.Counters)}),
		wiring.StreamIndexer: indexing.New(indexing.Deps{Search: search,
			Logger: d.Logger.With("function", wiring.StreamIndexer), Reporter: reporter(wiring.StreamIndexer)}),
		wiring.Archiver: archiving.New(archiving.Deps{S3: d.S3, Bucket: getenv("ARCHIVE_BUCKET"), Tables: archived,
			Logger: d.Logger.With("function", wiring.Archiver), Reporter: reporter(wiring.Archiver)}),
	}, nil
}
