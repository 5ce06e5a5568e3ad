package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// unreadable is a failure bucket whose GetObject fails with err.
type unreadable struct {
	Store
	err error
}

func (u unreadable) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, u.err
}

// TestUnreadableObjectStopsTheReplay: a failure object the bucket will not
// hand over (access denied, throttled) says nothing of the object: the
// replay stops with an error (exit 2), where a skip would have told the
// operator to judge, retire or delete a healthy batch. An object gone since
// the listing (retired by another run) is skipped.
func TestUnreadableObjectStopsTheReplay(t *testing.T) {
	m := wiring.Mappings()[0]
	id := failures.LocalMappingID(m.Name)
	key := failures.NewKey(id, "shardId-00000000000000000000-00000000", time.Now()).String()
	tg := &target.Target{MappingIDs: map[string]string{m.Name: id}}
	for _, c := range []struct {
		name     string
		err      error
		stops    bool
		reported string
	}{
		{"access denied", &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}, true, ""},
		{"slow down", &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."}, true, ""},
		{"gone", &types.NoSuchKey{}, false, "gone since the listing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			r := &run{cfg: Config{Store: unreadable{err: c.err}, Bucket: "failures", Target: tg, Out: &out, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
			l, err := r.load(context.Background(), key)
			if l != nil {
				t.Fatalf("loaded %+v from an unreadable object", l)
			}
			if stopped := err != nil; stopped != c.stops {
				t.Fatalf("error %v, report %q; want the replay stopped: %v", err, out.String(), c.stops)
			}
			if c.stops && !errors.Is(err, c.err) {
				t.Errorf("error %v does not carry the bucket's %v", err, c.err)
			}
			if !strings.Contains(out.String(), c.reported) || (c.stops && out.Len() > 0) {
				t.Errorf("report %q, want %q", out.String(), c.reported)
			}
		})
	}
}

// holding is a failure bucket whose every object is body.
type holding struct {
	Store
	body []byte
}

func (h holding) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(h.body))}, nil
}

// TestBatchOfAReplacedMappingIsReplayed: a deploy that replaces a mapping
// gives it a new UUID, and the batches its predecessor discarded are kept
// under the old one. They name the stage's function and table, so they are
// the stage's mapping's, and are replayed; a batch naming another stage's
// function is skipped. Retiring a batch of an unknown UUID needs -force: it
// could be an archiver's.
func TestBatchOfAReplacedMappingIsReplayed(t *testing.T) {
	body, o := awsShaped(t)
	var want wiring.Mapping
	for _, m := range wiring.Mappings() {
		if m.Function == wiring.Counters && m.Table == tables.Reviews {
			want = m
		}
	}
	tg := &target.Target{
		MappingIDs: map[string]string{want.Name: failures.LocalMappingID(want.Name)},
		Functions:  map[string]string{wiring.Counters: o.Function()},
		Tables:     map[string]string{tables.Reviews: o.Table()},
	}
	replaced := failures.NewKey(failures.LocalMappingID("before the deploy"), o.Batch.ShardID, time.Now()).String()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var out strings.Builder
	r := &run{cfg: Config{Store: holding{body: body}, Bucket: "failures", Target: tg, Out: &out, Logger: quiet}}
	l, err := r.load(context.Background(), replaced)
	if err != nil || l == nil || l.m.Name != want.Name {
		t.Fatalf("batch of a replaced mapping: loaded %+v, %v, report %q; want it under %s", l, err, out.String(), want.Name)
	}

	// A run for that mapping takes it; a run for another leaves it alone.
	out.Reset()
	r = &run{cfg: Config{Store: holding{body: body}, Bucket: "failures", Target: tg, Out: &out, Logger: quiet, Mapping: want.Name}}
	if !r.named(replaced) || !r.named(failures.NewKey(tg.MappingIDs[want.Name], o.Batch.ShardID, time.Now()).String()) {
		t.Fatalf("a run for %s does not list its batches (under the old UUID or its own)", want.Name)
	}
	if l, err := r.load(context.Background(), replaced); err != nil || l == nil || l.m.Name != want.Name {
		t.Fatalf("run for %s: loaded %+v, %v, report %q; want it", want.Name, l, err, out.String())
	}
	var another wiring.Mapping
	for _, m := range wiring.Mappings() {
		if m.Name != want.Name {
			another = m
			break
		}
	}
	tg.MappingIDs[another.Name] = failures.LocalMappingID(another.Name)
	r = &run{cfg: Config{Store: holding{body: body}, Bucket: "failures", Target: tg, Out: &out, Logger: quiet, Mapping: another.Name}}
	if l, err := r.load(context.Background(), replaced); !errors.Is(err, errOtherMapping) || l != nil || out.Len() > 0 {
		t.Fatalf("run for %s: loaded %+v, %v, report %q; want the batch left alone, unreported", another.Name, l, err, out.String())
	}
	if r.named(failures.NewKey(tg.MappingIDs[want.Name], o.Batch.ShardID, time.Now()).String()) {
		t.Fatalf("a run for %s lists %s's batches", another.Name, want.Name)
	}
	delete(tg.MappingIDs, another.Name)

	other := *tg
	other.Functions = map[string]string{wiring.Counters: "shopstream-other-counters"}
	out.Reset()
	r = &run{cfg: Config{Store: holding{body: body}, Bucket: "failures", Target: &other, Out: &out, Logger: quiet}}
	if l, err := r.load(context.Background(), replaced); err != nil || l != nil || !strings.Contains(out.String(), "no mapping of this stage has the UUID") {
		t.Fatalf("batch of another stage: loaded %+v, %v, report %q; want it skipped", l, err, out.String())
	}

	_, err = Retire(context.Background(), Config{Store: holding{body: body}, Bucket: "failures", Target: tg, Out: io.Discard}, []string{replaced}, "understood", false)
	if err == nil || !strings.Contains(err.Error(), "-force") {
		t.Fatalf("retire of a batch of an unknown UUID without -force: %v; want refused", err)
	}
}

// memBucket is a failure bucket in memory: the writes finish makes.
type memBucket struct {
	Store
	objects map[string][]byte
	tagged  map[string]bool
}

func (b *memBucket) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	body, err := io.ReadAll(in.Body)
	b.objects[*in.Key] = body
	return &s3.PutObjectOutput{}, err
}

func (b *memBucket) PutObjectTagging(_ context.Context, in *s3.PutObjectTaggingInput, _ ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error) {
	b.tagged[*in.Key] = true
	return &s3.PutObjectTaggingOutput{}, nil
}

// TestOldIndexerBatchAsksForAReindex: an indexer batch whose records are
// older than the index remembers deletes may write products deleted since
// back into it: its line and the run's summary say to run make reindex. A
// younger one, or another function's, does not.
func TestOldIndexerBatchAsksForAReindex(t *testing.T) {
	_, o := awsShaped(t)
	mapping := func(fn string) wiring.Mapping {
		for _, m := range wiring.Mappings() {
			if m.Function == fn {
				return m
			}
		}
		t.Fatalf("no mapping of %s", fn)
		return wiring.Mapping{}
	}
	for _, c := range []struct {
		name    string
		fn      string
		age     time.Duration
		reindex bool
	}{
		{"indexer, past the memory", wiring.StreamIndexer, productsearch.DeleteMemory + time.Hour, true},
		{"indexer, within it", wiring.StreamIndexer, productsearch.DeleteMemory - time.Hour, false},
		{"counters, past it", wiring.Counters, productsearch.DeleteMemory + time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			now := o.Oldest().Add(c.age)
			bucket := &memBucket{objects: map[string][]byte{}, tagged: map[string]bool{}}
			r := &run{cfg: Config{Store: bucket, Bucket: "failures", Out: &out, Now: func() time.Time { return now }}}
			key := failures.NewKey(failures.LocalMappingID("m"), o.Batch.ShardID, now).String()
			got, err := r.finish(context.Background(), &loaded{key: key, m: mapping(c.fn), o: o}, driven{})
			if err != nil {
				t.Fatal(err)
			}
			if got.forgotten != c.reindex || strings.Contains(out.String(), "make reindex") != c.reindex {
				t.Errorf("asks for a reindex: %v, report %q; want %v", got.forgotten, out.String(), c.reindex)
			}
			if !bucket.tagged[key] || bucket.objects[failures.ReplayedPrefix+key] == nil {
				t.Errorf("object not marked replayed: %v", bucket.objects)
			}
		})
	}
}

// awsShaped is the failure object AWS writes, as recorded in
// shared/failures/testdata: its bytes and its parse.
func awsShaped(t *testing.T) ([]byte, failures.Object) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "failures", "testdata", "aws-shape.json"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := failures.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return body, o
}

// products is a products table holding the ids in it.
type products map[string]bool

func (p products) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]ddbtypes.AttributeValue{}}
	for table, ka := range in.RequestItems {
		if !aws.ToBool(ka.ConsistentRead) {
			return nil, errors.New("read eventually consistent: a product just deleted may still be found")
		}
		for _, k := range ka.Keys {
			id := k["productId"].(*ddbtypes.AttributeValueMemberS).Value
			if p[id] {
				out.Responses[table] = append(out.Responses[table], map[string]ddbtypes.AttributeValue{"productId": &ddbtypes.AttributeValueMemberS{Value: id}})
			}
		}
	}
	return out, nil
}

// TestIndexerReplayOfADeletedProductAsksForAReindex: a search domain keeps
// a delete's tombstone in memory only, so a restart or a moved shard forgets
// it well before gc_deletes. A replayed indexer batch that writes a product
// deleted since may make it a document again, whatever the batch's age: the
// replay reads the products it wrote and says "run make reindex" when one is
// gone. A batch whose products all exist, or that only deletes, does not.
func TestIndexerReplayOfADeletedProductAsksForAReindex(t *testing.T) {
	_, o := awsShaped(t)
	var m wiring.Mapping
	for _, w := range wiring.Mappings() {
		if w.Function == wiring.StreamIndexer {
			m = w
		}
	}
	written := o.Payload.Records[0]
	written.EventName = "MODIFY"
	written.Change.Keys = map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute("p-gone")}
	removed := written
	removed.EventName = "REMOVE"
	kept := written
	kept.Change.Keys = map[string]events.DynamoDBAttributeValue{"productId": events.NewStringAttribute("p-kept")}
	for _, c := range []struct {
		name    string
		records []events.DynamoDBEventRecord
		reindex bool
	}{
		{"writes a deleted product", []events.DynamoDBEventRecord{kept, written}, true},
		{"writes products that exist", []events.DynamoDBEventRecord{kept}, false},
		{"deletes only", []events.DynamoDBEventRecord{removed}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := o
			obj.Payload.Records = c.records
			var out strings.Builder
			bucket := &memBucket{objects: map[string][]byte{}, tagged: map[string]bool{}}
			now := obj.Oldest().Add(time.Minute) // young: well inside gc_deletes
			r := &run{cfg: Config{Store: bucket, Bucket: "failures", Out: &out, Now: func() time.Time { return now },
				Products: products{"p-kept": true}, ProductsTable: "products"}}
			key := failures.NewKey(failures.LocalMappingID(m.Name), obj.Batch.ShardID, now).String()
			got, err := r.finish(context.Background(), &loaded{key: key, m: m, o: obj}, driven{})
			if err != nil {
				t.Fatal(err)
			}
			if got.forgotten != c.reindex || strings.Contains(out.String(), "make reindex") != c.reindex {
				t.Errorf("asks for a reindex: %v, report %q; want %v", got.forgotten, out.String(), c.reindex)
			}
			// The marker keeps it, for a run that dies before its summary.
			if marked := strings.Contains(string(bucket.objects[failures.ReplayedPrefix+key]), `"reindex":true`); marked != c.reindex {
				t.Errorf("marker %s: reindex kept %v, want %v", bucket.objects[failures.ReplayedPrefix+key], marked, c.reindex)
			}
		})
	}
}

// unreadableProducts is a products table the operator may not read.
type unreadableProducts struct{}

func (unreadableProducts) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:BatchGetItem"}
}

// invocations counts the calls of the functions.
type invocations struct{ n int }

func (i *invocations) Invoke(context.Context, string, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	i.n++
	return events.DynamoDBEventResponse{}, nil
}

// TestNoIndexerReplayWithoutTheProductsCheck: an operator who may not read
// the products table is stopped before a search-indexer batch is replayed,
// which could bring back a deleted product with no "run make reindex".
func TestNoIndexerReplayWithoutTheProductsCheck(t *testing.T) {
	body, o := awsShaped(t)
	var m wiring.Mapping
	for _, w := range wiring.Mappings() {
		if w.Function == wiring.StreamIndexer {
			m = w
		}
	}
	// The recorded object, taken as the products indexer's.
	tg := &target.Target{
		MappingIDs: map[string]string{m.Name: failures.LocalMappingID(m.Name)},
		Functions:  map[string]string{wiring.StreamIndexer: o.Function()},
		Tables:     map[string]string{m.Table: o.Table()},
	}
	key := failures.NewKey(tg.MappingIDs[m.Name], o.Batch.ShardID, time.Now()).String()
	calls := &invocations{}
	r := &run{cfg: Config{Store: holding{body: body}, Bucket: "failures", Target: tg, Invoker: calls, Out: io.Discard,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Retries: 1, MaxPayload: 5 << 20, Now: time.Now,
		Products: unreadableProducts{}, ProductsTable: "products"}}
	_, err := r.unit(context.Background(), []string{key})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" {
		t.Fatalf("unit: %v; want the AccessDenied that stops the run", err)
	}
	if calls.n != 0 {
		t.Fatalf("the indexer was invoked %d times before the products table was found unreadable", calls.n)
	}
	if ok := (&run{cfg: Config{Products: products{}, ProductsTable: "products"}}).canReadProducts(context.Background()); ok != nil {
		t.Fatalf("probe of a readable table: %v", ok)
	}
}
