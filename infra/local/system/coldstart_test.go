package system_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/invoke"
	"github.com/shopstream/shopstream/infra/local/samples"
)

// BenchmarkColdStart measures each function the way `make invoke` runs it:
// a fresh bootstrap process (built by its build-<LogicalId> target, for this
// machine) with SAM's environment from template.yaml and events/sam-env.json,
// one sample event against the running stack, and reports the medians of
// the time from process start to its first request for work (init) and to
// its response. Run with -benchtime=10x for ten cold starts a function.
func BenchmarkColdStart(b *testing.B) {
	f := startSampleStack(b)
	file, err := invoke.ReadEnvVars(f.envVars)
	if err != nil {
		b.Fatal(err)
	}
	none := func(string) (string, bool) { return "", false }
	events := map[string]string{
		"ApiFunction":           "api-healthz.json",
		"CountersFunction":      "counters-order-placed.json",
		"StreamIndexerFunction": "indexer-product-changed.json",
		"ArchiverFunction":      "archiver-ttl-removals.json",
	}
	for _, fn := range f.functions {
		b.Run(fn.LogicalID, func(b *testing.B) {
			event, err := os.ReadFile(filepath.Join(samples.Dir(b), events[fn.LogicalID]))
			if err != nil {
				b.Fatal(err)
			}
			bin := filepath.Join(f.buildDir, fn.LogicalID, "bootstrap")
			env := invoke.ProcessEnv(fn, bin, fn.Environment(none, file, invoke.ShellCredentials(none)))
			var inits, firsts []time.Duration
			for i := 0; i < b.N; i++ {
				res, err := invoke.Run(context.Background(), fn, bin, env, event, io.Discard)
				if err != nil || res.Err != nil {
					b.Fatalf("invoke %s: %v %v", fn.LogicalID, err, res.Err)
				}
				inits, firsts = append(inits, res.Init), append(firsts, res.ToResponse)
			}
			b.ReportMetric(median(inits), "ms-init")
			b.ReportMetric(median(firsts), "ms-to-first-response")
		})
	}
}

func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
