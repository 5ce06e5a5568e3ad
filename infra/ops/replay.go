package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/infra/ops/replay"
	"github.com/shopstream/shopstream/infra/ops/target"
)

// replayCommand runs `make replay`: locally through the same in-process
// handlers the local mappings invoke, against the stack's endpoints; on a
// stage through lambda:Invoke of the deployed functions.
func replayCommand(ctx context.Context, t *target.Target, args []string, e env) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(e.stdout)
	mapping := fs.String("mapping", "", "replay only this mapping's failures (shared/wiring name)")
	concurrency := fs.Int("concurrency", 4, "objects replayed at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	inv, err := invoker(t, e)
	if err != nil {
		return err
	}
	_, err = replay.Run(ctx, replay.Config{Store: t.S3(), Bucket: t.FailureBucket, Invoker: inv, Target: t,
		Mapping: *mapping, Concurrency: *concurrency, Out: e.stdout, Logger: e.logger, Recount: recounter(t, e)})
	return err
}

// recounter settles counters batches too old to replay with make audit's
// targeted recount: the items they touch recomputed and repaired.
func recounter(t *target.Target, e env) func(context.Context, []audit.Item) error {
	return func(ctx context.Context, items []audit.Item) error {
		a, meter := newAuditor(t, e, audit.Config{Repair: true, Settle: defaultSettle(t)})
		rep, err := a.Recount(ctx, items)
		meter.Stop()
		if err != nil {
			return err
		}
		if err := rep.Write(e.stdout); err != nil {
			return err
		}
		if rep.ExitCode() != 0 {
			return fmt.Errorf("%d counters still differ, %d items unsettled, %d input problems", len(rep.Remaining()), len(rep.Unsettled), len(rep.Problems))
		}
		return nil
	}
}

// invoker is how the target's functions are run.
func invoker(t *target.Target, e env) (replay.Invoker, error) {
	if !t.Local() {
		return &replay.Lambda{Client: lambda.NewFromConfig(t.AWS), Names: t.Functions}, nil
	}
	env := t.Env()
	fns, err := system.StreamFunctions(func(k string) string { return env[k] }, system.FunctionDeps{
		DynamoDB: t.DynamoDB(), S3: t.S3(), Logger: e.logger})
	if err != nil {
		return nil, fmt.Errorf("stream functions: %w", err)
	}
	h := replay.Handlers{}
	for name, fn := range fns {
		h[name] = fn
	}
	return h, nil
}
