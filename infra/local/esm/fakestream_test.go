package esm

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// fakeStream is a DynamoDB stream in memory, with the answers a real one
// gives in situations DynamoDB Local cannot be brought into: expired
// iterators, trimmed records, shards that leave the listing.
type fakeStream struct {
	mu     sync.Mutex
	arn    string
	shards []*fakeShard
	iters  map[string]fakeIter
	nextID int
	seq    int
	// getRecordsErr, when set, may fail a GetRecords call on a shard at a
	// position before the stream answers it.
	getRecordsErr func(shard string, pos int) error
	// iteratorErr, when set, may fail a GetShardIterator call on a shard.
	iteratorErr func(shard string) error
	// describes and reads count DescribeStream and GetRecords calls.
	describes, reads int
}

type fakeShard struct {
	id, parent string
	recs       []streamtypes.Record
	trimmed    int  // records before this index are gone
	closed     bool // no record comes after the last one
	unlisted   bool // DescribeStream no longer lists it
	deleted    bool // reading it answers ResourceNotFoundException
}

type fakeIter struct {
	shard *fakeShard
	pos   int
}

func newFakeStream() *fakeStream {
	return &fakeStream{arn: "arn:aws:dynamodb:us-east-1:000000000000:table/fake/stream/2026-11-23T00:00:00.000", iters: map[string]fakeIter{}}
}

// shard adds a shard (its parent may be "").
func (f *fakeStream) shard(id, parent string) *fakeShard {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &fakeShard{id: id, parent: parent}
	f.shards = append(f.shards, s)
	return s
}

// put appends INSERT records keyed userId=<key> (and productId "p1") to a
// shard; sequence numbers grow by one across the stream, as DynamoDB Local
// numbers them.
func (f *fakeStream) put(s *fakeShard, keys ...string) {
	f.putOf(s, "p1", keys...)
}

// putOf appends a record of each user's review of one product (the
// reviews table's partition key).
func (f *fakeStream) putOf(s *fakeShard, product string, keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.seq++
		seq := fmt.Sprintf("%021d", f.seq)
		keys := map[string]streamtypes.AttributeValue{
			"productId": &streamtypes.AttributeValueMemberS{Value: product},
			"userId":    &streamtypes.AttributeValueMemberS{Value: k},
		}
		now := time.Now()
		s.recs = append(s.recs, streamtypes.Record{EventID: aws.String("ev-" + seq), EventName: streamtypes.OperationTypeInsert,
			EventVersion: aws.String("1.1"), EventSource: aws.String("aws:dynamodb"), AwsRegion: aws.String("us-east-1"),
			Dynamodb: &streamtypes.StreamRecord{Keys: keys, NewImage: keys, SequenceNumber: aws.String(seq), SizeBytes: aws.Int64(40),
				StreamViewType: streamtypes.StreamViewTypeNewAndOldImages, ApproximateCreationDateTime: &now}})
	}
}

func (f *fakeStream) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakeStream) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: &ddbtypes.TableDescription{TableName: in.TableName, LatestStreamArn: aws.String(f.arn)}}, nil
}

func (f *fakeStream) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	var list []streamtypes.Shard
	for _, s := range f.shards {
		if s.unlisted {
			continue
		}
		sh := streamtypes.Shard{ShardId: aws.String(s.id)}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		list = append(list, sh)
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: &streamtypes.StreamDescription{StreamArn: in.StreamArn, Shards: list}}, nil
}

func (f *fakeStream) find(id string) *fakeShard {
	for _, s := range f.shards {
		if s.id == id {
			return s
		}
	}
	return nil
}

func seqOf(r streamtypes.Record) int {
	n, _ := strconv.Atoi(aws.ToString(r.Dynamodb.SequenceNumber))
	return n
}

func (f *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(aws.ToString(in.ShardId))
	if s == nil || s.deleted {
		return nil, &streamtypes.ResourceNotFoundException{Message: aws.String("Requested resource not found: Shard does not exist")}
	}
	if f.iteratorErr != nil {
		if err := f.iteratorErr(s.id); err != nil {
			return nil, err
		}
	}
	pos := 0
	switch in.ShardIteratorType {
	case streamtypes.ShardIteratorTypeTrimHorizon:
		pos = s.trimmed
	case streamtypes.ShardIteratorTypeLatest:
		pos = len(s.recs)
	case streamtypes.ShardIteratorTypeAfterSequenceNumber, streamtypes.ShardIteratorTypeAtSequenceNumber:
		want, err := strconv.Atoi(aws.ToString(in.SequenceNumber))
		if err != nil {
			return nil, &streamtypes.ResourceNotFoundException{Message: aws.String("bad sequence number")}
		}
		// Records after the requested one that were trimmed are lost to
		// the reader: the stream refuses the position.
		if s.trimmed > 0 {
			last := seqOf(s.recs[s.trimmed-1])
			if last > want || (last == want && in.ShardIteratorType == streamtypes.ShardIteratorTypeAtSequenceNumber) {
				return nil, &streamtypes.TrimmedDataAccessException{Message: aws.String("The data you are trying to access has been trimmed.")}
			}
		}
		pos = len(s.recs)
		for i, r := range s.recs {
			if seqOf(r) > want || (seqOf(r) == want && in.ShardIteratorType == streamtypes.ShardIteratorTypeAtSequenceNumber) {
				pos = i
				break
			}
		}
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(f.iterator(s, pos))}, nil
}

func (f *fakeStream) iterator(s *fakeShard, pos int) string {
	f.nextID++
	id := "it-" + strconv.Itoa(f.nextID)
	f.iters[id] = fakeIter{shard: s, pos: pos}
	return id
}

func (f *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	it, ok := f.iters[aws.ToString(in.ShardIterator)]
	if !ok {
		return nil, &streamtypes.ExpiredIteratorException{Message: aws.String("Iterator expired")}
	}
	s := it.shard
	if s.deleted {
		return nil, &streamtypes.ResourceNotFoundException{Message: aws.String("Requested resource not found: Shard does not exist")}
	}
	if f.getRecordsErr != nil {
		if err := f.getRecordsErr(s.id, it.pos); err != nil {
			return nil, err
		}
	}
	if it.pos < s.trimmed {
		return nil, &streamtypes.TrimmedDataAccessException{Message: aws.String("The data you are trying to access has been trimmed.")}
	}
	end := min(len(s.recs), it.pos+int(aws.ToInt32(in.Limit)))
	out := &dynamodbstreams.GetRecordsOutput{Records: append([]streamtypes.Record(nil), s.recs[it.pos:end]...)}
	if !s.closed || end < len(s.recs) {
		out.NextShardIterator = aws.String(f.iterator(s, end))
	}
	return out, nil
}

// startFake runs a poller of one mapping on the fake stream.
func startFake(t *testing.T, f *fakeStream, m wiring.Mapping, fn Invoker, cfg Config) *Poller {
	t.Helper()
	cfg.DynamoDB, cfg.Streams = f, f
	cfg.Mappings = []wiring.Mapping{m}
	cfg.Functions = map[string]Invoker{m.Function: fn}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// fakeMapping is a mapping of the reviews table, which the fake stands for.
func fakeMapping(name string) wiring.Mapping {
	m := mapping(name)
	m.Table = tables.Reviews
	return m
}

// waitFor polls cond until it holds or ten seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
