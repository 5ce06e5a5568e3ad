// Package replay re-drives the stream batches the event-source mappings gave
// up on, from the failure bucket through their functions, with the mapping's
// own failure semantics (partial batch responses, bisection, retries). A
// replayed object is tagged as replayed (the bucket's lifecycle expires only
// such objects) and marked (replayed/<key>) so that a second run does
// nothing; the records that still fail go to a new failure object for the
// next run. docs/operations.md is the runbook.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/ddbcall"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Invoker runs a stream function on an event: the in-process handler locally,
// lambda:Invoke of the deployed function on AWS.
type Invoker interface {
	Invoke(ctx context.Context, function string, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

// ErrCall marks an Invoker's error that is not the function's: the call
// could not be made (the Lambda API refused it, the function or its alias
// is missing, its throttling outlasted the SDK's retries). The function
// never saw the records, so they are not failing records: the replay stops
// (exit 2) and marks nothing more, and a later run replays the objects
// left, which the functions apply once however often they see a record.
var ErrCall = errors.New("the function could not be called")

// Store is the failure bucket (*s3.Client is one).
type Store interface {
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	PutObjectTagging(context.Context, *s3.PutObjectTaggingInput, ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error)
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
}

// Config configures a replay.
type Config struct {
	Store  Store
	Bucket string
	// Invoker runs the functions, named by shared/wiring's function names.
	Invoker Invoker
	// Target names the mappings' UUIDs, functions and tables, so an object
	// is matched to its mapping and checked against it.
	Target *target.Target
	// Mapping limits the replay to one mapping (MAPPING=m); "" replays all.
	Mapping string
	// Retries is how often a failing part of a batch is retried (default 2:
	// the mapping has already retried it).
	Retries int
	// Concurrency is how many units of work (an object, or a run of
	// objects coalesced) are replayed at once (default 4).
	Concurrency int
	// Coalesce is how many objects of a mapping whose function takes its
	// records in any grouping (coalesces) are handed to it together
	// (default 20; 1 turns it off), within MaxPayload.
	Coalesce int
	// MaxPayload bounds the records of one invocation, in bytes of their
	// JSON (default 5 MB: Lambda's synchronous payload is 6 MB).
	MaxPayload int
	// Products reads ProductsTable, to find the products a replayed search
	// indexer batch wrote that are deleted since (nil: not checked).
	Products      ddbcall.BatchGetter
	ProductsTable string
	// Out receives the report, one line per object and a summary.
	Out    io.Writer
	Logger *slog.Logger
	Now    func() time.Time
}

// Result counts what a replay did.
type Result struct {
	// Objects is how many failure objects were considered (of the mapping).
	Objects int
	// Done is how many had been replayed before and were left alone.
	Done int
	// Replayed is how many were replayed, whatever the outcome.
	Replayed int
	// Skipped is how many could not be replayed: malformed, or of an
	// unknown mapping.
	Skipped int
	// Foreign is how many objects of the bucket are no failure objects.
	Foreign int
	// Records, Succeeded and Failed count the replayed records.
	Records, Succeeded, Failed int
	// Reindex counts the indexer's objects replayed that wrote products
	// deleted since (or, with no products table to check, held records
	// older than the index remembers deletes): they may have brought back
	// documents of deleted products, which `make reindex` removes.
	Reindex int
	// ReindexOutstanding counts the indexer's objects replayed, by this run
	// or an earlier one, that asked for `make reindex` and that no reindex
	// finished since answers (failures.OutstandingReindex).
	ReindexOutstanding int
}

// Run replays every failure object of the bucket not replayed yet. It
// returns an error wrapping target.ErrIncomplete when a record still fails
// or an object could not be replayed; the report says which.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Retries == 0 {
		cfg.Retries = 2
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = 20
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 5 << 20
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &run{cfg: cfg}
	var res Result
	if cfg.Mapping != "" {
		if _, ok := cfg.Target.MappingIDs[cfg.Mapping]; !ok {
			return res, fmt.Errorf("mapping %q: none such (%s)", cfg.Mapping, strings.Join(mappingNames(), ", "))
		}
	}
	all, err := r.list(ctx, failures.Prefix)
	if err != nil {
		return res, err
	}
	// A named mapping's objects, and those of UUIDs the stage no longer
	// has (a mapping a deploy replaced), which may be its: each of those is
	// read to tell (load), and left alone when it is another mapping's.
	var keys []string
	for _, k := range all {
		if r.named(k) {
			keys = append(keys, k)
		}
	}
	done, err := r.list(ctx, failures.ReplayedPrefix)
	if err != nil {
		return res, err
	}
	replayed := map[string]bool{}
	for _, k := range done {
		replayed[strings.TrimPrefix(k, failures.ReplayedPrefix)] = true
	}
	if cfg.Mapping == "" {
		// Whatever else is in the bucket is reported, never touched.
		all, err := r.list(ctx, "")
		if err != nil {
			return res, err
		}
		for _, k := range all {
			if !strings.HasPrefix(k, failures.Prefix) && !strings.HasPrefix(k, failures.ReplayedPrefix) && !strings.HasPrefix(k, failures.ReindexPrefix) {
				res.Foreign++
				r.line("foreign", "-", k, "not a failure object: left alone")
			}
		}
	}
	var todo []string
	for _, k := range keys {
		res.Objects++
		if replayed[k] {
			res.Done++
			continue
		}
		todo = append(todo, k)
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	var aborted error
	next := make(chan []string)
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for keys := range next {
				outs, err := r.unit(ctx, keys)
				mu.Lock()
				if err != nil && aborted == nil {
					aborted = err
				}
				for _, o := range outs {
					switch {
					case o.other:
						res.Objects--
					case o.skipped:
						res.Skipped++
					default:
						res.Replayed++
						res.Records += o.records
						res.Succeeded += o.records - o.failed
						res.Failed += o.failed
						if o.forgotten {
							res.Reindex++
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, u := range r.units(todo) {
		mu.Lock()
		stop := aborted != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		next <- u
	}
	close(next)
	wg.Wait()
	if aborted == nil && ctx.Err() != nil {
		aborted = ctx.Err()
	}
	fmt.Fprintf(cfg.Out, "replay: %d failure objects (%d replayed before); %d replayed: %d records, %d succeeded, %d still failing; %d skipped; %d foreign objects\n",
		res.Objects, res.Done, res.Replayed, res.Records, res.Succeeded, res.Failed, res.Skipped, res.Foreign)
	if res.Reindex > 0 {
		fmt.Fprintf(cfg.Out, "replay: %d search indexer objects wrote products deleted since (or, unchecked, held records older than the index remembers deletes, %s): run make reindex, which removes the documents of products deleted since\n", res.Reindex, productsearch.DeleteMemory)
	}
	// What earlier runs asked for and no reindex has answered since: a
	// run that finds the objects already replayed must not forget it.
	if r.indexerInScope() {
		needs, err := r.outstandingReindex(ctx)
		if err != nil && aborted == nil {
			aborted = err
		}
		res.ReindexOutstanding = len(needs)
		if earlier := len(needs) - res.Reindex; earlier > 0 {
			more := ""
			if res.Reindex > 0 {
				more = "more "
			}
			fmt.Fprintf(cfg.Out, "replay: %d %ssearch indexer objects, replayed before this run or beside it (the first at %s), asked for make reindex, and none has finished since: run make reindex\n",
				earlier, more, needs[0].At.UTC().Format(time.RFC3339))
		}
	}
	if aborted != nil {
		return res, fmt.Errorf("replay stopped: %w", aborted)
	}
	if res.Failed > 0 || res.Skipped > 0 {
		return res, fmt.Errorf("%d records still fail, %d objects skipped: %w", res.Failed, res.Skipped, target.ErrIncomplete)
	}
	// A request for a reindex is said, and kept until a reindex answers it,
	// but it fails no record: the contract's exit 0 "when every record
	// succeeded" holds, so a script's `make replay && …` goes on.
	return res, nil
}

// indexerInScope says whether the run is for the search indexer's mapping
// too (no mapping named, or that one).
func (r *run) indexerInScope() bool {
	if r.cfg.Mapping == "" {
		return true
	}
	for _, m := range wiring.Mappings() {
		if m.Name == r.cfg.Mapping {
			return m.Function == wiring.StreamIndexer
		}
	}
	return false
}

// outstandingReindex lists the reindex needs that no finished `make
// reindex` answers (failures.OutstandingReindex), this run's included.
func (r *run) outstandingReindex(ctx context.Context) ([]failures.ReindexNeed, error) {
	objects := map[string]time.Time{}
	p := s3.NewListObjectsV2Paginator(r.cfg.Store, &s3.ListObjectsV2Input{Bucket: aws.String(r.cfg.Bucket), Prefix: aws.String(failures.ReindexPrefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", r.cfg.Bucket, failures.ReindexPrefix, err)
		}
		for _, o := range page.Contents {
			objects[aws.ToString(o.Key)] = aws.ToTime(o.LastModified)
		}
	}
	return failures.OutstandingReindex(objects), nil
}

func mappingNames() []string {
	var names []string
	for _, m := range wiring.Mappings() {
		names = append(names, m.Name)
	}
	return names
}

type run struct {
	cfg Config
	mu  sync.Mutex // serializes report lines
	// counters serializes the counters' units: at once, their transactions
	// on shared counter items cancel each other (TransactionConflict).
	counters sync.Mutex
	// probed is the outcome of reading the products table once, before the
	// first search-indexer batch is replayed.
	probe   sync.Once
	probeOK error
}

// canReadProducts reads the products table once (a key no product has),
// so that a run without the permission stops before it replays an indexer
// batch it could not then check (a product deleted since brought back,
// and no "run make reindex" said).
func (r *run) canReadProducts(ctx context.Context) error {
	if r.cfg.Products == nil {
		return nil
	}
	r.probe.Do(func() {
		req := map[string]ddbtypes.KeysAndAttributes{r.cfg.ProductsTable: {
			Keys: []map[string]ddbtypes.AttributeValue{{"productId": &ddbtypes.AttributeValueMemberS{Value: "replay-probe"}}}, ConsistentRead: aws.Bool(true)}}
		err := ddbcall.BatchGet(ctx, r.cfg.Products, req, ddbcall.Backoff{Base: 10 * time.Millisecond, Cap: time.Second}, func(string, map[string]ddbtypes.AttributeValue) error { return nil })
		if err != nil {
			r.probeOK = fmt.Errorf("read the products table %s, which a search-indexer batch's replay checks: %w", r.cfg.ProductsTable, err)
		}
	})
	return r.probeOK
}

// coalesces reports whether fn takes its records in any grouping, so that
// records of several failure objects may be handed to it together: the
// counters apply each business fact once, keyed by the fact
// (docs/counters.md), and the indexer writes each product at its version.
// The archiver names an object after the first record of a run of its
// batch: its batches stay as Lambda made them.
func coalesces(fn string) bool { return fn == wiring.Counters || fn == wiring.StreamIndexer }

// units cuts the keys (in key order) into units of work: runs of up to
// Coalesce objects of one mapping whose function coalesces, one object
// otherwise.
func (r *run) units(keys []string) [][]string {
	var out [][]string
	var cur []string
	curMapping := ""
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur, curMapping = nil, ""
	}
	for _, k := range keys {
		pk, err := failures.ParseKey(k)
		m, ok := r.cfg.Target.Mapping(pk.MappingID)
		if err != nil || !ok || !coalesces(m.Function) {
			flush()
			out = append(out, []string{k})
			continue
		}
		if m.Name != curMapping || len(cur) >= r.cfg.Coalesce {
			flush()
		}
		cur, curMapping = append(cur, k), m.Name
	}
	flush()
	return out
}

func (r *run) line(status, mapping, key, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.cfg.Out, "%-8s %-17s %s  %s\n", status, mapping, key, detail)
}

// list returns the keys under prefix, in key order (by mapping, shard, time).
func (r *run) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(r.cfg.Store, &s3.ListObjectsV2Input{Bucket: aws.String(r.cfg.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", r.cfg.Bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// outcome is what became of one object.
type outcome struct {
	skipped         bool
	other           bool // another mapping's: not this run's
	records, failed int
	// forgotten: an indexer batch with records older than the index's
	// memory of deletes (productsearch.DeleteMemory).
	forgotten bool
}

// loaded is a failure object read and checked against its mapping.
type loaded struct {
	key     string
	k       failures.Key
	m       wiring.Mapping
	o       failures.Object
	payload int // bytes of the object
}

// named says whether key may be an object of the mapping the run is for:
// any with no mapping named; else one under that mapping's UUID, or under
// a UUID the stage does not have.
func (r *run) named(key string) bool {
	if r.cfg.Mapping == "" {
		return true
	}
	id := r.cfg.Target.MappingIDs[r.cfg.Mapping]
	k, err := failures.ParseKey(key)
	if err != nil {
		return strings.HasPrefix(key, failures.Prefix+id+"/") // reported, as malformed
	}
	if k.MappingID == id {
		return true
	}
	_, known := r.cfg.Target.Mapping(k.MappingID)
	return !known
}

// errOtherMapping: an object of a UUID the stage no longer has turned out
// to be another mapping's than the one the run is for: left alone.
var errOtherMapping = errors.New("another mapping's object")

// load reads and checks one failure object; a nil loaded with no error
// means it was skipped (and reported).
func (r *run) load(ctx context.Context, key string) (*loaded, error) {
	skip := func(mapping, reason string) (*loaded, error) {
		r.line("skipped", mapping, key, reason)
		r.cfg.Logger.Warn("failure object skipped", "key", key, "mapping", mapping, "reason", reason)
		return nil, nil
	}
	k, err := failures.ParseKey(key)
	if err != nil {
		return skip("-", err.Error())
	}
	m, known := r.cfg.Target.Mapping(k.MappingID)
	name := m.Name
	if !known {
		name = "-"
	}
	body, err := r.get(ctx, key)
	var gone *types.NoSuchKey
	switch {
	case errors.As(err, &gone):
		// Retired or replayed by another run since the listing.
		return skip(name, "gone since the listing")
	case err != nil:
		// The bucket could not be read (denied, throttled, unavailable):
		// nothing is wrong with the object, so the replay stops (exit 2)
		// rather than report it skipped, which asks for the operator's
		// judgement on the object itself.
		return nil, err
	}
	o, err := failures.Parse(body)
	if err != nil {
		return skip(name, err.Error())
	}
	if !known {
		// A deploy that replaced the mapping gave it a new UUID: the batch
		// is the stage's mapping of the same function and table.
		var ok bool
		m, ok = r.cfg.Target.MappingOf(o.Function(), o.Table())
		switch {
		case r.cfg.Mapping != "" && (!ok || m.Name != r.cfg.Mapping):
			return nil, errOtherMapping
		case !ok:
			return skip("-", fmt.Sprintf("no mapping of this stage has the UUID %s, nor reads table %q into function %q", k.MappingID, o.Table(), o.Function()))
		}
	}
	if want := r.cfg.Target.Functions[m.Function]; o.Function() != want {
		return skip(m.Name, fmt.Sprintf("object names function %q, the mapping's is %q", o.Function(), want))
	}
	if want := r.cfg.Target.Tables[m.Table]; o.Table() != want {
		return skip(m.Name, fmt.Sprintf("object's stream is of table %q, the mapping's is %q", o.Table(), want))
	}
	return &loaded{key: key, k: k, m: m, o: o, payload: len(body)}, nil
}

// unit replays a unit of work: its objects' records are handed to the
// function together, in invocations of at most MaxPayload bytes, and each
// object is then marked, with its own remainder. An error means the replay
// must stop (the context ended, the bucket cannot be written): the objects
// not marked yet are left to be replayed again.
func (r *run) unit(ctx context.Context, keys []string) ([]outcome, error) {
	var outs []outcome
	var objs []*loaded
	for _, key := range keys {
		l, err := r.load(ctx, key)
		if errors.Is(err, errOtherMapping) {
			outs = append(outs, outcome{other: true})
			continue
		}
		if err != nil {
			return outs, err
		}
		if l == nil {
			outs = append(outs, outcome{skipped: true})
			continue
		}
		objs = append(objs, l)
	}
	if len(objs) == 0 {
		return outs, nil
	}
	m := objs[0].m
	if m.Function == wiring.StreamIndexer {
		if err := r.canReadProducts(ctx); err != nil {
			return outs, err
		}
	}
	if m.Function == wiring.Counters {
		r.counters.Lock()
		defer r.counters.Unlock()
	}
	failed := map[string]bool{}
	var d driven
	for _, batch := range pack(objs, r.cfg.MaxPayload) {
		got := r.drive(ctx, m, batch)
		d.invocations += got.invocations
		if len(got.failed) > 0 {
			d.functionError, d.reason = got.functionError, got.reason
		}
		for _, rec := range got.failed {
			failed[recordID(rec)] = true
		}
		if got.callErr != nil {
			return outs, got.callErr
		}
	}
	if ctx.Err() != nil {
		return outs, ctx.Err()
	}
	for _, l := range objs {
		od := driven{invocations: d.invocations, functionError: d.functionError, reason: d.reason}
		for _, rec := range l.o.Payload.Records {
			if failed[recordID(rec)] {
				od.failed = append(od.failed, rec)
			}
		}
		o, err := r.finish(ctx, l, od)
		if err != nil {
			return outs, err
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// recordID names one record of a stream: its event id and sequence number.
func recordID(rec events.DynamoDBEventRecord) string {
	return rec.EventID + "/" + rec.Change.SequenceNumber
}

// finish marks a replayed object, after writing the remainder of its
// records that still fail.
func (r *run) finish(ctx context.Context, l *loaded, d driven) (outcome, error) {
	key, k, m, o := l.key, l.k, l.m, l.o
	out := outcome{records: len(o.Payload.Records), failed: len(d.failed)}
	marker := markerBody{ReplayedAt: r.cfg.Now().UTC(), Records: out.records, Succeeded: out.records - out.failed, Failed: out.failed}
	detail := fmt.Sprintf("%d records: %d succeeded", out.records, marker.Succeeded)
	if len(d.failed) > 0 {
		rest := r.remainder(o, d)
		seqs := make([]string, len(d.failed))
		for i, rec := range d.failed {
			seqs[i] = rec.Change.SequenceNumber
		}
		rk := failures.RemainderKey(k, seqs).String()
		b, err := rest.Encode()
		if err != nil {
			return outcome{}, fmt.Errorf("remainder of %s: %w", key, err)
		}
		// A rerun after a kill, or a replay racing this one, derives the
		// same key: written once, so the versioned bucket keeps no untagged
		// copy that would never expire. The bucket decides (If-None-Match):
		// a HEAD before the write could be raced.
		if err := r.create(ctx, rk, b); err != nil {
			return outcome{}, err
		}
		marker.Remainder = rk
		detail += fmt.Sprintf(", %d still failing (%s), kept in %s", len(d.failed), d.reason, rk)
	}
	// Before the marker: a check that could not run leaves the object to
	// the next run, which checks again.
	gone := 0
	if m.Function == wiring.StreamIndexer {
		var err error
		if gone, err = r.goneProducts(ctx, o.Payload.Records); err != nil {
			return outcome{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	switch {
	case gone > 0:
		// A delete's tombstone lives gc_deletes at most, and in the
		// domain's memory only: a restart or a moved shard forgets it.
		// The replayed write of a product deleted since may be its
		// document again.
		out.forgotten, marker.Reindex = true, true
		detail += fmt.Sprintf("; %d of its products are deleted since, and the index may have forgotten their deletes: run make reindex", gone)
	case m.Function == wiring.StreamIndexer && r.cfg.Products == nil && !o.Oldest().IsZero() && r.cfg.Now().Sub(o.Oldest()) > productsearch.DeleteMemory:
		// Not checked against the table: its writes may be of products
		// deleted since, whose deletes the index no longer remembers.
		out.forgotten, marker.Reindex = true, true
		detail += fmt.Sprintf("; records older than the index remembers deletes (%s): run make reindex", productsearch.DeleteMemory)
	}
	mb, err := json.Marshal(marker)
	if err != nil {
		return outcome{}, err
	}
	// The need before the tag and the marker: a run killed after it replays
	// the object again and writes the need again (one reindex more at
	// worst). After them, a run killed in between would leave the object
	// marked, or tagged and expired by the lifecycle, with no need written.
	if marker.Reindex {
		if err := r.put(ctx, failures.ReindexNeededPrefix+key, mb); err != nil {
			return outcome{}, err
		}
	}
	// Tagged before it is marked: the bucket's lifecycle expires only what
	// the replay tagged, and a replay killed between the two replays the
	// object again on the next run (nothing counts twice) or finds it gone.
	if err := r.tagReplayed(ctx, key); err != nil {
		return outcome{}, err
	}
	if err := r.put(ctx, failures.ReplayedPrefix+key, mb); err != nil {
		return outcome{}, err
	}
	status := "replayed"
	if out.failed > 0 {
		status = "failing"
	}
	r.line(status, m.Name, key, detail)
	return out, nil
}

// goneProducts counts the products that recs write (an INSERT or a MODIFY)
// and that a strongly consistent read no longer finds in the products table.
func (r *run) goneProducts(ctx context.Context, recs []events.DynamoDBEventRecord) (int, error) {
	if r.cfg.Products == nil {
		return 0, nil
	}
	written := map[string]bool{}
	for _, rec := range recs {
		if rec.EventName == "REMOVE" {
			continue
		}
		if id := rec.Change.Keys["productId"]; id.DataType() == events.DataTypeString {
			written[id.String()] = true
		}
	}
	ids := slices.Sorted(maps.Keys(written))
	for len(ids) > 0 {
		n := min(len(ids), 100)
		keys := make([]map[string]ddbtypes.AttributeValue, n)
		for i, id := range ids[:n] {
			keys[i] = map[string]ddbtypes.AttributeValue{"productId": &ddbtypes.AttributeValueMemberS{Value: id}}
		}
		req := map[string]ddbtypes.KeysAndAttributes{r.cfg.ProductsTable: {Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("productId")}}
		err := ddbcall.BatchGet(ctx, r.cfg.Products, req, ddbcall.Backoff{Base: 10 * time.Millisecond, Cap: time.Second}, func(_ string, item map[string]ddbtypes.AttributeValue) error {
			if id, ok := item["productId"].(*ddbtypes.AttributeValueMemberS); ok {
				delete(written, id.Value)
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("read the products its records write: %w", err)
		}
		ids = ids[n:]
	}
	return len(written), nil
}

// tagReplayed tags a replayed object so that the bucket's lifecycle may
// expire it (failures.ReplayedTag); an object never replayed keeps no tag
// and stays.
func (r *run) tagReplayed(ctx context.Context, key string) error {
	_, err := r.cfg.Store.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(r.cfg.Bucket), Key: aws.String(key),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String(failures.ReplayedTag), Value: aws.String(failures.ReplayedTagValue)}}}})
	if err != nil {
		return fmt.Errorf("tag s3://%s/%s as replayed: %w", r.cfg.Bucket, key, err)
	}
	return nil
}

// markerBody is what a replayed/<key> marker holds.
type markerBody struct {
	ReplayedAt time.Time `json:"replayedAt"`
	Records    int       `json:"records"`
	Succeeded  int       `json:"succeeded"`
	Failed     int       `json:"failed"`
	// Remainder is the key of the failure object holding what still failed.
	Remainder string `json:"remainder,omitempty"`
	// Reindex: the batch wrote products deleted since (or, unchecked, is
	// older than the index remembers deletes); make reindex removes what
	// it may have brought back.
	Reindex bool `json:"reindex,omitempty"`
	// Retired is why an operator gave the object up (Retire).
	Retired string `json:"retired,omitempty"`
}

func (r *run) get(ctx context.Context, key string) ([]byte, error) {
	out, err := r.cfg.Store.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", r.cfg.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, failures.MaxObjectSize+1))
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", r.cfg.Bucket, key, err)
	}
	return b, nil
}

func (r *run) put(ctx context.Context, key string, body []byte) error {
	_, err := r.cfg.Store.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.cfg.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentType: aws.String("application/json")})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", r.cfg.Bucket, key, err)
	}
	return nil
}

// create writes key unless the bucket holds it already: S3's conditional
// write answers 412 when it does, and 409 when another write of it is under
// way, which is tried again.
func (r *run) create(ctx context.Context, key string, body []byte) error {
	for attempt := 0; ; attempt++ {
		_, err := r.cfg.Store.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.cfg.Bucket), Key: aws.String(key),
			Body: bytes.NewReader(body), ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*")})
		var api smithy.APIError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &api) && api.ErrorCode() == "PreconditionFailed":
			return nil // written by another run, with the same records
		case errors.As(err, &api) && api.ErrorCode() == "ConditionalRequestConflict" && attempt < 5:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
			}
			continue
		}
		return fmt.Errorf("put s3://%s/%s if absent: %w", r.cfg.Bucket, key, err)
	}
}

// remainder is the failure object of the records a replay could not apply,
// in the shape Lambda writes.
func (r *run) remainder(o failures.Object, d driven) failures.Object {
	recs := d.failed
	rest := failures.Object{
		Version: failures.Version, Timestamp: r.cfg.Now().UTC(),
		RequestContext: failures.RequestContext{FunctionArn: o.RequestContext.FunctionArn,
			Condition: failures.ConditionRetriesExhausted, ApproximateInvokeCount: d.invocations},
		ResponseContext: failures.ResponseContext{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: d.functionError},
		Batch: failures.BatchInfo{ShardID: o.Batch.ShardID, StreamArn: o.Batch.StreamArn, BatchSize: len(recs),
			StartSequenceNumber: recs[0].Change.SequenceNumber, EndSequenceNumber: recs[len(recs)-1].Change.SequenceNumber,
			ApproximateArrivalOfFirstRecord: recs[0].Change.ApproximateCreationDateTime.UTC(),
			ApproximateArrivalOfLastRecord:  recs[len(recs)-1].Change.ApproximateCreationDateTime.UTC()},
		Payload: events.DynamoDBEvent{Records: recs},
	}
	return rest
}

// driven is how a batch fared.
type driven struct {
	// callErr is an ErrCall: the batch's replay stopped there.
	callErr       error
	failed        []events.DynamoDBEventRecord
	invocations   int
	functionError *string
	reason        string
}

// attempt is a part of the batch on its way through the function.
type attempt struct {
	recs    []events.DynamoDBEventRecord
	retries int
}

// drive hands the records to the function as the mapping does: a partial
// batch response marks the records before the lowest failed one done and
// retries the rest as it is; a function error splits the batch in two
// (bisection spends no retry). When a part's retries are spent, the mapping
// gives up on all of it, from the lowest failed record on, because it must
// keep the stream's order. A replay need not (docs/operations.md): the
// records the function's last answer did not name are tried again on their
// own, so that only the records that fail themselves remain.
func (r *run) drive(ctx context.Context, m wiring.Mapping, recs []events.DynamoDBEventRecord) driven {
	var d driven
	queue := []attempt{{recs: recs}}
	for len(queue) > 0 {
		if ctx.Err() != nil {
			return d
		}
		a := queue[0]
		resp, err := r.cfg.Invoker.Invoke(ctx, m.Function, events.DynamoDBEvent{Records: a.recs})
		d.invocations++
		first := -1
		var named map[string]bool
		if errors.Is(err, ErrCall) {
			d.callErr = err
			return d
		}
		if err != nil {
			first = 0
			d.functionError, d.reason = aws.String("Unhandled"), err.Error()
			r.cfg.Logger.Warn("replayed batch failed", "mapping", m.Name, "count", len(a.recs), "err", err.Error())
		} else if m.ReportBatchItemFailures && len(resp.BatchItemFailures) > 0 {
			first, named = firstFailed(a.recs, resp.BatchItemFailures)
			d.functionError, d.reason = nil, "partial batch response"
		}
		if first < 0 {
			queue = queue[1:]
			continue
		}
		rest := a.recs[first:]
		if err != nil && m.BisectOnError && len(rest) > 1 {
			half := len(rest) / 2
			queue = append([]attempt{{recs: rest[:half], retries: a.retries}, {recs: rest[half:], retries: a.retries}}, queue[1:]...)
			continue
		}
		if a.retries < r.cfg.Retries {
			queue[0] = attempt{recs: rest, retries: a.retries + 1}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond << a.retries):
			}
			continue
		}
		queue = queue[1:]
		var others []events.DynamoDBEventRecord
		for _, rec := range rest {
			if named != nil && !named[rec.Change.SequenceNumber] {
				others = append(others, rec)
			} else {
				d.failed = append(d.failed, rec)
			}
		}
		if len(others) > 0 {
			queue = append([]attempt{{recs: others}}, queue...)
		}
	}
	// The remainder keeps the batch's order.
	pos := make(map[string]int, len(recs))
	for i, rec := range recs {
		pos[rec.Change.SequenceNumber] = i
	}
	sort.SliceStable(d.failed, func(i, j int) bool {
		return pos[d.failed[i].Change.SequenceNumber] < pos[d.failed[j].Change.SequenceNumber]
	})
	return d
}

// pack packs the objects' records, in order, into invocations of at
// most max bytes of objects (an object bigger than max alone). A function
// names the records it failed by sequence number, which DynamoDB Streams
// keeps unique within a shard only: an object with a record whose sequence
// number the invocation holds already (another shard's) starts the next
// one, so that a failure names one record.
func pack(objs []*loaded, max int) [][]events.DynamoDBEventRecord {
	var out [][]events.DynamoDBEventRecord
	var batch []events.DynamoDBEventRecord
	size := 0
	seqs := map[string]bool{}
	for _, l := range objs {
		if size > 0 && (size+l.payload > max || sharesSequence(l.o.Payload.Records, seqs)) {
			out = append(out, batch)
			batch, size = nil, 0
			clear(seqs)
		}
		batch = append(batch, l.o.Payload.Records...)
		for _, rec := range l.o.Payload.Records {
			seqs[rec.Change.SequenceNumber] = true
		}
		size += l.payload
	}
	if len(batch) > 0 {
		out = append(out, batch)
	}
	return out
}

// sharesSequence says whether a record of recs has a sequence number in seqs.
func sharesSequence(recs []events.DynamoDBEventRecord, seqs map[string]bool) bool {
	for _, rec := range recs {
		if seqs[rec.Change.SequenceNumber] {
			return true
		}
	}
	return false
}

// firstFailed returns the index of the lowest failed record and the
// sequence numbers the answer names; an identifier that names no record of
// the batch fails it whole, as on Lambda (nil names).
func firstFailed(recs []events.DynamoDBEventRecord, fs []events.DynamoDBBatchItemFailure) (int, map[string]bool) {
	first := -1
	named := map[string]bool{}
	for _, f := range fs {
		idx := -1
		for i, rec := range recs {
			if rec.Change.SequenceNumber == f.ItemIdentifier {
				idx = i
				break
			}
		}
		if idx < 0 {
			return 0, nil
		}
		named[f.ItemIdentifier] = true
		if first < 0 || idx < first {
			first = idx
		}
	}
	return first, named
}

// Retire gives up on failure objects an operator will not replay: a poison
// record's remainder whose cause is understood, an object skipped as
// malformed or of a mapping this stage no longer has. Each is tagged as
// replayed (so the bucket's lifecycle expires it, as it never expires a
// batch that was not replayed) and marked with the reason, and is no longer
// on its way: what its records would have counted, make audit REPAIR=1
// counts from the tables and the archive. An archiver's object is refused
// unless force is set: it is the only copy of what TTL removed, and
// retiring it loses those items from the archive for good. Every key is
// checked before any is retired; one already marked is left as it is. It
// returns how many it retired.
func Retire(ctx context.Context, cfg Config, keys []string, reason string, force bool) (int, error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if strings.TrimSpace(reason) == "" {
		return 0, errors.New("retire: say why (a reason is kept in the marker)")
	}
	r := &run{cfg: cfg}
	var todo []string
	for _, key := range keys {
		if !strings.HasPrefix(key, failures.Prefix) {
			return 0, fmt.Errorf("retire %s: not a failure object (keys start %s)", key, failures.Prefix)
		}
		if k, err := failures.ParseKey(key); err == nil && cfg.Target != nil && !force {
			m, ok := cfg.Target.Mapping(k.MappingID)
			if ok && m.Function == wiring.Archiver {
				return 0, fmt.Errorf("retire %s: a batch of %s is the only copy of the items TTL removed, and retiring it loses them from the archive for good; replay it, or retire it with -force (make replay … FORCE=1)", key, m.Name)
			}
			if !ok {
				return 0, fmt.Errorf("retire %s: no mapping of this stage has its UUID %s, so it may be an archiver's batch, the only copy of the items TTL removed; read it first, then retire it with -force (make replay … FORCE=1)", key, k.MappingID)
			}
		}
		if _, err := r.head(ctx, failures.ReplayedPrefix+key); err == nil {
			r.line("done", "-", key, "already replayed or retired: left alone")
			continue
		} else if !notFound(err) {
			return 0, err
		}
		if _, err := r.head(ctx, key); err != nil {
			if notFound(err) {
				return 0, fmt.Errorf("retire %s: no such object in s3://%s", key, cfg.Bucket)
			}
			return 0, err
		}
		todo = append(todo, key)
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	n := 0
	for _, key := range todo {
		mb, err := json.Marshal(markerBody{ReplayedAt: now().UTC(), Retired: reason})
		if err != nil {
			return n, err
		}
		if err := r.tagReplayed(ctx, key); err != nil {
			return n, err
		}
		if err := r.put(ctx, failures.ReplayedPrefix+key, mb); err != nil {
			return n, err
		}
		r.line("retired", "-", key, reason)
		n++
	}
	fmt.Fprintf(cfg.Out, "replay: %d objects retired; make audit REPAIR=1 counts what their records would have\n", n)
	return n, nil
}

// head says whether key exists (a missing one is notFound).
func (r *run) head(ctx context.Context, key string) (*s3.HeadObjectOutput, error) {
	out, err := r.cfg.Store.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(r.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("head s3://%s/%s: %w", r.cfg.Bucket, key, err)
	}
	return out, nil
}

// notFound says whether err is S3's answer for a missing key.
func notFound(err error) bool {
	var nsk *types.NoSuchKey
	var api smithy.APIError
	return errors.As(err, &nsk) || errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")
}
