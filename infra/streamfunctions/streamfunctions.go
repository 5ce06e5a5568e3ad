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
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/tracing"
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
	// Tracing is each function's tracer by name (nil, or a nil result:
	// none).
	Tracing func(function string) *tracing.Tracing
}

// handlerFunc lets a traced handler be a Handler.
type handlerFunc tracing.StreamHandler

func (f handlerFunc) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return f(ctx, ev)
}

// Build returns the stream functions by name (shared/wiring's names), from
// the environment they read on AWS: each function sees only the variables of
// its contract (shared/envcontract), as a deployment gives it no other.
func Build(getenv func(string) string, d Deps) (map[string]Handler, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	d.Logger = tracing.Logger(d.Logger)
	tr := func(fn string) *tracing.Tracing {
		if d.Tracing == nil {
			return nil
		}
		return d.Tracing(fn)
	}
	counters := envcontract.Of(wiring.Counters)
	counterTables, err := counters.ReadTables(counters.Only(getenv))
	if err != nil {
		return nil, fmt.Errorf("counters config: %w", err)
	}
	archiver := envcontract.Of(wiring.Archiver)
	archiverEnv := archiver.Only(getenv)
	archived, err := archiver.ReadTables(archiverEnv)
	if err != nil {
		return nil, fmt.Errorf("archiver config: %w", err)
	}
	indexerEnv := envcontract.Of(wiring.StreamIndexer).Only(getenv)
	search, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{indexerEnv(envcontract.SearchURL)},
		Transport: tr(wiring.StreamIndexer).Transport(nil)}})
	if err != nil {
		return nil, fmt.Errorf("search client: %w", err)
	}
	reporter := func(fn string) *batchmetrics.Reporter {
		return &batchmetrics.Reporter{Function: fn, Logger: d.Logger.With("function", fn), Metrics: d.Metrics}
	}
	// Each function's clients carry its own tracer, as on AWS; the
	// counters' writes on products carry their batch's traceparent.
	db, s3c := d.DynamoDB, d.S3
	if t := tr(wiring.Counters); t.On() && db != nil {
		db = dynamodb.New(db.Options(), t.DynamoDB(), tracing.Stamp(counterTables.Products))
	}
	if t := tr(wiring.Archiver); t.On() && s3c != nil {
		s3c = s3.New(s3c.Options(), t.S3())
	}
	fns := map[string]Handler{
		wiring.Counters: counting.New(counting.Deps{DB: db, Tables: counterTables,
			Logger: d.Logger.With("function", wiring.Counters), Reporter: reporter(wiring.Counters)}),
		wiring.StreamIndexer: indexing.New(indexing.Deps{Search: search,
			Logger: d.Logger.With("function", wiring.StreamIndexer), Reporter: reporter(wiring.StreamIndexer)}),
		wiring.Archiver: archiving.New(archiving.Deps{S3: s3c, Bucket: archiverEnv(envcontract.ArchiveBucket), Tables: archived,
			Logger: d.Logger.With("function", wiring.Archiver), Reporter: reporter(wiring.Archiver)}),
	}
	for name, h := range fns {
		if t := tr(name); t.On() {
			fns[name] = handlerFunc(t.Stream(name, h.Handle))
		}
	}
	return fns, nil
}
