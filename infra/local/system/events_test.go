package system_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/invoke"
	"github.com/shopstream/shopstream/infra/local/samples"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// sampleProduct is the product the API samples name.
const sampleProduct = invoke.SampleProduct

// TestSampleEventsUnderMakeInvoke runs every events/*.json through `make
// invoke`'s code path (invoke.Command: template.yaml, events/sam-env.json,
// the Makefile's build-<LogicalId> target, a bootstrap process with SAM's
// environment and nothing else) against a running stack whose tables carry
// the dev stage's names, as `TABLE_PREFIX=shopstream-dev- make run` does, and
// checks each sample's outcome and what it leaves behind. Only the endpoints
// of events/sam-env.json are rewritten, to this stack's ports.
func TestSampleEventsUnderMakeInvoke(t *testing.T) {
	ctx := context.Background()
	f := startSampleStack(t)
	sys, db, table := f.sys, f.sys.DynamoDB(), f.table
	template, envVars, buildDir := f.template, f.envVars, f.buildDir
	// The shell make invoke runs in; here, nothing, so that the host's
	// variables cannot decide the outcome.
	shell := func(string) (string, bool) { return "", false }

	counter := func(name, key, id, attr string) int64 {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table(name)), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{key: &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := out.Item[attr].(*types.AttributeValueMemberN)
		if n == nil {
			return 0
		}
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	archived := func(tbl string) int64 {
		list, err := sys.S3().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(envcontract.LocalArchiveBucket), Prefix: aws.String(tbl + "/")})
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(list.Contents))
	}
	indexed := func() (int, string) {
		resp, err := http.Get(sys.SearchURL + "/products/_doc/sample-product")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			Version int `json:"_version"`
			Source  struct {
				Name string `json:"name"`
			} `json:"_source"`
		}
		json.NewDecoder(resp.Body).Decode(&doc)
		return resp.StatusCode, doc.Source.Name + " v" + strconv.Itoa(doc.Version)
	}

	// Every sample, in the order that makes sense of them, with its function,
	// its expected outcome (an HTTP status for the API; the records reported
	// failed, by sequence number, for a stream batch) and what it leaves.
	steps := []struct {
		file, fn string
		status   int
		failed   []string
		check    func() string
	}{
		{"api-healthz.json", "ApiFunction", 200, nil, nil},
		{"api-create-user.json", "ApiFunction", 201, nil, nil},
		{"api-get-user.json", "ApiFunction", 200, nil, nil},
		{"api-forbidden-other-user.json", "ApiFunction", 403, nil, nil},
		{"api-get-product-stage.json", "ApiFunction", 200, nil, nil},
		{"api-place-order.json", "ApiFunction", 201, nil, func() string {
			return expect(counter(tables.ProductStock, "bucketId", sampleProduct+"#0", "units"), 9)
		}},
		{"api-open-orders-admin.json", "ApiFunction", 200, nil, nil},
		{"counters-order-placed.json", "CountersFunction", 0, []string{}, func() string {
			return expect(counter(tables.Users, "userId", "sample-user", "lifetimeSpendCents"), 9800) + expect(counter(tables.Products, "productId", "sample-product", "unitsSold"), 2)
		}},
		{"counters-order-cancelled.json", "CountersFunction", 0, []string{}, func() string {
			return expect(counter(tables.Users, "userId", "sample-user", "lifetimeSpendCents"), 0) + expect(counter(tables.Products, "productId", "sample-product", "unitsSold"), 0)
		}},
		{"counters-order-archived.json", "CountersFunction", 0, []string{}, func() string {
			return expect(counter(tables.Users, "userId", "sample-user", "orderCount"), 1)
		}},
		{"counters-review-created.json", "CountersFunction", 0, []string{}, func() string {
			return expect(counter(tables.Products, "productId", "sample-product", "ratingTotal"), 5) + expect(counter(tables.Users, "userId", "sample-user", "reviewCount"), 1)
		}},
		{"counters-review-replaced.json", "CountersFunction", 0, []string{}, func() string {
			return expect(counter(tables.Products, "productId", "sample-product", "ratingTotal"), 3) + expect(counter(tables.Products, "productId", "sample-product", "reviewCount"), 1)
		}},
		{"counters-review-deleted.json", "CountersFunction", 0, []string{}, func() string {
			return expect(counter(tables.Products, "productId", "sample-product", "reviewCount"), 0) + expect(counter(tables.Users, "userId", "sample-user", "reviewCount"), 0)
		}},
		// Record 204 is a good review, 205 has the rating "four": only 205 fails.
		{"counters-malformed-rating.json", "CountersFunction", 0, []string{"000000000000000000205"}, func() string {
			return expect(counter(tables.Products, "productId", "sample-product", "reviewCount"), 1) + expect(counter(tables.Products, "productId", "sample-product", "ratingTotal"), 4)
		}},
		{"indexer-product-changed.json", "StreamIndexerFunction", 0, []string{}, func() string {
			if code, doc := indexed(); code != 200 || doc != "Copper Kettle v2" {
				return "indexed: got " + strconv.Itoa(code) + " " + doc + ", want 200 Copper Kettle v2"
			}
			return ""
		}},
		{"indexer-product-deleted.json", "StreamIndexerFunction", 0, []string{}, func() string {
			code, _ := indexed()
			return expect(int64(code), 404)
		}},
		{"archiver-ttl-removals.json", "ArchiverFunction", 0, []string{}, func() string {
			return expect(archived("orders"), 1) + expect(archived("carts"), 1)
		}},
		{"archiver-not-ttl.json", "ArchiverFunction", 0, []string{}, func() string {
			return expect(archived("orders"), 1) + expect(archived("carts"), 1)
		}},
	}

	var want, got []string
	for _, f := range samples.Files(t, "*.json") {
		if name := filepath.Base(f); name != "sam-env.json" {
			want = append(want, name)
		}
	}
	for _, st := range steps {
		got = append(got, st.file)
	}
	sort.Strings(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("samples without an expected outcome here (-events/ +test):\n%s", d)
	}

	for _, st := range steps {
		t.Run(st.file, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := []string{"-t", template, "-e", filepath.Join(samples.Dir(t), st.file), "-env-vars", envVars, "-build-dir", buildDir, st.fn}
			if err := invoke.Command(ctx, args, shell, &stdout, &stderr); err != nil {
				t.Fatalf("invoke %s: %v\n%s", st.fn, err, stderr.String())
			}
			if st.fn == "ApiFunction" {
				var resp events.APIGatewayV2HTTPResponse
				if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || resp.StatusCode != st.status {
					t.Errorf("got %d (%v): %s; want %d", resp.StatusCode, err, resp.Body, st.status)
				}
			} else {
				var resp events.DynamoDBEventResponse
				if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
					t.Fatalf("response %s: %v", stdout.String(), err)
				}
				failed := []string{}
				for _, f := range resp.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				if !slices.Equal(failed, st.failed) {
					t.Errorf("failed records: got %v, want %v\n%s", failed, st.failed, stderr.String())
				}
			}
			if st.check != nil {
				if msg := st.check(); msg != "" {
					t.Errorf("after %s: %s\n%s", st.file, msg, stderr.String())
				}
			}
		})
	}
}

// sampleStack is a running stack with the dev stage's tables, what the samples
// assume in them, an --env-vars file for it and every function built.
type sampleStack struct {
	sys                         *system.System
	template, envVars, buildDir string
	functions                   []*invoke.Function
}

func (f *sampleStack) table(name string) string { return tables.Physical(samples.TablePrefix, name) }

// startSampleStack starts the stack the samples run against: its tables carry
// the dev stage's names, as `TABLE_PREFIX=shopstream-dev- make run` does, and
// only the endpoints of events/sam-env.json are rewritten, to its ports.
func startSampleStack(tb testing.TB) *sampleStack {
	tb.Helper()
	ctx := context.Background()
	sys, err := system.Start(ctx, system.Config{
		Stack:       endpoints.Config{DynamoDBUpstream: stacktest.Stack(tb).Upstream(), TTLSweepInterval: -1},
		TablePrefix: samples.TablePrefix,
		NoMappings:  true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sys.Close() })
	f := &sampleStack{sys: sys}
	db := sys.DynamoDB()
	// What the samples assume exists: what `make samples` puts in place.
	tableOf := map[string]string{"USERS_TABLE": f.table(tables.Users), "PRODUCTS_TABLE": f.table(tables.Products), "PRODUCT_STOCK_TABLE": f.table(tables.ProductStock)}
	if _, err := invoke.PutSamples(ctx, db, func(v string) string { return tableOf[v] }); err != nil {
		tb.Fatal(err)
	}

	f.template = filepath.Join("..", "..", "..", "template.yaml")
	f.envVars = localEnvVars(tb, filepath.Join(samples.Dir(tb), "sam-env.json"), map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": sys.DynamoDBURL, "AWS_ENDPOINT_URL_S3": sys.S3URL, "SEARCH_URL": sys.SearchURL,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": sys.OTLPURL + "/v1/traces",
	})
	tmpl, err := invoke.Load(f.template, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if f.functions, err = tmpl.Functions(); err != nil {
		tb.Fatal(err)
	}
	f.buildDir = tb.TempDir()
	for _, fn := range f.functions {
		if _, err := invoke.Build(ctx, fn, filepath.Join(f.buildDir, fn.LogicalID)); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

// localEnvVars writes a copy of the --env-vars file at path with the given
// values in its "Parameters" and returns the copy's path.
func localEnvVars(t testing.TB, path string, values map[string]string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]map[string]any
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for k, v := range values {
		if _, ok := file["Parameters"][k]; !ok {
			t.Fatalf("%s: no %s in Parameters", path, k)
		}
		file["Parameters"][k] = v
	}
	out, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "sam-env.json")
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestAPISamplesAreAsAPIGatewaySendsThem: every events/api-*.json is a
// payload 2.0 event of a declared route: routeKey is the route template,
// pathParameters fill it to rawPath (less a named stage's prefix), the body
// is plain JSON unless marked base64, content-length matches.
func TestAPISamplesAreAsAPIGatewaySendsThem(t *testing.T) {
	declared := map[string]bool{}
	for _, r := range routes.All() {
		declared[r.Pattern()] = true
	}
	for _, f := range samples.Files(t, "api-*.json") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var ev events.APIGatewayV2HTTPRequest
			samples.Decode(t, f, &ev)
			if !declared[ev.RouteKey] {
				t.Errorf("routeKey %q is no declared route (shared/routes)", ev.RouteKey)
			}
			if ev.Version != "2.0" || ev.RequestContext.RouteKey != ev.RouteKey {
				t.Errorf("version %q, requestContext.routeKey %q: want 2.0 and %q", ev.Version, ev.RequestContext.RouteKey, ev.RouteKey)
			}
			method, tmpl, _ := strings.Cut(ev.RouteKey, " ")
			if ev.RequestContext.HTTP.Method != method {
				t.Errorf("method %q, want %q", ev.RequestContext.HTTP.Method, method)
			}
			path, params := ev.RawPath, map[string]string{}
			if st := ev.RequestContext.Stage; st != "$default" {
				var ok bool
				if path, ok = strings.CutPrefix(path, "/"+st+"/"); !ok {
					t.Errorf("rawPath %q: want the stage %q first", ev.RawPath, st)
				}
				path = "/" + path
			}
			if ev.RequestContext.HTTP.Path != ev.RawPath {
				t.Errorf("requestContext.http.path %q, want rawPath %q", ev.RequestContext.HTTP.Path, ev.RawPath)
			}
			segs, tsegs := strings.Split(path, "/"), strings.Split(tmpl, "/")
			if len(segs) != len(tsegs) {
				t.Fatalf("path %q does not fit %q", path, tmpl)
			}
			for i, s := range tsegs {
				if name, ok := strings.CutPrefix(s, "{"); ok {
					params[strings.TrimSuffix(name, "}")] = segs[i]
				} else if s != segs[i] {
					t.Errorf("path %q does not fit %q", path, tmpl)
				}
			}
			if len(params) == 0 {
				params = nil
			}
			if d := cmp.Diff(params, ev.PathParameters); d != "" {
				t.Errorf("pathParameters (-from rawPath +event):\n%s", d)
			}
			if ev.Body != "" {
				if ev.IsBase64Encoded || !json.Valid([]byte(ev.Body)) {
					t.Errorf("body: want plain JSON, got base64 %v: %q", ev.IsBase64Encoded, ev.Body)
				}
				if got := ev.Headers["content-length"]; got != strconv.Itoa(len(ev.Body)) {
					t.Errorf("content-length %q, want %d", got, len(ev.Body))
				}
			}
		})
	}
}

// TestStreamSamplesAreAsLambdaSendsThem: every stream sample names, in its
// eventSourceARN, a dev-stage table as template.yaml names it, whose stream
// feeds the sample's function (shared/wiring).
func TestStreamSamplesAreAsLambdaSendsThem(t *testing.T) {
	feeds := map[string]map[string]bool{}
	for _, m := range wiring.Mappings() {
		if feeds[m.Function] == nil {
			feeds[m.Function] = map[string]bool{}
		}
		feeds[m.Function][tables.Physical(samples.TablePrefix, m.Table)] = true
	}
	for prefix, fn := range map[string]string{"counters-": wiring.Counters, "indexer-": wiring.StreamIndexer, "archiver-": wiring.Archiver} {
		for _, b := range samples.Streams(t, prefix+"*.json") {
			for _, r := range b.Event.Records {
				head, rest, _ := strings.Cut(r.EventSourceArn, ":table/")
				name, label, _ := strings.Cut(rest, "/stream/")
				if head != "arn:aws:dynamodb:"+r.AWSRegion+":123456789012" || label == "" || !feeds[fn][name] {
					t.Errorf("%s %s: eventSourceARN %q, want a stream of one of %v", b.Name, r.EventID, r.EventSourceArn, feeds[fn])
				}
			}
		}
	}
}

func expect(got, want int64) string {
	if got != want {
		return "got " + strconv.FormatInt(got, 10) + ", want " + strconv.FormatInt(want, 10) + "; "
	}
	return ""
}
