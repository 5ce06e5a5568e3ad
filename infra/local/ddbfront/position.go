package ddbfront

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// positions follows each table's stream for the sweeper: before it deletes,
// it learns the highest sequence number already written. The REMOVE records
// its deletions cause come after it, a user's earlier delete of the same key
// before it. A pass reads every shard of a stream from where the previous
// pass stopped to its end.
type positions struct {
	streams recordReader
	// life ends when the front closes; passes then stop.
	life context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	byArn   map[string]*streamPos
	closed  bool
	running sync.WaitGroup
}

type recordReader interface {
	DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(context.Context, *dynamodbstreams.GetRecordsInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// streamPos is the follower's state of one stream.
type streamPos struct {
	arn string
	// passes runs one pass at a time; a request made during a pass gets the
	// next one, which serves every request made meanwhile.
	passes *barrier

	// mu guards the fields below and each shard's last and closed, which
	// end reads while a pass runs. A shard's iterator and afterTrim are the
	// passes' own.
	mu     sync.Mutex
	shards map[string]*shardPos
	// relist asks the next pass to list the shards: one closed.
	relist   bool
	listedAt time.Time
}

type shardPos struct {
	id       string
	iterator *string
	last     string // highest sequence number seen
	closed   bool
	// afterTrim: the position after last was trimmed; read again from the
	// trim horizon, skipping what was seen.
	afterTrim bool
}

// pageLimit is the Limit of the follower's GetRecords. DynamoDB Local
// returns every record up to it, however large, so a shorter page is the
// shard's end.
const pageLimit = 1000

// passTimeout bounds one pass; a first pass may read a day of records.
const passTimeout = 2 * time.Minute

// relistEvery is how often a pass lists a stream's shards even when nothing
// suggests a new one.
const relistEvery = time.Minute

func newPositions(streams recordReader) *positions {
	p := &positions{streams: streams, byArn: map[string]*streamPos{}}
	p.life, p.stop = context.WithCancel(context.Background())
	return p
}

// stream returns the state of a stream, made on first use.
func (p *positions) stream(arn string) *streamPos {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byArn[arn]
	if s == nil {
		s = &streamPos{arn: arn, shards: map[string]*shardPos{}, relist: true}
		s.passes = &barrier{run: func(ctx context.Context) error { return p.pass(ctx, s) }, timeout: passTimeout}
		p.byArn[arn] = s
	}
	return s
}

// follow returns once a pass of the stream that started after the call has ended.
func (p *positions) follow(ctx context.Context, arn string) error {
	if err := p.stream(arn).passes.wait(ctx); err != nil {
		return fmt.Errorf("follow stream %s: %w", arn, err)
	}
	return nil
}

// end reads the stream up to its current end and returns the highest sequence
// number seen ("" for an empty stream).
func (p *positions) end(ctx context.Context, arn string) (string, error) {
	if err := p.follow(ctx, arn); err != nil {
		return "", err
	}
	s := p.stream(arn)
	s.mu.Lock()
	defer s.mu.Unlock()
	max := ""
	for _, sh := range s.shards {
		if seqLess(max, sh.last) {
			max = sh.last
		}
	}
	return max, nil
}

// pass reads every shard of the stream to its end.
func (p *positions) pass(ctx context.Context, s *streamPos) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.running.Add(1)
	p.mu.Unlock()
	defer p.running.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.life, cancel)()

	s.mu.Lock()
	relist := s.relist || time.Since(s.listedAt) > relistEvery
	s.mu.Unlock()
	if relist {
		if err := p.list(ctx, s); err != nil {
			return err
		}
	}
	return p.readShards(ctx, s)
}

// list adds the stream's new shards; shards it no longer lists are closed.
func (p *positions) list(ctx context.Context, s *streamPos) error {
	var shards []streamtypes.Shard
	var start *string
	for {
		out, err := p.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.arn), ExclusiveStartShardId: start})
		var notFound *streamtypes.ResourceNotFoundException
		if errors.As(err, &notFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("describe stream %s: %w", s.arn, err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		start = out.StreamDescription.LastEvaluatedShardId
	}
	listed := map[string]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		listed[id] = true
		if s.shards[id] == nil {
			s.shards[id] = &shardPos{id: id}
		}
	}
	for id, sh := range s.shards {
		if !listed[id] {
			sh.closed = true
		}
	}
	s.listedAt, s.relist = time.Now(), false
	return nil
}

// readShards reads every open shard to its end.
func (p *positions) readShards(ctx context.Context, s *streamPos) error {
	s.mu.Lock()
	var open []*shardPos
	for _, sh := range s.shards {
		if !sh.closed {
			open = append(open, sh)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(open, func(a, b *shardPos) int { return strings.Compare(a.id, b.id) })
	for _, sh := range open {
		if err := p.read(ctx, s, sh); err != nil {
			return err
		}
	}
	return nil
}

func (p *positions) read(ctx context.Context, s *streamPos, sh *shardPos) error {
	for {
		if sh.iterator == nil {
			in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.arn), ShardId: aws.String(sh.id), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon}
			if sh.last != "" && !sh.afterTrim {
				in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(sh.last)
			}
			out, err := p.streams.GetShardIterator(ctx, in)
			var notFound *streamtypes.ResourceNotFoundException
			if errors.As(err, &notFound) {
				s.mu.Lock()
				sh.closed = true
				s.mu.Unlock()
				return nil
			}
			if err != nil {
				return fmt.Errorf("shard iterator %s: %w", sh.id, err)
			}
			sh.iterator = out.ShardIterator
		}
		out, err := p.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: sh.iterator, Limit: aws.Int32(pageLimit)})
		var expired *streamtypes.ExpiredIteratorException
		var trimmed *streamtypes.TrimmedDataAccessException
		if errors.As(err, &expired) || errors.As(err, &trimmed) {
			sh.iterator = nil
			if errors.As(err, &trimmed) {
				sh.afterTrim = true
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read stream %s: %w", s.arn, err)
		}
		s.mu.Lock()
		for _, r := range out.Records {
			if seq := aws.ToString(r.Dynamodb.SequenceNumber); seqLess(sh.last, seq) {
				sh.last = seq
				sh.afterTrim = false
			}
		}
		sh.iterator = out.NextShardIterator
		if sh.iterator == nil {
			sh.closed = true
			s.relist = true
		}
		s.mu.Unlock()
		if sh.closed || len(out.Records) < pageLimit {
			return nil
		}
	}
}

// close stops the passes.
func (p *positions) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.stop()
	p.running.Wait()
}

// seqLess compares decimal sequence numbers of any length; "" is the least.
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
