package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/releases"
	"github.com/shopstream/shopstream/infra/local/system"
)

// getLoad sends GET /products/{id} from conns connections for d and
// returns the 200s a second.
func getLoad(tb testing.TB, api, id string, conns int, d time.Duration) float64 {
	tb.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}, Timeout: 10 * time.Second}
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for range conns {
		wg.Go(func() {
			for time.Now().Before(stop) {
				resp, err := client.Get(api + "/products/" + id)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		tb.Fatalf("%d GETs failed", failed.Load())
	}
	return float64(ok.Load()) / d.Seconds()
}

// createProduct adds a product through the API at api and returns its id.
func createProduct(tb testing.TB, api string) string {
	tb.Helper()
	tok, err := apigw.Token([]byte(system.DefaultJWTSecret), "admin", true, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"name": "Teapot", "description": "A teapot", "category": "kitchen", "priceCents": 1900, "stock": 50})
	req, _ := http.NewRequest("POST", api+"/products", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct{ ProductID string }
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 201 {
		tb.Fatalf("create product: %d %v", resp.StatusCode, err)
	}
	return p.ProductID
}

// BenchmarkGetProductAgainstFirstRelease runs the first release's stack
// (built from its commit) and this tree's, each a process of its own with
// its own DynamoDB Local, and loads GET /products/{productId} from 32
// connections on each in turn (first, this, first, this: 5 s each,
// GET_LOAD_SECONDS). It reports each one's requests a second, their ratio,
// and the read units a GET consumed, from each API's request log lines.
//
//	go test -run '^$' -bench GetProductAgainstFirstRelease -benchtime 1x ./infra/local
func BenchmarkGetProductAgainstFirstRelease(b *testing.B) {
	d := 5 * time.Second
	if s, err := strconv.Atoi(os.Getenv("GET_LOAD_SECONDS")); err == nil && s > 0 {
		d = time.Duration(s) * time.Second
	}
	first := buildRelease(b, releases.Supported()[0], "./infra/local")
	root, err := releases.Root(".")
	if err != nil {
		b.Fatal(err)
	}
	this := filepath.Join(b.TempDir(), "local")
	build := exec.Command("go", "build", "-o", this, "./infra/local")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		b.Fatalf("build this tree's stack: %v", err)
	}
	start := func(bin string) *proc {
		return startBinary(b, bin, []string{
			"DATA_DIR=" + b.TempDir(),
			"DYNAMODB_PORT=" + strconv.Itoa(freePort(b)), "S3_PORT=" + strconv.Itoa(freePort(b)),
			"SEARCH_PORT=" + strconv.Itoa(freePort(b)), "API_PORT=" + strconv.Itoa(freePort(b)),
			"OTLP_PORT=" + strconv.Itoa(freePort(b)),
			"LOG_LEVEL=INFO",
			// The first release's gateway throttled nothing; this compares
			// the stacks' work per page, not prod's 1,000 requests a second.
			"API_THROTTLING=off",
		})
	}
	stacks := []struct {
		name string
		p    *proc
		id   string
		rps  []float64
	}{{name: "first release " + releases.Supported()[0].Short(), p: start(first)}, {name: "this tree", p: start(this)}}
	for i := range stacks {
		stacks[i].id = createProduct(b, stacks[i].p.apiURL)
		// Another environment than the creating one reads the page
		// eventually consistent: past the replicas' lag it finds it.
		time.Sleep(ddbfront.DefaultStaleReads + 30*time.Millisecond)
		getLoad(b, stacks[i].p.apiURL, stacks[i].id, 32, time.Second) // warm
	}
	for range b.N {
		for round := 0; round < 2; round++ {
			for i := range stacks {
				stacks[i].rps = append(stacks[i].rps, getLoad(b, stacks[i].p.apiURL, stacks[i].id, 32, d))
			}
		}
	}
	mean := func(xs []float64) float64 {
		var t float64
		for _, x := range xs {
			t += x
		}
		return t / float64(len(xs))
	}
	units := func(p *proc) float64 {
		if n := p.gets.Load(); n > 0 {
			return float64(p.getReadMilliUnits.Load()) / 1000 / float64(n)
		}
		return 0
	}
	b.ReportMetric(mean(stacks[0].rps), "first-req/s")
	b.ReportMetric(mean(stacks[1].rps), "this-req/s")
	b.ReportMetric(mean(stacks[1].rps)/mean(stacks[0].rps), "ratio")
	b.ReportMetric(units(stacks[0].p), "first-RCU/get")
	b.ReportMetric(units(stacks[1].p), "this-RCU/get")
	for _, s := range stacks {
		b.Logf("%s: %v req/s, %.2f read units a GET over %d GETs", s.name, s.rps, units(s.p), s.p.gets.Load())
	}
}
