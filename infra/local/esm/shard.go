package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/shopstream/shopstream/infra/local/keyhash"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// runner runs one mapping: it lists the stream's shards every poll interval
// and gives each shard a goroutine of its own, so that one shard's errors or
// retries never hold up another's.
type runner struct {
	p       *Poller
	m       wiring.Mapping
	fn      Invoker
	filters []pattern
	log     *slog.Logger
	// partitionKey is the table's partition key attribute: a record's
	// partition, and so its shard among Config.Partitions, follows its value.
	partitionKey string

	// The stream being read and its shards' goroutines.
	arn       string
	streamCtx context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	// listed is true once the stream's shards were first listed: shards
	// that appear later are read from their start, whatever the mapping's
	// starting position, as Lambda reads child shards.
	listed bool

	mu       sync.Mutex // guards shards and listedAt, which Idle reads
	shards   map[string]*shard
	listedAt time.Time // when the last listing that succeeded began
	// relist asks for a listing before the next one is due: a shard was
	// read to its end (its children are to be found), or Idle waits for one.
	relist chan struct{}
	// completed counts the batches the function completed, for
	// Config.DuplicateEvery.
	completed atomic.Int64
	// duplicated counts the batches delivered a second time.
	duplicated atomic.Int64
}

// listEvery is how many poll intervals pass between two listings of a
// stream's shards when nothing asks for one sooner. Lambda reads each shard
// about four times a second but looks for new shards far less often; a
// listing is a DescribeTable and a DescribeStream, and DynamoDB Local's
// DescribeTable counts the table's items (4.5 ms empty, 11.7 ms at 40,000
// items), so listing on every poll spent its one thread on what AWS does not do.
const listEvery = 4

// shard is one shard of the stream and the state of its goroutine.
type shard struct {
	id       string
	arn      string
	parentID string
	parent   *shard // nil when the parent was never listed
	position streamtypes.ShardIteratorType
	done     chan struct{} // closed when the shard is read to its end and drained
	unlisted atomic.Bool   // DescribeStream no longer lists it

	// Owned by the shard's goroutine.
	iterator *string
	ended    bool // nothing more will be read: closed, or gone from the stream
	// lastRead is the sequence number of the last record read from the
	// stream, delivered or not: a new iterator starts after it, so records
	// already buffered are not read twice.
	lastRead string
	// trimmedAfter is a position the stream no longer held: the next record
	// read tells how many records were lost after it.
	trimmedAfter string
	lanes        []*lane
	order        []*entry // records read and not yet done, in stream order
	inflight     int
	results      chan result
	errors       int // consecutive read errors
	nextRead     time.Time

	// Guarded by runner.mu.
	started  bool
	finished bool
	quietAt  time.Time // when the last poll that found nothing to do began
}

// lane is one of a shard's concurrent batch processors: Config.Partitions
// shards of ParallelizationFactor lanes each. Every record of a
// partition-key value goes to the same partition's shard, and every record of
// an item (same keys) to the same lane in it, so an item's records are
// processed in stream order, as Lambda guarantees.
type lane struct {
	buf  []pending
	busy bool
}

// entry tracks a record from its read until it is done: delivered,
// discarded to the destination, or filtered out. The shard's checkpoint is
// the last record of the run of done entries at the head of the order.
type entry struct {
	seq  string
	done bool
}

type pending struct {
	rec    events.DynamoDBEventRecord
	seq    string
	size   int // bytes of the record in the invocation payload
	readAt time.Time
	e      *entry
}

type result struct {
	lane  int
	batch []pending
	ok    bool // false when the poller closed before the batch was done
}

// MaxPayload is Lambda's limit on a synchronous invocation's payload: a batch
// ends before it, whatever the batch size.
const MaxPayload = 6 << 20

// cut returns how many of the buffered records make the next batch: at most
// the batch size, and no more than fit in MaxPayload (at least one).
func (r *runner) cut(buf []pending) int {
	total := len(`{"Records":[]}`)
	n := 0
	for n < len(buf) && n < r.m.BatchSize {
		if total+buf[n].size+1 > MaxPayload && n > 0 {
			break
		}
		total += buf[n].size + 1
		n++
	}
	return n
}

func (r *runner) window() time.Duration {
	w := r.m.BatchingWindow
	if max := 4 * r.p.cfg.PollInterval; w > max {
		w = max
	}
	return w
}

func (r *runner) loop(ctx context.Context) {
	t := time.NewTicker(r.p.cfg.PollInterval)
	defer t.Stop()
	defer r.stopShards()
	ticks := 0
	for {
		if err := r.list(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("list stream shards", "err", err.Error())
		}
		for due := false; !due; {
			select {
			case <-ctx.Done():
				return
			case <-r.relist:
				due = true
			case <-t.C:
				ticks++
				due = ticks%listEvery == 0
			}
		}
	}
}

// listSoon asks for a listing before the next one is due.
func (r *runner) listSoon() {
	select {
	case r.relist <- struct{}{}:
	default:
	}
}

// stopShards stops the goroutines of the stream being read and waits for
// their batches in flight.
func (r *runner) stopShards() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
}

// list finds the stream's shards and starts a goroutine for each new one.
func (r *runner) list(ctx context.Context) error {
	began := time.Now()
	table := tables.Physical(r.p.cfg.TablePrefix, r.m.Table)
	desc, err := r.p.cfg.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe %s: %w", table, err)
	}
	arn := aws.ToString(desc.Table.LatestStreamArn)
	if arn == "" {
		return fmt.Errorf("table %s has no stream", table)
	}
	if arn != r.arn {
		// A new stream (the table was recreated): start over on it.
		r.stopShards()
		r.mu.Lock()
		r.arn, r.shards, r.listed = arn, map[string]*shard{}, false
		r.mu.Unlock()
		r.streamCtx, r.cancel = context.WithCancel(ctx)
	}
	var list []streamtypes.Shard
	var start *string
	for {
		out, err := r.p.cfg.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			return fmt.Errorf("describe stream %s: %w", arn, err)
		}
		list = append(list, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		start = out.StreamDescription.LastEvaluatedShardId
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	listed := map[string]bool{}
	var fresh []*shard
	for _, sh := range list {
		id := aws.ToString(sh.ShardId)
		listed[id] = true
		if r.shards[id] != nil {
			continue
		}
		s := &shard{id: id, arn: arn, position: streamtypes.ShardIteratorType(r.m.StartingPosition), done: make(chan struct{})}
		if r.listed {
			s.position = streamtypes.ShardIteratorTypeTrimHorizon
		}
		r.shards[id] = s
		fresh = append(fresh, s)
		// Resolved below, once every new shard exists.
		s.parentID = aws.ToString(sh.ParentShardId)
	}
	for id, s := range r.shards {
		if !listed[id] && !s.unlisted.Swap(true) {
			r.log.Info("shard no longer listed", "shardId", id)
		}
	}
	for _, s := range fresh {
		s.parent = r.shards[s.parentID]
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.runShard(r.streamCtx, s)
		}()
	}
	r.listed = true
	r.listedAt = began
	return nil
}

// idleSince reports whether a listing and a poll of every shard that began
// after since found nothing to do. When the last listing is older than since
// it asks for one at once, so that a caller waits a poll, not listEvery.
func (r *runner) idleSince(since time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.listedAt.After(since) {
		r.listSoon()
		return false
	}
	for _, s := range r.shards {
		switch {
		case s.finished:
		case !s.started && s.parent != nil && !s.parent.finished:
			// Waits for its parent, which answers for both.
		case !s.quietAt.After(since):
			return false
		}
	}
	return true
}

// runShard reads one shard, once its parent is done, until it is read to its
// end and every record read is done.
func (r *runner) runShard(ctx context.Context, s *shard) {
	if s.parent != nil {
		select {
		case <-s.parent.done:
		case <-ctx.Done():
			return
		}
	}
	n := r.partitions() * r.factor()
	s.lanes = make([]*lane, n)
	for i := range s.lanes {
		s.lanes[i] = &lane{}
	}
	s.results = make(chan result, n)
	r.mu.Lock()
	s.started = true
	r.mu.Unlock()
	log := r.log.With("shardId", s.id)
	t := time.NewTicker(r.p.cfg.PollInterval)
	defer t.Stop()
	for {
		began := time.Now()
		quiet := false
		if !s.ended && !began.Before(s.nextRead) {
			read, err := r.read(ctx, s, log)
			switch {
			case err != nil && ctx.Err() != nil:
			case errors.Is(err, errIteratorRefused):
				// Not quiet: the next poll reads again with a new iterator.
			case err != nil:
				s.errors++
				s.nextRead = time.Now().Add(min(r.p.cfg.PollInterval<<min(s.errors, 5), 5*time.Second))
				log.Warn("read shard", "err", err.Error(), "consecutiveErrors", s.errors)
				if s.unlisted.Load() {
					r.end(s, log, "shard left the stream before it was read to its end")
				}
			default:
				s.errors = 0
				quiet = read == 0
				if read == 0 && s.unlisted.Load() && !s.ended {
					r.end(s, log, "shard left the stream")
				}
			}
		} else if s.ended {
			quiet = true
		}
		r.dispatch(ctx, s)
		if s.ended && s.inflight == 0 && s.buffered() == 0 {
			r.finish(s)
			return
		}
		quiet = quiet && s.inflight == 0 && s.buffered() == 0
		if quiet {
			r.mu.Lock()
			s.quietAt = began
			r.mu.Unlock()
		}
		// Until the next poll, take back the batches that end.
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				for ; s.inflight > 0; s.inflight-- {
					<-s.results
				}
				return
			case res := <-s.results:
				if err := r.complete(s, res); err != nil {
					log.Error("save checkpoint", "err", err.Error())
				}
				r.dispatch(ctx, s)
				if s.ended && s.inflight == 0 && s.buffered() == 0 {
					r.finish(s)
					return
				}
			case <-t.C:
				waiting = false
			}
		}
	}
}

// end stops reading a shard; what was read is still delivered.
func (r *runner) end(s *shard, log *slog.Logger, why string) {
	s.ended = true
	if s.trimmedAfter != "" {
		log.Warn("records trimmed before they were read", "after", s.trimmedAfter, "records", "unknown")
		s.trimmedAfter = ""
	}
	log.Warn(why, "lastRead", s.lastRead)
}

func (r *runner) finish(s *shard) {
	r.mu.Lock()
	s.finished = true
	r.mu.Unlock()
	close(s.done)
	r.listSoon()
}

func (s *shard) buffered() int {
	n := 0
	for _, l := range s.lanes {
		n += len(l.buf)
	}
	return n
}

// dispatch starts, on each lane that is free, the batch that is due.
func (r *runner) dispatch(ctx context.Context, s *shard) {
	for i, l := range s.lanes {
		if l.busy || len(l.buf) == 0 {
			continue
		}
		n := r.cut(l.buf)
		full := n < len(l.buf) || n >= r.m.BatchSize
		if !full && time.Since(l.buf[0].readAt) < r.window() && !s.ended {
			continue
		}
		batch := l.buf[:n:n]
		l.buf = l.buf[n:]
		l.busy = true
		s.inflight++
		go func() {
			ok := r.deliver(ctx, s, batch)
			s.results <- result{lane: i, batch: batch, ok: ok}
		}()
	}
}

// complete takes a batch back from its lane and moves the checkpoint over
// the records now done.
func (r *runner) complete(s *shard, res result) error {
	r.p.invocations.Add(1)
	s.inflight--
	s.lanes[res.lane].busy = false
	if !res.ok {
		return nil
	}
	for _, p := range res.batch {
		p.e.done = true
	}
	return r.advance(s)
}

// advance saves, as the shard's checkpoint, the last of the records done at
// the head of the order.
func (r *runner) advance(s *shard) error {
	i := 0
	for i < len(s.order) && s.order[i].done {
		i++
	}
	if i == 0 {
		return nil
	}
	last := s.order[i-1].seq
	s.order = s.order[i:]
	return r.p.setCheckpoint(r.key(s), last)
}

func (r *runner) key(s *shard) string { return r.m.Name + "/" + s.id }

func (r *runner) partitions() int { return max(1, r.p.cfg.Partitions) }
func (r *runner) factor() int     { return max(1, r.m.ParallelizationFactor) }

// maxBufferedBatches bounds what a shard read from the stream buffers, in
// batches a lane: past it reading waits even for partitions that have
// room.
const maxBufferedBatches = 25

// wantsMore reports whether the shard reads on: while one of its
// partitions has less than a batch a lane buffered, so that a partition
// whose batches keep failing does not stop the others (on AWS each is a
// shard of its own), up to maxBufferedBatches a lane in all.
func (r *runner) wantsMore(s *shard) bool {
	if s.buffered() >= maxBufferedBatches*r.m.BatchSize*len(s.lanes) {
		return false
	}
	f := r.factor()
	for p := 0; p < len(s.lanes); p += f {
		n := 0
		for _, l := range s.lanes[p : p+f] {
			n += len(l.buf)
		}
		if n < r.m.BatchSize*f {
			return true
		}
	}
	return false
}

// laneOf picks the lane of a record: its partition's shard by the value of
// its partition key, then one of that shard's ParallelizationFactor lanes by
// its item's keys. The two come from separate, well-mixed hashes, so that
// every lane of every partition is used even where the keys are the
// partition key alone.
func (r *runner) laneOf(s *shard, ev events.DynamoDBEventRecord) int {
	if len(s.lanes) == 1 {
		return 0
	}
	part := 0
	if p := r.partitions(); p > 1 {
		if v, ok := ev.Change.Keys[r.partitionKey]; ok {
			raw, _ := json.Marshal(v)
			part = int(keyhash.Mix64("partition", raw) % uint64(p))
		}
	}
	lane := 0
	if f := r.factor(); f > 1 {
		raw, _ := json.Marshal(ev.Change.Keys) // map keys are sorted: stable
		lane = int(keyhash.Mix64("lane", raw) % uint64(f))
	}
	return part*r.factor() + lane
}

// iterator gets a shard iterator after the last record read (or the
// checkpoint, or at the mapping's starting position). A position the stream
// no longer holds falls back to the oldest record left.
func (r *runner) iterator(ctx context.Context, s *shard, log *slog.Logger) error {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.arn), ShardId: aws.String(s.id), ShardIteratorType: s.position}
	last := s.lastRead
	if last == "" {
		last = r.p.checkpoint(r.key(s))
	}
	if last != "" {
		in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(last)
	}
	out, err := r.p.cfg.Streams.GetShardIterator(ctx, in)
	var trimmed *streamtypes.TrimmedDataAccessException
	if errors.As(err, &trimmed) && last != "" {
		// The records after the position are gone (older than the
		// stream's 24 hours): resume at the oldest record left.
		log.Warn("position older than the stream's oldest record, resuming at the oldest", "after", last)
		s.trimmedAfter = last
		in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeTrimHorizon, nil
		out, err = r.p.cfg.Streams.GetShardIterator(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("shard iterator: %w", err)
	}
	s.iterator = out.ShardIterator
	return nil
}

// errIteratorRefused is a read whose fresh iterator was refused too.
var errIteratorRefused = errors.New("shard iterator refused twice")

// read fetches new records of one shard into its lanes, filtered; it returns
// how many records the stream gave.
func (r *runner) read(ctx context.Context, s *shard, log *slog.Logger) (int, error) {
	if s.iterator == nil {
		if err := r.iterator(ctx, s, log); err != nil {
			return 0, err
		}
	}
	total, refused := 0, 0
	for r.wantsMore(s) {
		out, err := r.p.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: s.iterator, Limit: aws.Int32(1000)})
		var expired *streamtypes.ExpiredIteratorException
		var trimmed *streamtypes.TrimmedDataAccessException
		if errors.As(err, &expired) || errors.As(err, &trimmed) {
			// A new iterator, after the last record read, and the read
			// again: a refusal is not an answer that there is nothing to
			// read. DynamoDB Local refuses this way, as trimmed, the
			// iterator it gave while the shard was empty once the shard's
			// first record is there.
			s.iterator = nil
			if refused++; refused > 1 {
				return total, errIteratorRefused
			}
			if err := r.iterator(ctx, s, log); err != nil {
				return total, err
			}
			continue
		}
		if err != nil {
			return total, fmt.Errorf("get records: %w", err)
		}
		total += len(out.Records)
		now := time.Now()
		for _, rec := range out.Records {
			ev := toEvent(rec, s.arn)
			seq := ev.Change.SequenceNumber
			if s.trimmedAfter != "" {
				log.Warn("records trimmed before they were read", "after", s.trimmedAfter, "before", seq, "records", gap(s.trimmedAfter, seq))
				s.trimmedAfter = ""
			}
			s.lastRead = seq
			e := &entry{seq: seq}
			s.order = append(s.order, e)
			raw, err := json.Marshal(ev)
			if err != nil {
				return total, fmt.Errorf("encode record %s: %w", ev.EventID, err)
			}
			if !r.passes(raw) {
				// Filtered out: never delivered, but the position moves past it.
				e.done = true
				continue
			}
			l := s.lanes[r.laneOf(s, ev)]
			l.buf = append(l.buf, pending{rec: ev, seq: seq, size: len(raw), readAt: now, e: e})
		}
		if err := r.advance(s); err != nil {
			return total, err
		}
		s.iterator = out.NextShardIterator
		if s.iterator == nil {
			s.ended = true // closed: a shard's last record was read
			break
		}
		if len(out.Records) == 0 {
			break
		}
	}
	return total, nil
}

// gap is how many sequence numbers lie strictly between two: the records
// lost between them where a shard numbers its records one by one (DynamoDB
// Local does), at most that many on AWS.
func gap(after, before string) string {
	a, ok1 := new(big.Int).SetString(after, 10)
	b, ok2 := new(big.Int).SetString(before, 10)
	if !ok1 || !ok2 || b.Cmp(a) <= 0 {
		return "unknown"
	}
	d := new(big.Int).Sub(b, a)
	return d.Sub(d, big.NewInt(1)).String()
}

// passes applies the filters to a record as Lambda does, to its JSON.
func (r *runner) passes(raw []byte) bool {
	if len(r.filters) == 0 {
		return true
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return false
	}
	for _, f := range r.filters {
		if f.match(doc) {
			return true
		}
	}
	return false
}
