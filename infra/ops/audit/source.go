package audit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/ops/scan"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/tables"
)

// order is an order as the counters' facts read it, from the table, the
// archive or an archiver batch: the one declaration, with the counters' own
// rules (facts.Order.Check, MaxLines included).
type order = facts.Order

// source is what the orders and reviews tables, the archive and the failure
// bucket say happened.
type source struct {
	mu sync.Mutex
	// proven are the facts of the orders (table, archive, archiver's
	// batches in the failure bucket).
	proven map[string]facts.Fact
	// live are the reviews in the table, by instance.
	live map[string]facts.Review
	// unread are the reviews in the table that could not be read (a
	// Problem), by their instances' prefix (reviewPrefix): the audit
	// cannot tell what they hold, so it proves no fact of theirs.
	unread map[string]bool
	// seen are the orders read, by id.
	seen map[string]bool
	// onTheirWay are the facts of the counters' batches in the failure
	// bucket, not replayed yet.
	onTheirWay map[string]bool

	orders, archived, reviews, inTransit int
	archiveObjects, archiveRead          int
	problems                             []Problem
}

// addOrder adds the facts of an order; it reports false for an order seen
// before (in the table, or in another archive object).
func (s *source) addOrder(o order) bool {
	if s.seen[o.OrderID] {
		return false
	}
	s.seen[o.OrderID] = true
	for _, f := range facts.OfOrder(o) {
		s.proven[f.Key] = f
	}
	return true
}

// source reads the orders and reviews tables, the archive and the failure
// bucket. It is read after the markers: a marker it is compared with was
// written before the source was read. marked says whether a fact has a
// marker (in that reading): an archive object the digest knows whose facts
// are all marked is not downloaded.
func (a *Auditor) source(ctx context.Context, marked func(key string) bool) (*source, error) {
	s := &source{proven: map[string]facts.Fact{}, seen: map[string]bool{}, live: map[string]facts.Review{}, unread: map[string]bool{}, onTheirWay: map[string]bool{}}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		errs[0] = scan.Table(ctx, a.cfg.DB, scan.Input{
			Table: a.cfg.Tables.Orders, Segments: a.cfg.Segments, Consistent: true,
			Projection: []string{"userId", "orderId", "status", "totalCents", "lines"},
		}, func(items []map[string]types.AttributeValue) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, item := range items {
				var o order
				err := attributevalue.UnmarshalMap(item, &o)
				if err == nil {
					err = o.Check()
				}
				if err != nil {
					s.problems = append(s.problems, Problem{Where: fmt.Sprintf("table %s item %s/%s", a.cfg.Tables.Orders, o.UserID, o.OrderID), Err: err.Error()})
					continue
				}
				s.orders++
				s.addOrder(o)
			}
			a.cfg.Progress.Add("orders read", int64(len(items)))
			return nil
		})
	})
	wg.Go(func() {
		errs[1] = scan.Table(ctx, a.cfg.DB, scan.Input{
			Table: a.cfg.Tables.Reviews, Segments: a.cfg.Segments, Consistent: true,
			Projection: []string{"productId", "userId", "rating", "createdAt", "version"},
		}, func(items []map[string]types.AttributeValue) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, item := range items {
				var r facts.Review
				err := attributevalue.UnmarshalMap(item, &r)
				if err == nil {
					err = r.Check()
				}
				if err != nil {
					p, u := stringAttr(item, "productId"), stringAttr(item, "userId")
					s.problems = append(s.problems, Problem{Where: fmt.Sprintf("table %s item %s/%s", a.cfg.Tables.Reviews, p, u), Err: err.Error()})
					s.unread[reviewPrefix(p, u)] = true
					continue
				}
				s.reviews++
				s.live[r.Instance()] = r
			}
			a.cfg.Progress.Add("reviews read", int64(len(items)))
			return nil
		})
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	// The archive is read after the table: an order TTL removes meanwhile
	// was read in the table or is in the archive, or in the archiver's
	// batches of the failure bucket; if it is in none yet (on its way), its
	// facts were marked before the markers were read, and a marked fact is
	// never taken out. Unless its placement was never counted (its record
	// lost): then this run misses it and the next finds it in the archive
	// (docs/operations.md).
	ar, err := a.readArchive(ctx, newArchiveCache(), marked)
	if err != nil {
		return nil, err
	}
	s.archiveObjects, s.archiveRead = ar.listed, len(ar.objects)
	for _, d := range ar.digested {
		for _, o := range d.Orders {
			// Its facts are marked: only counted, once.
			if !s.seen[o.ID] {
				s.seen[o.ID] = true
				s.archived++
			}
		}
	}
	for _, obj := range ar.objects {
		s.problems = append(s.problems, obj.problems...)
		for _, l := range obj.lines {
			if s.addOrder(l.order) {
				s.archived++
			}
		}
	}
	pending, counted, problems, err := a.readPending(ctx)
	if err != nil {
		return nil, err
	}
	s.problems = append(s.problems, problems...)
	for _, l := range pending {
		if s.addOrder(l.order) {
			s.inTransit++
		}
	}
	for _, f := range counted {
		s.onTheirWay[f.Key] = true
	}
	return s, nil
}

// archivedOrder is one usable line of the archive.
type archivedOrder struct {
	eventID string
	order   order
}

// archiveObject is one archive object, parsed.
type archiveObject struct {
	key      string
	lines    []archivedOrder
	problems []Problem
}

// archiveCache keeps parsed objects between rounds: an object's key is a hash
// of its event ids, so a rewrite holds the same lines.
type archiveCache struct {
	mu      sync.Mutex
	objects map[string]*archiveObject
}

func newArchiveCache() *archiveCache { return &archiveCache{objects: map[string]*archiveObject{}} }

// archiveRead is what readArchive found.
type archiveRead struct {
	listed int
	// objects were downloaded and parsed.
	objects []*archiveObject
	// digested are the objects known by the digest, their facts all marked.
	digested []digestObject
}

// readArchive lists the orders archive and reads every object the digest
// does not spare (digest.go), then writes the digest of the days that
// changed. An object that cannot be listed or fetched fails the audit; one
// that cannot be decompressed or parsed is kept with its problems.
func (a *Auditor) readArchive(ctx context.Context, cache *archiveCache, marked func(string) bool) (archiveRead, error) {
	var res archiveRead
	prefix := tables.Orders + "/"
	var digest map[string]digestObject
	// through is the last sealed day (sealed.go): the days up to it are
	// known by the digest and not listed.
	var through string
	var clock time.Time
	var discarded []time.Time
	canSeal := false
	if !a.cfg.NoDigest {
		var whole bool
		var err error
		if digest, whole, err = a.readDigest(ctx, prefix); err != nil {
			return res, err
		}
		if whole {
			through = a.readSeal(ctx, prefix)
		}
		// S3's time first, then the failure bucket, then the listing.
		if clock, err = a.s3Now(ctx); err != nil {
			a.cfg.Progress.Note("archive days not sealed: %v", err)
		} else if discarded, canSeal, err = a.discardTimes(ctx); err != nil {
			return res, err
		}
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(a.cfg.Bucket), Prefix: aws.String(prefix)}
	if through != "" {
		// After every key of the day's folder: "0" sorts after "/".
		in.StartAfter = aws.String(prefix + through + "0")
	}
	var listed []listedObject
	p := s3.NewListObjectsV2Paginator(a.cfg.S3, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return res, fmt.Errorf("list archive s3://%s/%s: %w", a.cfg.Bucket, prefix, err)
		}
		for _, o := range page.Contents {
			listed = append(listed, listedObject{key: aws.ToString(o.Key), etag: etagOf(o.ETag), size: aws.ToInt64(o.Size)})
		}
	}
	if through != "" {
		for k, d := range digest {
			if day := dayFolder(prefix, k); validDay(day) && day <= through {
				listed = append(listed, listedObject{key: k, etag: d.ETag, size: d.Size})
			}
		}
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].key < listed[j].key })
	res.listed = len(listed)
	now := map[string]digestObject{}
	var todo []listedObject
	cache.mu.Lock()
	for _, l := range listed {
		if d, ok := digest[l.key]; ok && d.ETag == l.etag && d.Size == l.size && allMarked(d, marked) {
			res.digested = append(res.digested, d)
			now[l.key] = d
			continue
		}
		if cache.objects[l.key] == nil {
			todo = append(todo, l)
		}
	}
	cache.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan listedObject)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for l := range work {
				obj, err := a.readObject(ctx, l.key)
				if err != nil {
					once.Do(func() { first = err })
					cancel()
					continue
				}
				cache.mu.Lock()
				cache.objects[l.key] = obj
				cache.mu.Unlock()
				a.cfg.Progress.Add("archive objects read", 1)
			}
		})
	}
feed:
	for _, l := range todo {
		select {
		case work <- l:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		return res, first
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	for _, l := range listed {
		obj := cache.objects[l.key]
		if obj == nil {
			continue // known by the digest
		}
		res.objects = append(res.objects, obj)
		if len(obj.problems) == 0 {
			now[l.key] = digestOf(l, obj)
		}
	}
	if !a.cfg.NoDigest {
		if err := a.writeDigest(ctx, digest, now, listed); err != nil {
			// The digest is a cache: the audit stands without it.
			a.cfg.Progress.Note("archive digest not kept: %v", err)
		} else if canSeal {
			a.reseal(ctx, prefix, through, clock, discarded, listed, now)
		}
	}
	return res, nil
}

// reseal moves the seal to the last day that may be sealed now: every day
// up to it has all its objects in the digest just written.
func (a *Auditor) reseal(ctx context.Context, prefix, old string, clock time.Time, discarded []time.Time, listed []listedObject, now map[string]digestObject) {
	var unsettled []string
	for _, l := range listed {
		day := dayFolder(prefix, l.key)
		if !validDay(day) {
			return // a key outside the day folders: list everything, always
		}
		if _, ok := now[l.key]; !ok {
			unsettled = append(unsettled, day)
		}
	}
	through := sealThrough(clock, discarded, unsettled)
	if through == old {
		return
	}
	if err := a.writeSeal(ctx, prefix, through); err != nil {
		a.cfg.Progress.Note("archive days not sealed: %v", err)
	}
}

// allMarked reports whether every fact a digest entry names has a marker.
func allMarked(d digestObject, marked func(string) bool) bool {
	if marked == nil {
		return false
	}
	for _, k := range d.factKeys() {
		if !marked(k) {
			return false
		}
	}
	return true
}

// maxLine bounds one archive line: an item is at most 400 KB, its JSON a
// little more.
const maxLine = 4 << 20

func (a *Auditor) readObject(ctx context.Context, key string) (*archiveObject, error) {
	where := "s3://" + a.cfg.Bucket + "/" + key
	out, err := a.cfg.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("read archive object %s: %w", where, err)
	}
	raw, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read archive object %s: %w", where, err)
	}
	obj := &archiveObject{key: key}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		obj.problems = append(obj.problems, Problem{Where: where, Err: "not gzip: " + err.Error()})
		return obj, nil
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		l, err := parseLine(sc.Bytes())
		if err != nil {
			obj.problems = append(obj.problems, Problem{Where: where, Line: n, Err: err.Error()})
			continue
		}
		obj.lines = append(obj.lines, l)
	}
	if err := sc.Err(); err != nil {
		obj.problems = append(obj.problems, Problem{Where: where, Line: n + 1, Err: "corrupt object: " + err.Error()})
	}
	return obj, nil
}

// parseLine reads one archive line (docs/contract.md#4-archive) of an order.
func parseLine(b []byte) (archivedOrder, error) {
	var l struct {
		EventID string          `json:"eventId"`
		Table   string          `json:"table"`
		Item    json.RawMessage `json:"item"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return archivedOrder{}, fmt.Errorf("not a JSON line: %w", err)
	}
	if l.EventID == "" {
		return archivedOrder{}, errors.New("line without eventId")
	}
	if l.Table != tables.Orders {
		return archivedOrder{}, fmt.Errorf("line of table %q under the orders archive", l.Table)
	}
	var o order
	if err := json.Unmarshal(l.Item, &o); err != nil {
		return archivedOrder{}, fmt.Errorf("item: %w", err)
	}
	if err := o.Check(); err != nil {
		return archivedOrder{}, err
	}
	return archivedOrder{eventID: l.EventID, order: o}, nil
}

// stringAttr is item's string attribute name, "" when it is not one.
func stringAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// reviewPrefix begins the instances (facts.Review.Instance) of the reviews
// of product p by user u.
func reviewPrefix(p, u string) string {
	return facts.Review{ProductID: p, UserID: u}.Instance()
}
