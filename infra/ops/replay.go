package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shopstream/shopstream/infra/ops/replay"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/infra/streamfunctions"
	"github.com/shopstream/shopstream/shared/tables"
)

// replayCommand runs `make replay`: locally through the same in-process
// handlers the local mappings invoke, against the stack's endpoints; on a
// stage through lambda:Invoke of the deployed functions.
func replayCommand(ctx context.Context, t *target.Target, args []string, e env) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(e.stdout)
	mapping := fs.String("mapping", "", "replay only this mapping's failures (shared/wiring name)")
	concurrency := fs.Int("concurrency", 4, "units replayed at once: an object, or a run of a counters or indexer mapping's objects (the counters' runs one at a time)")
	var retire keyList
	fs.Var(&retire, "retire", "give up on this failure object instead of replaying anything (repeatable; a poison's remainder, an object skipped for good): tagged and marked so the bucket's lifecycle expires it; make audit REPAIR=1 then counts what it held")
	reason := fs.String("reason", "", "why the -retire objects are given up (kept in their markers; required with -retire)")
	force := fs.Bool("force", false, "with -retire: give up an archiver's batch too, whose TTL-removed items are then lost from the archive for good")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(retire) > 0 {
		if *mapping != "" {
			return fmt.Errorf("-retire names its objects: -mapping does not go with it")
		}
		_, err := replay.Retire(ctx, replay.Config{Store: t.S3(), Bucket: t.FailureBucket, Target: t, Out: e.stdout}, retire, *reason, *force)
		return err
	}
	inv, err := invoker(t, e)
	if err != nil {
		return err
	}
	_, err = replay.Run(ctx, replay.Config{Store: t.S3(), Bucket: t.FailureBucket, Invoker: inv, Target: t,
		Products: t.DynamoDB(), ProductsTable: t.Tables[tables.Products],
		Mapping: *mapping, Concurrency: *concurrency, Out: e.stdout, Logger: e.logger})
	return err
}

// invoker is how the target's functions are run.
func invoker(t *target.Target, e env) (replay.Invoker, error) {
	if !t.Local() {
		return &replay.Lambda{Client: lambda.NewFromConfig(t.AWS), Names: t.Functions}, nil
	}
	env := t.Env()
	fns, err := streamfunctions.Build(func(k string) string { return env[k] }, streamfunctions.Deps{
		DynamoDB: t.FunctionDynamoDB(), S3: t.FunctionS3(), Logger: e.logger})
	if err != nil {
		return nil, fmt.Errorf("stream functions: %w", err)
	}
	h := replay.Handlers{}
	for name, fn := range fns {
		h[name] = fn
	}
	return h, nil
}

// keyList is a repeatable flag; each value may hold several keys separated
// by spaces (make replay RETIRE="k1 k2").
type keyList []string

func (k *keyList) String() string { return strings.Join(*k, " ") }

func (k *keyList) Set(v string) error {
	*k = append(*k, strings.Fields(v)...)
	return nil
}
