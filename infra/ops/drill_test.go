package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// drill is a whole running system of the test's own, on the test binary's
// DynamoDB Local, with short retry settings on its mappings so that an
// incident discards batches in seconds.
type drill struct {
	t      testing.TB
	sys    *system.System
	prefix string
	s3     *s3.Client
}

type drillOptions struct {
	env map[string]string
	// defaultPoll polls the streams at the local mappings' default (as
	// `make run` does) instead of the drills' quicker 100 ms.
	defaultPoll bool
	// mapping, when set, edits each event source mapping before the start.
	mapping func(*wiring.Mapping)
}

func (o drillOptions) pollInterval() time.Duration {
	if o.defaultPoll {
		return 0
	}
	return 100 * time.Millisecond
}

func startDrill(t testing.TB, o drillOptions) *drill {
	t.Helper()
	prefix := stacktest.OwnPrefix(t)
	var ms []wiring.Mapping
	for _, m := range wiring.Mappings() {
		m.RetryAttempts = 1
		if o.mapping != nil {
			o.mapping(&m)
		}
		ms = append(ms, m)
	}
	sys, err := system.Start(context.Background(), system.Config{
		Stack: endpoints.Config{
			DynamoDBUpstream: stacktest.Stack(t).Upstream(),
			TTLSweepInterval: time.Second,
			SweepTables:      func(name string) bool { return strings.HasPrefix(name, prefix) },
		},
		TablePrefix:  prefix,
		Env:          o.env,
		PollInterval: o.pollInterval(),
		Mappings:     ms,
		Logger:       testLogger(),
	})
	if err != nil {
		t.Fatalf("start system: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close system: %v", err)
		}
	})
	return &drill{t: t, sys: sys, prefix: prefix, s3: sys.S3()}
}

// testLogger shows the system's logs when STACK_DEBUG is set.
func testLogger() *slog.Logger {
	if os.Getenv("STACK_DEBUG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// getenv is `make run`'s environment for this system: what an operator's
// shell has when it runs `make replay` next to it.
func (d *drill) getenv() func(string) string {
	port := func(u string) string {
		p, err := url.Parse(u)
		if err != nil {
			d.t.Fatal(err)
		}
		return p.Port()
	}
	env := map[string]string{
		"DYNAMODB_PORT": port(d.sys.DynamoDBURL), "S3_PORT": port(d.sys.S3URL), "SEARCH_PORT": port(d.sys.SearchURL),
		"TABLE_PREFIX": d.prefix, "FAILURE_BUCKET": d.sys.FailureBucket, "ARCHIVE_BUCKET": d.sys.Env["ARCHIVE_BUCKET"],
	}
	return func(k string) string { return env[k] }
}

// replay runs the operator command as `make replay` does and returns its
// exit status and output.
func (d *drill) replay(args ...string) (int, string) {
	d.t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), append([]string{"replay"}, args...), env{stdout: &out, logger: testLogger(), getenv: d.getenv()})
	d.t.Logf("make replay %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
	return code, out.String()
}

// settle waits until every mapping has read its stream to the end.
func (d *drill) settle() {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.sys.Poller.Idle(ctx); err != nil {
		d.t.Fatal(err)
	}
}

// objects returns the failure bucket's keys under prefix.
func (d *drill) objects(prefix string) []string {
	d.t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(d.s3, &s3.ListObjectsV2Input{Bucket: aws.String(d.sys.FailureBucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			d.t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	sort.Strings(keys)
	return keys
}

// failedKeys returns the failure objects' keys of one mapping (its UUID).
func (d *drill) failedKeys(mappingID string) []string {
	d.t.Helper()
	return d.objects(failures.Prefix + mappingID + "/")
}

// replayedTagged returns the keys under prefix that carry the replay's tag
// (failures.ReplayedTag), the only objects the bucket's lifecycle expires.
func (d *drill) replayedTagged(prefix string) []string {
	d.t.Helper()
	var keys []string
	for _, k := range d.objects(prefix) {
		out, err := d.s3.GetObjectTagging(context.Background(), &s3.GetObjectTaggingInput{Bucket: aws.String(d.sys.FailureBucket), Key: aws.String(k)})
		if err != nil {
			d.t.Fatal(err)
		}
		for _, tag := range out.TagSet {
			if aws.ToString(tag.Key) == failures.ReplayedTag && aws.ToString(tag.Value) == failures.ReplayedTagValue {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// failed returns the failure objects by mapping name, parsed; objects that
// are no failure records are left out.
func (d *drill) failed() map[string][]failures.Object {
	d.t.Helper()
	byID := map[string]string{}
	for _, m := range wiring.Mappings() {
		byID[failures.LocalMappingID(m.Name)] = m.Name
	}
	out := map[string][]failures.Object{}
	for _, key := range d.objects(failures.Prefix) {
		k, err := failures.ParseKey(key)
		if err != nil {
			continue
		}
		o, err := failures.Parse(d.get(d.sys.FailureBucket, key))
		if err != nil {
			continue
		}
		out[byID[k.MappingID]] = append(out[byID[k.MappingID]], o)
	}
	return out
}

func (d *drill) get(bucket, key string) []byte {
	d.t.Helper()
	out, err := d.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		d.t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

func (d *drill) put(bucket, key string, body []byte) {
	d.t.Helper()
	if _, err := d.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		d.t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
}

func (d *drill) remove(bucket, key string) {
	d.t.Helper()
	if _, err := d.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		d.t.Fatalf("delete %s/%s: %v", bucket, key, err)
	}
}

// http sends a request to one of the system's endpoints and returns the
// status and body.
func (d *drill) http(method, u, token string, body any) (int, []byte) {
	d.t.Helper()
	var rd io.Reader
	if raw, ok := body.([]byte); ok {
		rd = bytes.NewReader(raw)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// api calls the HTTP API as sub ("admin" is an admin) and decodes the answer
// into out, failing the test unless the status is want.
func (d *drill) api(want int, method, path, sub string, body, out any) {
	d.t.Helper()
	var tok string
	if sub != "" {
		var err error
		if tok, err = apigw.Token([]byte(system.DefaultJWTSecret), sub, sub == "admin", time.Hour); err != nil {
			d.t.Fatal(err)
		}
	}
	got, b := d.http(method, d.sys.APIURL+path, tok, body)
	if got != want {
		d.t.Fatalf("%s %s: got %d %s, want %d", method, path, got, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %s: %v", method, path, b, err)
		}
	}
}

// fault injects a DynamoDB fault through the stack's hook, as an operator's
// drill does; clearFaults removes them all.
func (d *drill) fault(table, op, code string) {
	d.t.Helper()
	body := map[string]any{"table": d.prefix + table, "operation": op, "code": code, "times": 0}
	if got, b := d.http("POST", d.sys.DynamoDBURL+"/_local/faults", "", body); got/100 != 2 {
		d.t.Fatalf("inject fault: %d %s", got, b)
	}
}

// faultTimes makes the next n requests of op on table fail with code.
func (d *drill) faultTimes(table, op, code string, n int) {
	d.t.Helper()
	body := map[string]any{"table": d.prefix + table, "operation": op, "code": code, "times": n}
	if got, b := d.http("POST", d.sys.DynamoDBURL+"/_local/faults", "", body); got/100 != 2 {
		d.t.Fatalf("inject fault: %d %s", got, b)
	}
}

func (d *drill) clearFaults() {
	d.t.Helper()
	if got, b := d.http("DELETE", d.sys.DynamoDBURL+"/_local/faults", "", nil); got/100 != 2 {
		d.t.Fatalf("clear faults: %d %s", got, b)
	}
}

// eventually polls check until it returns "" or a minute passed.
func eventually(t testing.TB, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// archived returns the archive's lines as table/key values (in key name
// order) → event ids, and fails
// the test on an event id in two objects.
func (d *drill) archived() map[string][]string {
	d.t.Helper()
	bucket := d.sys.Env["ARCHIVE_BUCKET"]
	out := map[string][]string{}
	seen := map[string]string{}
	p := s3.NewListObjectsV2Paginator(d.s3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		var missing *s3types.NoSuchBucket
		if errors.As(err, &missing) {
			return out
		}
		if err != nil {
			d.t.Fatal(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if strings.HasPrefix(key, audit.DigestPrefix) {
				continue // the audit's digest, not archived items
			}
			zr, err := gzip.NewReader(bytes.NewReader(d.get(bucket, key)))
			if err != nil {
				d.t.Fatalf("archive object %s: %v", key, err)
			}
			raw, err := io.ReadAll(zr)
			if err != nil {
				d.t.Fatalf("archive object %s: %v", key, err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				var l struct {
					EventID string            `json:"eventId"`
					Table   string            `json:"table"`
					Keys    map[string]string `json:"keys"`
				}
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					d.t.Fatalf("archive line %q: %v", line, err)
				}
				if other, dup := seen[l.EventID]; dup {
					d.t.Errorf("event %s archived twice: in %s and %s", l.EventID, other, key)
				}
				seen[l.EventID] = key
				names := make([]string, 0, len(l.Keys))
				for k := range l.Keys {
					names = append(names, k)
				}
				sort.Strings(names)
				id := l.Table
				for _, k := range names {
					id += "/" + l.Keys[k]
				}
				out[id] = append(out[id], l.EventID)
			}
		}
	}
	return out
}

// doc returns the search service's document of a product ("" when none).
// catalogVersion reads the version of a product's catalog item.
func (d *drill) catalogVersion(productID string) int64 {
	d.t.Helper()
	out, err := d.sys.DynamoDB().GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(tables.Physical(d.prefix, tables.Products)), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: productID}},
	})
	if err != nil {
		d.t.Fatalf("catalog item of %s: %v", productID, err)
	}
	var p struct{ Version int64 }
	if err := attributevalue.UnmarshalMap(out.Item, &p); err != nil {
		d.t.Fatalf("catalog item of %s: %v", productID, err)
	}
	return p.Version
}

func (d *drill) doc(productID string) string {
	d.t.Helper()
	got, b := d.http("GET", d.sys.SearchURL+"/products/_doc/"+productID, "", nil)
	if got == http.StatusNotFound {
		return ""
	}
	var r struct {
		Found  bool            `json:"found"`
		Source json.RawMessage `json:"_source"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		d.t.Fatalf("doc %s: %s: %v", productID, b, err)
	}
	if !r.Found {
		return ""
	}
	var src map[string]any
	json.Unmarshal(r.Source, &src)
	return fmt.Sprintf("v%v units=%v reviews=%v rating=%v", src["version"], src["unitsSold"], src["reviewCount"], src["ratingAverage"])
}

// s3Fault makes the next n requests of op on the stack's bucket fail with
// S3's code; s3Faults lists those still in force.
func (d *drill) s3Fault(bucket, op, code string, n int) {
	d.t.Helper()
	body := map[string]any{"bucket": bucket, "operation": op, "code": code, "times": n}
	if got, b := d.http("POST", d.sys.S3URL+"/_local/faults", "", body); got/100 != 2 {
		d.t.Fatalf("inject s3 fault: %d %s", got, b)
	}
}

func (d *drill) s3Faults() []map[string]any {
	d.t.Helper()
	got, b := d.http("GET", d.sys.S3URL+"/_local/faults", "", nil)
	var active []map[string]any
	if got != 200 || json.Unmarshal(b, &active) != nil {
		d.t.Fatalf("s3 faults: %d %s", got, b)
	}
	return active
}

// searchRejects makes the search service reject the next items bulk
// actions and the next requests bulk requests whole (429);
// searchRejectsLeft says how many are left of both.
func (d *drill) searchRejects(items, requests int) {
	d.t.Helper()
	if got, b := d.http("POST", d.sys.SearchURL+"/_local/faults", "", map[string]int{"rejectBulkItems": items, "rejectBulkRequests": requests}); got/100 != 2 {
		d.t.Fatalf("inject search fault: %d %s", got, b)
	}
}

func (d *drill) searchRejectsLeft() int {
	d.t.Helper()
	got, b := d.http("GET", d.sys.SearchURL+"/_local/faults", "", nil)
	var left map[string]int
	if got != 200 || json.Unmarshal(b, &left) != nil {
		d.t.Fatalf("search faults: %d %s", got, b)
	}
	return left["rejectBulkItems"] + left["rejectBulkRequests"]
}
