package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	requestsigner "github.com/opensearch-project/opensearch-go/v4/signer/awsv2"

	"github.com/shopstream/shopstream/infra/ops/progress"
	"github.com/shopstream/shopstream/infra/ops/reindex"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/tables"
)

// reindexCommand runs `make reindex`: the products index rebuilt from the
// products table, beside the live indexer.
func reindexCommand(ctx context.Context, t *target.Target, args []string, e env) error {
	fs := flag.NewFlagSet("reindex", flag.ContinueOnError)
	fs.SetOutput(e.stdout)
	segments := fs.Int("segments", 4, "parallel scan segments")
	batch := fs.Int("batch", 500, "documents per _bulk request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	search, err := searchClient(t)
	if err != nil {
		return err
	}
	meter := progress.Start(e.stdout, "reindex", 5*time.Second)
	start := time.Now()
	rep, err := reindex.Run(ctx, reindex.Config{DB: t.DynamoDB(), Search: search, Products: t.Tables[tables.Products],
		Segments: *segments, BatchSize: *batch, Progress: meter})
	meter.Stop()
	for _, f := range rep.Failed {
		fmt.Fprintf(e.stdout, "failed: %s\n", f)
	}
	fmt.Fprintf(e.stdout, "reindex: %d documents written, %d already newer in the index, %d of deleted products removed, %d failed (%s)\n",
		rep.Indexed, rep.Newer, rep.Deleted, len(rep.Failed), time.Since(start).Round(time.Millisecond))
	if err != nil {
		return err
	}
	if len(rep.Failed) > 0 {
		return fmt.Errorf("%w: %d documents failed", target.ErrIncomplete, len(rep.Failed))
	}
	return nil
}

// searchClient reaches the target's search endpoint, SigV4-signed (service
// es) on a stage, as the indexer does.
func searchClient(t *target.Target) (*opensearch.Client, error) {
	// The default transport's proxy settings (HTTPS_PROXY) and dial and TLS
	// timeouts, as the SDK's clients have them, with a bound on the answer.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 30 * time.Second
	cfg := opensearch.Config{Addresses: []string{t.SearchURL}, Transport: tr}
	if t.SearchSigned {
		signer, err := requestsigner.NewSignerWithService(t.AWS, "es")
		if err != nil {
			return nil, fmt.Errorf("sigv4 signer: %w", err)
		}
		cfg.Signer = signer
	}
	c, err := opensearch.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("search client: %w", err)
	}
	return c, nil
}
