package lambdart_test

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/lambdart"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

func moduleRoot(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// functions lists the functions that exist in this tree.
func functions(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, fn := range wiring.Functions() {
		if _, err := os.Stat(filepath.Join(moduleRoot(tb), "functions", fn, "main.go")); err == nil {
			out = append(out, fn)
		}
	}
	if len(out) == 0 {
		tb.Fatal("no function found under functions/")
	}
	return out
}

// TestFunctionsStayLean fails when a Lambda binary pulls in what it never runs:
// the CDK, the local stack, the search engine behind it.
func TestFunctionsStayLean(t *testing.T) {
	banned := []string{"github.com/aws/aws-cdk-go", "github.com/aws/jsii-runtime-go", "github.com/blevesearch/", "github.com/johannesboyne/gofakes3", "github.com/shopstream/shopstream/infra/"}
	for _, fn := range functions(t) {
		t.Run(fn, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "./functions/"+fn)
			cmd.Dir = moduleRoot(t)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, b := range banned {
					if strings.HasPrefix(dep, b) {
						t.Errorf("%s depends on %s", fn, dep)
					}
				}
			}
		})
	}
}

func localEnv() []string {
	env := []string{"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"ARCHIVE_BUCKET=shopstream-archive", "SEARCH_URL=http://127.0.0.1:1", "SEARCH_ENDPOINT=http://127.0.0.1:1", "CURSOR_SECRET=cold-start-secret-0123456789"}
	for _, t := range tables.All() {
		env = append(env, t.EnvVar+"=cold-"+t.Name)
	}
	return env
}

func firstEvent(tb testing.TB, fn string) []byte {
	tb.Helper()
	if fn != wiring.API {
		return []byte(`{"Records":[]}`)
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot(tb), "events", "api-healthz.json"))
	if err != nil {
		tb.Fatalf("read healthz event: %v", err)
	}
	return b
}

// BenchmarkColdStart reports, per function, the zipped linux/arm64 bootstrap
// size and the median time from process start to the first response, over
// several cold starts of the host build against a local Runtime API.
func BenchmarkColdStart(b *testing.B) {
	root := moduleRoot(b)
	dir := b.TempDir()
	for _, fn := range functions(b) {
		b.Run(fn, func(b *testing.B) {
			arm := filepath.Join(dir, fn+"-arm64")
			cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", arm, "./functions/"+fn)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("build arm64: %v\n%s", err, out)
			}
			raw, _ := os.ReadFile(arm)
			var zipped bytes.Buffer
			zw := zip.NewWriter(&zipped)
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate})
			w.Write(raw)
			zw.Close()

			bin, err := lambdart.Build(context.Background(), root, fn, dir)
			if err != nil {
				b.Fatal(err)
			}
			var starts []time.Duration
			for i := 0; i < b.N; i++ {
				rt, err := lambdart.Start("shopstream-bench-"+fn, 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				var out bytes.Buffer
				p, err := rt.Run(bin, localEnv(), &out)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				go func() {
					select {
					case <-p.Exited():
						cancel()
					case <-ctx.Done():
					}
				}()
				res, err := rt.Invoke(ctx, firstEvent(b, fn))
				cancel()
				if err != nil || res.Err != nil {
					p.Stop()
					b.Fatalf("invoke %s: %v %v\n%s", fn, err, res.Err, out.String())
				}
				starts = append(starts, time.Since(p.Started))
				p.Stop()
				rt.Close()
			}
			sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
			b.ReportMetric(float64(len(zipped.Bytes()))/1e6, "MB-zipped")
			b.ReportMetric(float64(starts[len(starts)/2].Microseconds())/1000, "ms-to-first-response")
		})
	}
}
