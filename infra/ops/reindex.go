package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/opensearch-project/opensearch-go/v4"
	requestsigner "github.com/opensearch-project/opensearch-go/v4/signer/awsv2"

	"github.com/shopstream/shopstream/infra/ops/progress"
	"github.com/shopstream/shopstream/infra/ops/reindex"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
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
	start := time.Now()
	// Recorded in the failure bucket as it begins, by the bucket's clock:
	// when it finishes, it answers every reindex a replay asked for up to
	// this second (failures.OutstandingReindex).
	run := failures.ReindexRun(start)
	recorded := mark(ctx, t, failures.ReindexStartedPrefix+run, e)
	if recorded {
		// A second before any read: a request written in the second the
		// start was recorded, and what its replay wrote, come before them.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(failures.ReindexSettle):
		}
	}
	meter := progress.Start(e.errOut(), "reindex", 5*time.Second)
	rep, err := reindex.Run(ctx, reindex.Config{DB: t.DynamoDB(), Search: search, Products: t.Tables[tables.Products],
		Segments: *segments, BatchSize: *batch, Progress: meter})
	meter.Stop()
	for _, f := range rep.Failed {
		fmt.Fprintf(e.stdout, "failed: %s\n", f)
	}
	for _, u := range rep.Unreadable {
		fmt.Fprintf(e.stdout, "unreadable: %s (make audit REPAIR=1 sets it; the indexer then writes the document again)\n", u)
	}
	for _, r := range rep.Raised {
		fmt.Fprintf(e.stdout, "raised: %s (the index held a version the table never wrote)\n", r)
	}
	fmt.Fprintf(e.stdout, "reindex: %d documents written, %d already newer in the index, %d of deleted products removed, %d products' versions raised above their documents', %d failed (%s)\n",
		rep.Indexed, rep.Newer, rep.Deleted, len(rep.Raised), len(rep.Failed), time.Since(start).Round(time.Millisecond))
	if err != nil {
		return err
	}
	if len(rep.Failed) > 0 {
		return fmt.Errorf("%w: %d documents failed", target.ErrIncomplete, len(rep.Failed))
	}
	if recorded && mark(ctx, t, failures.ReindexFinishedPrefix+run, e) {
		fmt.Fprintf(e.stdout, "reindex: recorded as s3://%s/%s: make replay no longer asks for a reindex it asked for up to the second s3://%[1]s/%[3]s was written (its LastModified)\n",
			t.FailureBucket, failures.ReindexFinishedPrefix+run, failures.ReindexStartedPrefix+run)
	}
	return nil
}

// mark writes an empty object of the reindex's record to the failure
// bucket. Not being able to is said, not fatal: the index is rebuilt all
// the same, and make replay goes on asking for a reindex it asked for.
func mark(ctx context.Context, t *target.Target, key string, e env) bool {
	if t.FailureBucket == "" {
		return false
	}
	_, err := t.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(t.FailureBucket), Key: aws.String(key),
		Body: bytes.NewReader(nil)})
	if err != nil {
		fmt.Fprintf(e.stdout, "reindex: cannot record this run in the failure bucket (s3:PutObject on s3://%s/%s*), so make replay goes on asking for the reindexes it asked for: %v\n",
			t.FailureBucket, failures.ReindexPrefix, err)
		return false
	}
	return true
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
