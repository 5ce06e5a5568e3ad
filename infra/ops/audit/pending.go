package audit

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/failures"
)

// readPending reads the failure bucket for the batches not replayed yet.
// The orders the archiver's TTL removals hold are on their way to the
// archive (make replay writes them there): their facts are proven like the
// archive's. The facts of the counters' records are on their way to the
// counters (make replay applies them): not drift. An object that cannot be
// parsed is a problem, like a corrupt archive object.
func (a *Auditor) readPending(ctx context.Context) ([]archivedOrder, []facts.Fact, []Problem, error) {
	if a.cfg.FailureBucket == "" {
		return nil, nil, nil, nil
	}
	objects, err := a.keys(ctx, a.cfg.FailureBucket, failures.Prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	markers, err := a.keys(ctx, a.cfg.FailureBucket, failures.ReplayedPrefix)
	if err != nil {
		return nil, nil, nil, err
	}
	replayed := map[string]bool{}
	for _, k := range markers {
		replayed[strings.TrimPrefix(k, failures.ReplayedPrefix)] = true
	}
	var out []archivedOrder
	var counted []facts.Fact
	var problems []Problem
	for _, key := range objects {
		if replayed[key] {
			continue
		}
		got, err := a.cfg.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.cfg.FailureBucket), Key: aws.String(key)})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read failure object s3://%s/%s: %w", a.cfg.FailureBucket, key, err)
		}
		body, err := io.ReadAll(io.LimitReader(got.Body, failures.MaxObjectSize+1))
		got.Body.Close()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read failure object s3://%s/%s: %w", a.cfg.FailureBucket, key, err)
		}
		obj, err := failures.Parse(body)
		if err != nil {
			problems = append(problems, Problem{Where: "failure object " + key, Err: err.Error()})
			continue
		}
		table := obj.Table()
		if table != a.cfg.Tables.Orders && table != a.cfg.Tables.Reviews {
			continue // the search indexer's
		}
		for _, r := range obj.Payload.Records {
			if !ddbstream.IsTTLRemoval(r) {
				fs, err := counting.RecordFacts(r, a.cfg.Tables.Orders, a.cfg.Tables.Reviews)
				if err != nil {
					problems = append(problems, Problem{Where: fmt.Sprintf("failure object %s record %s", key, r.EventID), Err: err.Error()})
					continue
				}
				counted = append(counted, fs...)
				continue
			}
			var o order
			if err := ddbstream.Decode(r.Change.OldImage, &o); err == nil {
				err = o.Check()
			}
			if err != nil {
				problems = append(problems, Problem{Where: fmt.Sprintf("failure object %s record %s", key, r.EventID), Err: err.Error()})
				continue
			}
			out = append(out, archivedOrder{eventID: r.EventID, order: o})
		}
		a.cfg.Progress.Add("failure objects read", 1)
	}
	return out, counted, problems, nil
}

// keys lists the keys of a bucket under prefix.
func (a *Auditor) keys(ctx context.Context, bucket, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(a.cfg.S3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}
