package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/infra/ops/progress"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/tables"
)

// auditCommand runs `make audit [REPAIR=1]`: the counters recomputed from the
// tables and the orders archive, drift printed (and repaired with -repair).
func auditCommand(ctx context.Context, t *target.Target, args []string, e env) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(e.stdout)
	repair := fs.Bool("repair", false, "correct the drift, conditional on each item's version")
	settle := fs.Duration("settle", defaultSettle(t), "how long a missing fact's record is given to reach the counters before the report calls it drift (above the mappings' iterator age); a repair is exact whatever it is")
	maxWait := fs.Duration("max-wait", 2*time.Minute, "how long items whose version keeps moving across the reading of the markers are read again before they are reported unsettled")
	segments := fs.Int("segments", 4, "parallel scan segments per table")
	digest := fs.Bool("digest", true, "keep the archive's digest ("+audit.DigestPrefix+" in the archive bucket) and skip downloading the archive objects it knows whose facts are all marked")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, meter := newAuditor(t, e, audit.Config{Repair: *repair, Settle: *settle, MaxWait: *maxWait, Segments: *segments, NoDigest: !*digest})
	rep, err := a.Run(ctx)
	meter.Stop()
	if err != nil {
		return err
	}
	if err := rep.Write(e.stdout); err != nil {
		return err
	}
	if rep.ExitCode() != 0 {
		return fmt.Errorf("%w: %d counters still differ, %d items unsettled, %d input problems", target.ErrIncomplete, len(rep.Remaining()), len(rep.Unsettled), len(rep.Problems))
	}
	return nil
}

// defaultSettle is 5 s for `make run` (the local mappings poll every 250 ms
// and batch for at most 1 s) and 60 s on a stage, where it must stay above
// the counters' and the archiver's IteratorAge (docs/operations.md).
func defaultSettle(t *target.Target) time.Duration {
	if t.Local() {
		return 5 * time.Second
	}
	return time.Minute
}

// newAuditor builds an auditor on the target's tables and archive, showing
// progress every 5 s.
func newAuditor(t *target.Target, e env, cfg audit.Config) (*audit.Auditor, *progress.Meter) {
	meter := progress.Start(e.errOut(), "audit", 5*time.Second)
	cfg.DB, cfg.S3, cfg.Bucket, cfg.FailureBucket, cfg.Progress = t.DynamoDB(), t.S3(), t.ArchiveBucket, t.FailureBucket, meter
	cfg.Tables = tables.Names{Users: t.Tables[tables.Users], Products: t.Tables[tables.Products],
		Orders: t.Tables[tables.Orders], Reviews: t.Tables[tables.Reviews], CounterEvents: t.Tables[tables.CounterEvents]}
	return audit.New(cfg), meter
}
