package esm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/stacktest"
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
	f.fail = func(keys []string, _ []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
		for _, k := range keys {
			if k == "poison" {
				return events.DynamoDBEventResponse{}, errors.New("cannot handle this one")
			}
		}
		return events.DynamoDBEventResponse{}, nil
	}
	m := mapping("poison")
	m.ReportBatchItemFailures = false
	dir := t.TempDir()
	p := start(t, prefix, m, f, dir)
	defer p.Close()
	idle(t, p)
	got := f.delivered()
	if got["u0"] < 1 || got["u2"] < 1 {
		t.Errorf("records around the poison: got %v, want both delivered", got)
	}
	fails := p.Failures(m.Name)
	if len(fails) != 1 || fails[0].BatchSize != 1 || fails[0].StartSequenceNumber != fails[0].EndSequenceNumber || fails[0].Destination != "poison-failures" {
		t.Fatalf("failures: got %+v, want the poison record alone", fails)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "failures", "poison-failures.jsonl")); err != nil || !strings.Contains(string(b), fails[0].StartSequenceNumber) {
		t.Errorf("failure record on disk: got %q (err %v), want it to name the poison's sequence number", b, err)
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
	if fails := p.Failures(m.Name); len(fails) != 1 || fails[0].Reason != "MaximumRecordAgeExceeded" {
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
