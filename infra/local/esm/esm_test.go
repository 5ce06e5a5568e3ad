package esm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// fn records every batch it is given; fail decides, per batch, what to report.
type fn struct {
	mu      sync.Mutex
	batches [][]string // review keys (userId) per invocation
	fail    func(keys []string, recs []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error)
}

func (f *fn) Handle(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var keys []string
	for _, r := range ev.Records {
		keys = append(keys, r.Change.Keys["userId"].String())
	}
	f.mu.Lock()
	f.batches = append(f.batches, keys)
	f.mu.Unlock()
	if f.fail != nil {
		return f.fail(keys, ev.Records)
	}
	return events.DynamoDBEventResponse{}, nil
}

func (f *fn) delivered() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, b := range f.batches {
		for _, k := range b {
			out[k]++
		}
	}
	return out
}

func mapping(name string) wiring.Mapping {
	return wiring.Mapping{Name: name, Table: tables.Reviews, Function: "f", BatchSize: 3, BatchingWindow: 0,
		StartingPosition: "TRIM_HORIZON", RetryAttempts: 2, MaxRecordAge: time.Hour, BisectOnError: true,
		ReportBatchItemFailures: true, ParallelizationFactor: 1}
}

func start(t *testing.T, prefix string, m wiring.Mapping, f *fn, dataDir string) *Poller {
	t.Helper()
	st := stacktest.Stack(t)
	p, err := Start(context.Background(), Config{DynamoDB: st.DynamoDB(), Streams: st.Streams(), TablePrefix: prefix,
		Mappings: []wiring.Mapping{m}, Functions: map[string]Invoker{"f": f}, PollInterval: 50 * time.Millisecond, DataDir: dataDir})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return p
}

func idle(t *testing.T, p *Poller) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Idle(ctx); err != nil {
		t.Fatal(err)
	}
}

func putReviews(t *testing.T, prefix string, users ...string) {
	t.Helper()
	db := stacktest.DynamoDB(t)
	for _, u := range users {
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(tables.Physical(prefix, tables.Reviews)),
			Item: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: "p1"}, "userId": &types.AttributeValueMemberS{Value: u},
				"createdAt": &types.AttributeValueMemberS{Value: "2026-11-22T00:00:00Z"}, "rating": &types.AttributeValueMemberN{Value: "4"}}}); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
}

func users(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, "u"+strconv.Itoa(i))
	}
	return out
}

func TestDeliversInOrderInBatchesAndFilters(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, users(7)...)
	db := stacktest.DynamoDB(t)
	if _, err := db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(tables.Physical(prefix, tables.Reviews)),
		Key: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: "p1"}, "userId": &types.AttributeValueMemberS{Value: "u0"}}}); err != nil {
		t.Fatal(err)
	}
	m := mapping("ordered")
	m.Filters = []string{`{"eventName":["INSERT"]}`}
	f := &fn{}
	p := start(t, prefix, m, f, "")
	defer p.Close()
	idle(t, p)
	var all []string
	for _, b := range f.batches {
		if len(b) > m.BatchSize {
			t.Errorf("batch of %d, want at most %d", len(b), m.BatchSize)
		}
		all = append(all, b...)
	}
	if got, want := fmt.Sprint(all), fmt.Sprint(users(7)); got != want {
		t.Errorf("delivered: got %v, want %v (the REMOVE filtered out)", got, want)
	}
}

func TestPartialFailureResumesAtTheFailedRecord(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, users(3)...)
	failed := false
	f := &fn{}
	f.fail = func(keys []string, recs []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
		for i, k := range keys {
			if k == "u1" && !failed {
				failed = true
				return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: recs[i].Change.SequenceNumber}}}, nil
			}
		}
		return events.DynamoDBEventResponse{}, nil
	}
	m := mapping("partial")
	m.BisectOnError = false
	p := start(t, prefix, m, f, "")
	defer p.Close()
	idle(t, p)
	got := f.delivered()
	if got["u0"] != 1 || got["u1"] != 2 || got["u2"] != 2 {
		t.Errorf("deliveries: got %v, want u0 once, u1 and u2 twice (resumed at u1)", got)
	}
	if n := len(p.Failures(m.Name)); n != 0 {
		t.Errorf("failures: got %d, want 0", n)
	}
}

func TestUnknownIdentifierFailsTheWholeBatch(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, users(2)...)
	calls := 0
	f := &fn{}
	f.fail = func(keys []string, _ []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
		calls++
		if calls == 1 {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: "an-event-id"}}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}
	m := mapping("unknown-id")
	m.BisectOnError = false
	p := start(t, prefix, m, f, "")
	defer p.Close()
	idle(t, p)
	if got := f.delivered(); got["u0"] != 2 || got["u1"] != 2 {
		t.Errorf("deliveries: got %v, want both twice", got)
	}
}

func TestPoisonRecordGoesToTheFailureDestinationWithoutBlocking(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, "u0", "poison", "u2")
	f := &fn{}
	f.fail = failOn("poison")
	m := mapping("poison")
	m.ReportBatchItemFailures = false
	st := stacktest.Stack(t)
	bucket := strings.ToLower(strings.TrimSuffix(prefix, "-")) + "-failures"
	if _, err := st.S3().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), Config{DynamoDB: st.DynamoDB(), Streams: st.Streams(), TablePrefix: prefix,
		Mappings: []wiring.Mapping{m}, Functions: map[string]Invoker{"f": f}, PollInterval: 50 * time.Millisecond,
		Destination: &S3Destination{S3: st.S3(), Bucket: bucket}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer p.Close()
	idle(t, p)
	got := f.delivered()
	if got["u0"] < 1 || got["u2"] < 1 {
		t.Errorf("records around the poison: got %v, want both delivered", got)
	}
	fails := p.Failures(m.Name)
	if len(fails) != 1 || fails[0].Batch.BatchSize != 1 || fails[0].Batch.StartSequenceNumber != fails[0].Batch.EndSequenceNumber {
		t.Fatalf("failures: got %+v, want the poison record alone", fails)
	}
	// Splitting does not consume the retry quota: the poison alone gets one
	// invocation and RetryAttempts retries.
	alone := 0
	f.mu.Lock()
	for _, b := range f.batches {
		if len(b) == 1 && b[0] == "poison" {
			alone++
		}
	}
	f.mu.Unlock()
	if alone != m.RetryAttempts+1 {
		t.Errorf("invocations of the poison alone: got %d, want %d", alone, m.RetryAttempts+1)
	}
	// The object in the bucket is AWS's invocation record with the payload,
	// under Lambda's key layout.
	k, err := failures.ParseKey(fails[0].Key)
	if err != nil || k.MappingID != failures.LocalMappingID(m.Name) || k.ShardID != fails[0].Batch.ShardID {
		t.Errorf("key %s: got %+v, %v; want the mapping's id and the shard", fails[0].Key, k, err)
	}
	obj, err := st.S3().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(fails[0].Key)})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := failures.Parse(b)
	if err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	if got := parsed.Payload.Records; len(got) != 1 || got[0].Change.Keys["userId"].String() != "poison" {
		t.Errorf("payload: got %+v, want the poison record", got)
	}
	var rec struct {
		Version        string
		RequestContext struct {
			RequestID, FunctionArn, Condition string
			ApproximateInvokeCount            int
		}
		ResponseContext struct{ FunctionError *string }
		Batch           struct {
			ShardID, StartSequenceNumber, EndSequenceNumber, StreamArn string
			BatchSize                                                  int
		} `json:"DDBStreamBatchInfo"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("failure record %s: %v", b, err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"version", rec.Version, "1.0"},
		{"condition", rec.RequestContext.Condition, ConditionRetriesExhausted},
		{"request id", rec.RequestContext.RequestID != "", true},
		{"function", strings.HasSuffix(rec.RequestContext.FunctionArn, ":function:f"), true},
		{"invocations", rec.RequestContext.ApproximateInvokeCount >= m.RetryAttempts+1, true},
		{"function error", fmt.Sprint(rec.ResponseContext.FunctionError != nil && *rec.ResponseContext.FunctionError == "Unhandled"), "true"},
		{"shard", rec.Batch.ShardID, fails[0].Batch.ShardID},
		{"start", rec.Batch.StartSequenceNumber, fails[0].Batch.StartSequenceNumber},
		{"end", rec.Batch.EndSequenceNumber, fails[0].Batch.StartSequenceNumber},
		{"batch size", rec.Batch.BatchSize, 1},
		{"stream", strings.Contains(rec.Batch.StreamArn, "/stream/"), true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestRestartResumesFromTheCheckpoint(t *testing.T) {
	prefix := stacktest.Tables(t)
	dir := t.TempDir()
	putReviews(t, prefix, "a", "b", "c")
	m := mapping("resume")
	f1 := &fn{}
	p := start(t, prefix, m, f1, dir)
	idle(t, p)
	p.Close()
	putReviews(t, prefix, "d", "e")
	f2 := &fn{}
	p = start(t, prefix, m, f2, dir)
	defer p.Close()
	idle(t, p)
	if got := f2.delivered(); len(got) != 2 || got["d"] != 1 || got["e"] != 1 {
		t.Errorf("after restart: got %v, want only d and e", got)
	}
}

func TestMaxRecordAge(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, "old")
	m := mapping("aged")
	f := &fn{}
	st := stacktest.Stack(t)
	p, err := Start(context.Background(), Config{DynamoDB: st.DynamoDB(), Streams: st.Streams(), TablePrefix: prefix,
		Mappings: []wiring.Mapping{m}, Functions: map[string]Invoker{"f": f}, PollInterval: 50 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	idle(t, p)
	if got := f.delivered(); len(got) != 0 {
		t.Errorf("delivered: got %v, want nothing", got)
	}
	if fails := p.Failures(m.Name); len(fails) != 1 || fails[0].RequestContext.Condition != ConditionRecordAge || fails[0].RequestContext.ApproximateInvokeCount != 0 {
		t.Errorf("failures: got %+v", fails)
	}
}

func TestStartsOnAnEmptyStream(t *testing.T) {
	prefix := stacktest.Tables(t)
	f := &fn{}
	p := start(t, prefix, mapping("empty-first"), f, "")
	defer p.Close()
	idle(t, p)
	putReviews(t, prefix, "late")
	deadline := time.Now().Add(20 * time.Second)
	for f.delivered()["late"] == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	idle(t, p)
	if got := f.delivered(); got["late"] != 1 {
		t.Errorf("deliveries: got %v, want the late record once", got)
	}
}

// TestIdleCoversAShardsFirstRecord: DynamoDB Local refuses, as trimmed,
// the iterator it gave for a shard while the shard was empty once a record
// is there. That refusal is not a poll that found nothing: Idle returned
// with the first record of a fresh table unread.
func TestIdleCoversAShardsFirstRecord(t *testing.T) {
	prefix := stacktest.Tables(t)
	f := &fn{}
	p := start(t, prefix, mapping("first-record"), f, "")
	defer p.Close()
	idle(t, p)
	time.Sleep(150 * time.Millisecond) // polls hold the empty shard's iterator
	putReviews(t, prefix, "first")
	idle(t, p)
	if got := f.delivered(); got["first"] != 1 {
		t.Errorf("deliveries once idle: got %v, want the first record once", got)
	}
}

// capture keeps every record delivered and the request id each batch saw.
type capture struct {
	mu         sync.Mutex
	records    []events.DynamoDBEventRecord
	requestIDs []string
}

func (c *capture) invoker() Invoker {
	return InvokerFunc(func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.records = append(c.records, ev.Records...)
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			c.requestIDs = append(c.requestIDs, lc.AwsRequestID)
		}
		return events.DynamoDBEventResponse{}, nil
	})
}

func (c *capture) got() []events.DynamoDBEventRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.DynamoDBEventRecord(nil), c.records...)
}

func startWith(t *testing.T, prefix string, m wiring.Mapping, fn Invoker) *Poller {
	t.Helper()
	st := stacktest.Stack(t)
	p, err := Start(context.Background(), Config{DynamoDB: st.DynamoDB(), Streams: st.Streams(), TablePrefix: prefix,
		Mappings: []wiring.Mapping{m}, Functions: map[string]Invoker{m.Function: fn}, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestEventIsWhatLambdaDelivers(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, "shape")
	c := &capture{}
	p := startWith(t, prefix, mapping("shape"), c.invoker())
	idle(t, p)
	recs := c.got()
	if len(recs) != 1 {
		t.Fatalf("records: got %d, want 1", len(recs))
	}
	r := recs[0]
	table := tables.Physical(prefix, tables.Reviews)
	checks := []struct {
		name      string
		got, want any
	}{
		{"eventName", r.EventName, "INSERT"},
		{"eventSource", r.EventSource, "aws:dynamodb"},
		{"awsRegion", r.AWSRegion, "us-east-1"},
		{"eventSourceARN names the table", strings.Contains(r.EventSourceArn, ":table/"+table+"/stream/"), true},
		{"eventID", r.EventID != "", true},
		{"key", r.Change.Keys["userId"].String(), "shape"},
		{"new image", r.Change.NewImage["rating"].Number(), "4"},
		{"no old image", len(r.Change.OldImage), 0},
		{"sequence number", len(r.Change.SequenceNumber) >= 21, true},
		{"size", r.Change.SizeBytes > 0, true},
		{"view type", r.Change.StreamViewType, "NEW_AND_OLD_IMAGES"},
		{"creation time", time.Since(r.Change.ApproximateCreationDateTime.Time) < time.Hour, true},
		{"no user identity on a user's write", r.UserIdentity == nil, true},
		{"request id", len(c.requestIDs) == 1 && len(c.requestIDs[0]) == 36, true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

// TestOnlyTTLRemovalsReachTheArchiver runs the archiver's own mapping of the
// carts stream against the stack's TTL sweeper.
func TestOnlyTTLRemovalsReachTheArchiver(t *testing.T) {
	prefix := stacktest.Tables(t)
	var m wiring.Mapping
	for _, x := range wiring.Mappings() {
		if x.Table == tables.Carts && x.Function == wiring.Archiver {
			m = x
		}
	}
	if m.Name == "" {
		t.Fatal("no archiver mapping of the carts stream in the wiring")
	}
	m.BatchingWindow = 0
	db := stacktest.DynamoDB(t)
	table := aws.String(tables.Physical(prefix, tables.Carts))
	cart := func(user string, expires time.Time) {
		t.Helper()
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: table, Item: map[string]types.AttributeValue{
			"userId": &types.AttributeValueMemberS{Value: user}, "expiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(expires.Unix(), 10)}}}); err != nil {
			t.Fatal(err)
		}
	}
	cart("expired", time.Now().Add(-time.Minute))
	cart("deleted", time.Now().Add(time.Hour))
	cart("kept", time.Now().Add(time.Hour))
	if _, err := db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: table,
		Key: map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "deleted"}}}); err != nil {
		t.Fatal(err)
	}
	c := &capture{}
	p := startWith(t, prefix, m, c.invoker())
	deadline := time.Now().Add(30 * time.Second)
	for len(c.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	idle(t, p)
	recs := c.got()
	if len(recs) != 1 {
		t.Fatalf("records: got %d (%+v), want only the TTL removal", len(recs), recs)
	}
	r := recs[0]
	if r.EventName != "REMOVE" || r.Change.Keys["userId"].String() != "expired" || r.UserIdentity == nil ||
		r.UserIdentity.Type != "Service" || r.UserIdentity.PrincipalID != "dynamodb.amazonaws.com" || len(r.Change.OldImage) == 0 {
		t.Errorf("record: got %+v, want the expired cart's TTL removal with its old image", r)
	}
}

func TestRetriesExhaustedWithoutBisectFailTheWholeBatch(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, "u0", "poison", "u2", "u3", "u4")
	f := &fn{}
	f.fail = failOn("poison")
	m := mapping("no-bisect")
	m.BisectOnError = false
	m.ReportBatchItemFailures = false
	p := start(t, prefix, m, f, "")
	defer p.Close()
	idle(t, p)
	f.mu.Lock()
	var poisoned [][]string
	for _, b := range f.batches {
		if strings.Contains(fmt.Sprint(b), "poison") {
			poisoned = append(poisoned, b)
		}
	}
	f.mu.Unlock()
	if len(poisoned) != m.RetryAttempts+1 {
		t.Errorf("invocations with the poison: got %d, want %d (one plus %d retries)", len(poisoned), m.RetryAttempts+1, m.RetryAttempts)
	}
	for _, b := range poisoned {
		if fmt.Sprint(b) != fmt.Sprint(poisoned[0]) {
			t.Errorf("retried batch: got %v, want %v every time (no bisection)", b, poisoned[0])
		}
	}
	fails := p.Failures(m.Name)
	if len(fails) != 1 || fails[0].Batch.BatchSize != len(poisoned[0]) || fails[0].RequestContext.Condition != ConditionRetriesExhausted ||
		fails[0].RequestContext.ApproximateInvokeCount != m.RetryAttempts+1 {
		t.Fatalf("failures: got %+v, want the whole batch of %d", fails, len(poisoned[0]))
	}
	got := f.delivered()
	if got["u3"] == 0 || got["u4"] == 0 {
		t.Errorf("records behind the failed batch: got %v, want u3 and u4 delivered", got)
	}
}

func TestLatestStartsAfterWhatIsThere(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, "before")
	m := mapping("latest")
	m.StartingPosition = "LATEST"
	f := &fn{}
	p := start(t, prefix, m, f, "")
	defer p.Close()
	idle(t, p)
	putReviews(t, prefix, "after")
	deadline := time.Now().Add(20 * time.Second)
	for f.delivered()["after"] == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	idle(t, p)
	if got := f.delivered(); len(got) != 1 || got["after"] != 1 {
		t.Errorf("deliveries: got %v, want only the record written after the start", got)
	}
}

// TestBatchesStayUnderLambdasPayloadLimit: seventy records of 100 KB fit the
// batch size but not one 6 MB invocation.
func TestBatchesStayUnderLambdasPayloadLimit(t *testing.T) {
	prefix := stacktest.Tables(t)
	db := stacktest.DynamoDB(t)
	body := strings.Repeat("x", 100<<10)
	const n = 70
	for i := 0; i < n; i++ {
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(tables.Physical(prefix, tables.Reviews)),
			Item: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: "p1"}, "userId": &types.AttributeValueMemberS{Value: "big" + strconv.Itoa(i)},
				"createdAt": &types.AttributeValueMemberS{Value: "2026-11-22T00:00:00Z"}, "body": &types.AttributeValueMemberS{Value: body}}}); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	var mu sync.Mutex
	var sizes []int
	delivered := map[string]int{}
	m := mapping("payload")
	m.BatchSize = n
	p := startWith(t, prefix, m, InvokerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		raw, err := json.Marshal(ev)
		if err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(raw))
		for _, r := range ev.Records {
			delivered[r.Change.Keys["userId"].String()]++
		}
		return events.DynamoDBEventResponse{}, nil
	}))
	idle(t, p)
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) < 2 {
		t.Errorf("invocations: got %d, want at least 2", len(sizes))
	}
	for _, s := range sizes {
		if s > MaxPayload {
			t.Errorf("payload: got %d bytes, want at most %d", s, MaxPayload)
		}
	}
	if len(delivered) != n {
		t.Errorf("delivered: got %d records, want %d", len(delivered), n)
	}
	for k, c := range delivered {
		if c != 1 {
			t.Errorf("%s delivered %d times, want once", k, c)
		}
	}
}

// failOn fails every invocation whose batch holds the record keyed bad.
func failOn(bad string) func([]string, []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
	return func(keys []string, _ []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
		if slices.Contains(keys, bad) {
			return events.DynamoDBEventResponse{}, fmt.Errorf("cannot handle %s", bad)
		}
		return events.DynamoDBEventResponse{}, nil
	}
}

// TestTimedOutInvocationIsRetried: an invocation that outlives the function
// timeout fails as on Lambda (its late answer ignored) and the batch is
// delivered again; the function's context carried the deadline.
func TestTimedOutInvocationIsRetried(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, "u1", "u2")
	release := make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	var calls int
	var deadlines []time.Duration
	fn := InvokerFunc(func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		mu.Lock()
		calls++
		first := calls == 1
		if d, ok := ctx.Deadline(); ok {
			deadlines = append(deadlines, time.Until(d))
		}
		mu.Unlock()
		if first {
			<-release // ignores its context, as a stuck function would
			return events.DynamoDBEventResponse{}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	})
	m := mapping("timeout")
	m.BisectOnError = false // the retry is the whole batch again
	st := stacktest.Stack(t)
	p, err := Start(context.Background(), Config{DynamoDB: st.DynamoDB(), Streams: st.Streams(), TablePrefix: prefix,
		Mappings: []wiring.Mapping{m}, Functions: map[string]Invoker{m.Function: fn}, PollInterval: 50 * time.Millisecond,
		FunctionTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer p.Close()
	idle(t, p)
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("invocations: got %d, want 2 (the timed-out one, then its retry)", calls)
	}
	if len(deadlines) != calls {
		t.Fatalf("deadlines: got %d for %d invocations, want one each", len(deadlines), calls)
	}
	for _, d := range deadlines {
		if d > 300*time.Millisecond {
			t.Errorf("deadline %v ahead at the call, want at most the 300ms timeout", d)
		}
	}
	if f := p.Failures(m.Name); len(f) != 0 {
		t.Errorf("failure destination: got %+v, want nothing (the retry succeeded)", f)
	}
}

func TestEveryNthCompletedBatchIsDeliveredAgain(t *testing.T) {
	prefix := stacktest.Tables(t)
	putReviews(t, prefix, users(9)...)
	m := mapping("twice")
	f := &fn{}
	st := stacktest.Stack(t)
	p, err := Start(context.Background(), Config{DynamoDB: st.DynamoDB(), Streams: st.Streams(), TablePrefix: prefix,
		Mappings: []wiring.Mapping{m}, Functions: map[string]Invoker{"f": f}, PollInterval: 50 * time.Millisecond, DuplicateEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	idle(t, p)
	f.mu.Lock()
	batches := slices.Clone(f.batches)
	f.mu.Unlock()
	// Nine records in batches of at most 3: each second batch completed is
	// delivered again right after itself, and a second delivery is not
	// counted toward the next one.
	var firsts, seconds int
	for i := 0; i < len(batches); i++ {
		firsts++
		if firsts%2 == 0 {
			if i+1 >= len(batches) || fmt.Sprint(batches[i+1]) != fmt.Sprint(batches[i]) {
				t.Fatalf("batch %d %v not delivered again right after itself: %v", i, batches[i], batches)
			}
			i++
			seconds++
		}
	}
	if seconds == 0 {
		t.Fatalf("no batch delivered twice: %v", batches)
	}
	if got := p.Duplicated(m.Name); got != int64(seconds) {
		t.Errorf("Duplicated: got %d, want %d", got, seconds)
	}
	got := f.delivered()
	for _, u := range users(9) {
		if got[u] < 1 || got[u] > 2 {
			t.Errorf("%s delivered %d times, want 1 or 2", u, got[u])
		}
	}
	var all []string
	for i, b := range batches {
		if i > 0 && fmt.Sprint(b) == fmt.Sprint(batches[i-1]) {
			continue
		}
		all = append(all, b...)
	}
	if fmt.Sprint(all) != fmt.Sprint(users(9)) {
		t.Errorf("first deliveries out of order: %v", all)
	}
}
