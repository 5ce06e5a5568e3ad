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
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shopstream/shopstream/infra/cdk/stack"
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
	bin := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "./functions/"+*fn)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build %s: %w", *fn, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	var response []byte
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "invoke-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(*timeout).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:shopstream-local-"+*fn)
		w.Write(event)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		response, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		done <- nil
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		done <- fmt.Errorf("function error: %s", body)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		done <- fmt.Errorf("init error: %s", body)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String(), "AWS_LAMBDA_FUNCTION_NAME=shopstream-local-"+*fn)
	cmd.Env = append(cmd.Env, localEnv(access)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
		fmt.Println(string(response))
		return nil
	case err := <-exited:
		return fmt.Errorf("%s exited before answering: %v", *fn, err)
	case <-time.After(*timeout):
		return fmt.Errorf("%s: no answer in %v", *fn, *timeout)
	}
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
	for _, tn := range a.Tables {
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
