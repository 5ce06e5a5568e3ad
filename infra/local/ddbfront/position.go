package ddbfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// positions follows each table's stream. A pass reads every shard of a
// stream from where the previous pass stopped to its end; passes serve two
// needs. The sweeper learns, before it deletes, the highest sequence number
// already written: the REMOVE records its deletions cause come after it, a
// user's earlier delete of the same key before it. And every write the front
// passes on starts a pass of its table's stream, in the background, so that
// each record gets the second the pass that first found it started in
// (stamp.go).
type positions struct {
	streams recordReader
	tables  tableDescriber
	log     *slog.Logger
	stamps  *stampLog
	// life ends when the front closes; passes then stop.
	life context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	byArn    map[string]*streamPos
	arnOf    map[string]string // table → its stream's ARN, "" when it has none
	tableGen int               // bumped by forget, so a lookup in flight does not cache a stale answer
	closed   bool
	running  sync.WaitGroup
}

type recordReader interface {
	DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(context.Context, *dynamodbstreams.GetRecordsInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

type tableDescriber interface {
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// streamPos is the follower's state of one stream.
type streamPos struct {
	arn string
	// passes runs one pass at a time; a request made during a pass gets the
	// next one, which serves every request made meanwhile.
	passes *barrier

	// mu guards the fields below and each shard's last, closed and stamps,
	// which lookups read while a pass runs. A shard's iterator and afterTrim
	// are the passes' own.
	mu     sync.Mutex
	shards map[string]*shardPos
	// ready is set by the first pass that read every shard to its end: a
	// record a later pass finds is new, and gets the pass's start.
	ready bool
	// wantedAt is when the first write not yet served by a pass was
	// answered by DynamoDB Local: the start of the next pass.
	wantedAt time.Time
	// relist asks the next pass to list the shards: one closed, or a reader
	// read one the follower does not know.
	relist   bool
	listedAt time.Time
}

type shardPos struct {
	id       string
	iterator *string
	last     string // highest sequence number seen
	closed   bool
	stamps   []boundary
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

func newPositions(streams recordReader, tables tableDescriber, log *slog.Logger, stamps *stampLog, loaded map[string]map[string]*shardPos) *positions {
	p := &positions{streams: streams, tables: tables, log: log, stamps: stamps,
		byArn: map[string]*streamPos{}, arnOf: map[string]string{}}
	p.life, p.stop = context.WithCancel(context.Background())
	for arn, shards := range loaded {
		p.streamLocked(arn).shards = shards
	}
	return p
}

// stream returns the state of a stream, made on first use.
func (p *positions) stream(arn string) *streamPos {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streamLocked(arn)
}

func (p *positions) streamLocked(arn string) *streamPos {
	s := p.byArn[arn]
	if s == nil {
		s = &streamPos{arn: arn, shards: map[string]*shardPos{}, relist: true}
		s.passes = &barrier{run: func(ctx context.Context) error { return p.pass(ctx, s) }, timeout: passTimeout}
		p.byArn[arn] = s
	}
	return s
}

// streamOf returns the ARN of a table's stream, "" when it has none or the
// table does not exist.
func (p *positions) streamOf(ctx context.Context, table string) (string, error) {
	p.mu.Lock()
	arn, ok := p.arnOf[table]
	gen := p.tableGen
	p.mu.Unlock()
	if ok {
		return arn, nil
	}
	out, err := p.tables.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find stream of %s: %w", table, err)
	}
	if s := out.Table.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		arn = aws.ToString(out.Table.LatestStreamArn)
	}
	p.mu.Lock()
	if p.tableGen == gen {
		p.arnOf[table] = arn
	}
	p.mu.Unlock()
	return arn, nil
}

// forget drops what the follower knows of a table's stream: the table was
// created, changed or deleted.
func (p *positions) forget(table string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.arnOf, table)
	p.tableGen++
}

// reading notes that a reader reads a shard of stream arn ahead of the
// follower. If the stream is newer than the one the follower knows for its
// table (the table was recreated past the front), the follower looks the
// table up again; if the shard is new to it, the next pass lists the shards.
func (p *positions) reading(arn, shard string) {
	table := tableFromStreamARN(arn)
	p.mu.Lock()
	if known, ok := p.arnOf[table]; ok && known != arn && streamLabel(known) < streamLabel(arn) {
		delete(p.arnOf, table)
		p.tableGen++
	}
	s := p.streamLocked(arn)
	p.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shards[shard] == nil {
		s.relist = true
	}
}

// streamLabel is the creation time at the end of a stream ARN, which orders
// a table's streams.
func streamLabel(arn string) string {
	if i := strings.LastIndex(arn, "/stream/"); i >= 0 {
		return arn[i+len("/stream/"):]
	}
	return ""
}

// before readies the streams of the tables a write is about to change and
// returns their ARNs. A stream the follower has not read yet is read to its
// end first: the records already there are unknown, the write's are new.
func (p *positions) before(ctx context.Context, tables []string) []string {
	var arns []string
	for _, table := range tables {
		arn, err := p.streamOf(ctx, table)
		if err != nil {
			p.log.WarnContext(ctx, "follow stream", "table", table, "err", err.Error())
			continue
		}
		if arn == "" {
			continue
		}
		arns = append(arns, arn)
		s := p.stream(arn)
		s.mu.Lock()
		ready := s.ready
		s.mu.Unlock()
		if !ready {
			if err := s.passes.wait(ctx); err != nil {
				p.log.WarnContext(ctx, "follow stream", "table", table, "err", err.Error())
			}
		}
	}
	return arns
}

// wrote starts a pass of each stream a write has changed, without waiting
// for it. Called once DynamoDB Local has answered the write and before the
// client has the answer, it fixes the pass's start then: the write's records
// were written before it, and its answer comes after it.
func (p *positions) wrote(arns ...string) {
	now := time.Now()
	for _, arn := range arns {
		s := p.stream(arn)
		s.mu.Lock()
		if s.wantedAt.IsZero() {
			s.wantedAt = now
		}
		s.mu.Unlock()
		s.passes.kick()
	}
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

// stampOf returns the second of record seq of a shard (unknown if it was
// there before the follower), and whether the follower has read that far.
func (p *positions) stampOf(arn, shard, seq string) (sec int64, covered bool) {
	p.mu.Lock()
	s := p.byArn[arn]
	p.mu.Unlock()
	if s == nil {
		return unknown, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shards[shard]
	if sh == nil {
		return unknown, false
	}
	return sh.stampOf(seq)
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
	start := s.wantedAt
	s.wantedAt = time.Time{}
	relist := s.relist || time.Since(s.listedAt) > relistEvery
	s.mu.Unlock()
	if start.IsZero() {
		start = time.Now()
	}
	if relist {
		if err := p.list(ctx, s); err != nil {
			return err
		}
	}
	if err := p.readShards(ctx, s, start.Unix()); err != nil {
		return err
	}
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	return p.stamps.flush()
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

// readShards reads every open shard to its end. The records not seen before
// get second sec, once the stream is ready.
func (p *positions) readShards(ctx context.Context, s *streamPos, sec int64) error {
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
		if err := p.read(ctx, s, sh, sec); err != nil {
			return err
		}
	}
	return nil
}

func (p *positions) read(ctx context.Context, s *streamPos, sh *shardPos, sec int64) error {
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
		now := time.Now().Unix()
		var made []boundary
		s.mu.Lock()
		for _, r := range out.Records {
			seq := aws.ToString(r.Dynamodb.SequenceNumber)
			if !seqLess(sh.last, seq) {
				continue
			}
			stamp := int64(unknown)
			if s.ready {
				stamp = sec
			}
			if b, ok := sh.note(seq, stamp, now); ok {
				made = append(made, b)
			}
			sh.afterTrim = false
		}
		sh.iterator = out.NextShardIterator
		if sh.iterator == nil {
			sh.closed = true
			s.relist = true
		}
		s.mu.Unlock()
		p.stamps.add(s.arn, sh.id, made)
		if sh.closed || len(out.Records) < pageLimit {
			return nil
		}
	}
}

// close stops the passes and writes how far each shard was read.
func (p *positions) close() error {
	p.mu.Lock()
	p.closed = true
	streams := make([]*streamPos, 0, len(p.byArn))
	for _, s := range p.byArn {
		streams = append(streams, s)
	}
	p.mu.Unlock()
	p.stop()
	p.running.Wait()
	var through []stampLine
	for _, s := range streams {
		s.mu.Lock()
		for _, sh := range s.shards {
			if sh.last != "" {
				through = append(through, stampLine{Stream: s.arn, Shard: sh.id, Through: sh.last})
			}
		}
		s.mu.Unlock()
	}
	return p.stamps.close(through)
}

// seqLess compares decimal sequence numbers of any length; "" is the least.
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
