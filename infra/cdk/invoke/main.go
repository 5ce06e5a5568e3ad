// Command invoke runs one function on one event the way Lambda does, without
// Docker: it builds the function for this machine, serves it a minimal Lambda
// Runtime API (AWS_LAMBDA_RUNTIME_API) with the event, prints the response and
// stops. The environment points at `make run`'s endpoints and is made from the
// same declaration as the CDK app's (stack.Accesses).
//
//	go run ./infra/cdk/invoke -fn api -event events/get-healthz.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/infra/local/lambdart"
	"github.com/shopstream/shopstream/shared/tables"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(1)
	}
}

func run() error {
	fn := flag.String("fn", "", "function name (api, counters, stream-indexer, archiver)")
	eventPath := flag.String("event", "", "event JSON file")
	timeout := flag.Duration("timeout", 30*time.Second, "how long the invocation may take")
	flag.Parse()
	access, ok := stack.Accesses()[*fn]
	if !ok || *eventPath == "" {
		return errors.New("usage: invoke -fn <function> -event <file.json>")
	}
	event, err := os.ReadFile(*eventPath)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "shopstream-invoke-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+2*time.Minute)
	defer cancel()
	bin, err := lambdart.Build(ctx, ".", *fn, dir)
	if err != nil {
		return err
	}
	rt, err := lambdart.Start("shopstream-local-"+*fn, *timeout)
	if err != nil {
		return err
	}
	defer rt.Close()
	p, err := rt.Run(bin, localEnv(access), os.Stderr)
	if err != nil {
		return err
	}
	defer p.Stop()
	invokeCtx, stop := context.WithTimeout(ctx, *timeout)
	defer stop()
	go func() {
		select {
		case <-p.Exited():
			stop()
		case <-invokeCtx.Done():
		}
	}()
	res, err := rt.Invoke(invokeCtx, event)
	if err != nil {
		return fmt.Errorf("%s: %w (did it exit early? see its output above)", *fn, err)
	}
	if res.Err != nil {
		return res.Err
	}
	fmt.Println(string(res.Response))
	return nil
}

// localEnv is the function's environment against `make run` (TABLE_PREFIX and
// the *_PORT variables as the local stack reads them); variables already set
// win.
func localEnv(a stack.Access) []string {
	get := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	env := []string{
		"AWS_REGION=" + get("AWS_REGION", "us-east-1"),
		"AWS_ACCESS_KEY_ID=" + get("AWS_ACCESS_KEY_ID", "local"),
		"AWS_SECRET_ACCESS_KEY=" + get("AWS_SECRET_ACCESS_KEY", "local"),
		"AWS_ENDPOINT_URL_DYNAMODB=" + get("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:"+get("DYNAMODB_PORT", "8000")),
		"AWS_ENDPOINT_URL_S3=" + get("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:"+get("S3_PORT", "9000")),
	}
	for _, tn := range append(append([]string(nil), a.Tables...), a.StreamTables...) {
		def, err := tables.ByName(tn)
		if err == nil {
			env = append(env, def.EnvVar+"="+get(def.EnvVar, tables.Physical(os.Getenv("TABLE_PREFIX"), tn)))
		}
	}
	if a.Archive {
		env = append(env, stack.EnvArchiveBucket+"="+get(stack.EnvArchiveBucket, "shopstream-archive"))
	}
	if a.Search != stack.SearchNone {
		env = append(env, stack.EnvSearchURL+"="+get(stack.EnvSearchURL, "http://127.0.0.1:"+get("SEARCH_PORT", "9200")))
	}
	if a.CursorSecret {
		env = append(env, stack.EnvCursorSecret+"="+get(stack.EnvCursorSecret, "shopstream-local-cursor-secret"))
	}
	return env
}
