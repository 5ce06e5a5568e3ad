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
	"github.com/shopstream/shopstream/shared/tables"
)

// order is what the counters read of an order, in the table (DynamoDB) and in
// the archive (plain JSON).
type order struct {
	UserID     string `dynamodbav:"userId" json:"userId"`
	OrderID    string `dynamodbav:"orderId" json:"orderId"`
	Status     string `dynamodbav:"status" json:"status"`
	TotalCents int64  `dynamodbav:"totalCents" json:"totalCents"`
	UpdatedAt  string `dynamodbav:"updatedAt" json:"updatedAt"`
	ExpiresAt  int64  `dynamodbav:"expiresAt" json:"expiresAt"`
	Lines      []struct {
		ProductID string `dynamodbav:"productId" json:"productId"`
		Quantity  int64  `dynamodbav:"quantity" json:"quantity"`
	} `dynamodbav:"lines" json:"lines"`
}

func (o order) key() string { return o.UserID + "\x00" + o.OrderID }

// check applies the counters' own rules (docs/counters.md, malformed records).
func (o order) check() error {
	if o.UserID == "" || o.OrderID == "" || len(o.Lines) == 0 {
		return errors.New("order without user, id or lines")
	}
	for _, l := range o.Lines {
		if l.ProductID == "" || l.Quantity < 1 {
			return errors.New("order line without product or quantity")
		}
	}
	return nil
}

type review struct {
	ProductID string `dynamodbav:"productId"`
	UserID    string `dynamodbav:"userId"`
	Rating    int64  `dynamodbav:"rating"`
	UpdatedAt string `dynamodbav:"updatedAt"`
}

// source is the counters as the source says they should be.
type source struct {
	only   map[Item]bool
	mu     sync.Mutex
	counts map[Item]map[string]int64
	// newest is the latest write (clock.Layout) among each item's source
	// records: placements, cancellations, reviews.
	newest map[Item]string
	// seen holds the keys of the orders counted, so an order that TTL moved
	// to the archive while the table was read is counted once.
	seen map[string]bool

	orders, archived, reviews, inTransit int
	problems                             []Problem
}

func (s *source) add(it Item, counter string, n int64) {
	if s.only != nil && !s.only[it] {
		return
	}

	c := s.counts[it]
	if c == nil {
		c = map[string]int64{}
		s.counts[it] = c
	}
	c[counter] += n
}

// touch records that it has a source record written at updatedAt.
func (s *source) touch(it Item, updatedAt string) {
	if s.only != nil && !s.only[it] {
		return
	}
	if updatedAt > s.newest[it] {
		s.newest[it] = updatedAt
	}
}

// addOrder counts one order as the counters processor does over its life:
// placed (+1 order, +total, +units), and when cancelled −total and −units.
// Archiving changes nothing. The caller holds mu.
func (s *source) addOrder(o order) {
	s.seen[o.key()] = true
	user := Item{User, o.UserID}
	s.touch(user, o.UpdatedAt)
	for _, l := range o.Lines {
		s.touch(Item{Product, l.ProductID}, o.UpdatedAt)
	}
	s.add(user, "orderCount", 1)
	if o.Status == "CANCELLED" {
		return
	}
	s.add(user, "lifetimeSpendCents", o.TotalCents)
	for _, l := range o.Lines {
		s.add(Item{Product, l.ProductID}, "unitsSold", l.Quantity)
	}
}

// source reads the orders and reviews tables, waits Settle so that every order
// TTL removed while they were read has reached the archive, and reads the
// archive. transit holds the expired orders earlier rounds saw in the table:
// one that is now in neither place is on its way to the archive and counts
// as last seen; source adds this round's to it.
func (a *Auditor) source(ctx context.Context, only map[Item]bool, arch *archiveCache, transit map[string]order) (*source, error) {
	soon := time.Now().Add(a.cfg.MaxWait + a.cfg.Settle).Unix()
	s := &source{only: only, counts: map[Item]map[string]int64{}, newest: map[Item]string{}, seen: map[string]bool{}}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		errs[0] = scan.Table(ctx, a.cfg.DB, scan.Input{
			Table: a.cfg.Tables.Orders, Segments: a.cfg.Segments, Consistent: true,
			Projection: []string{"userId", "orderId", "status", "totalCents", "lines", "updatedAt", "expiresAt"},
		}, func(items []map[string]types.AttributeValue) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, item := range items {
				var o order
				err := attributevalue.UnmarshalMap(item, &o)
				if err == nil {
					err = o.check()
				}
				if err != nil {
					s.problems = append(s.problems, Problem{Where: fmt.Sprintf("table %s item %s/%s", a.cfg.Tables.Orders, o.UserID, o.OrderID), Err: err.Error()})
					continue
				}
				s.orders++
				s.addOrder(o)
				if o.ExpiresAt > 0 && o.ExpiresAt < soon {
					transit[o.key()] = o
				}
			}
			a.cfg.Progress.Add("orders read", int64(len(items)))
			return nil
		})
	})
	wg.Go(func() {
		errs[1] = scan.Table(ctx, a.cfg.DB, scan.Input{
			Table: a.cfg.Tables.Reviews, Segments: a.cfg.Segments, Consistent: true,
			Projection: []string{"productId", "userId", "rating", "updatedAt"},
		}, func(items []map[string]types.AttributeValue) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, item := range items {
				var r review
				err := attributevalue.UnmarshalMap(item, &r)
				if err == nil && (r.ProductID == "" || r.UserID == "" || r.Rating < 1 || r.Rating > 5) {
					err = errors.New("review without product, user or a rating in 1..5")
				}
				if err != nil {
					s.problems = append(s.problems, Problem{Where: fmt.Sprintf("table %s item %s/%s", a.cfg.Tables.Reviews, r.ProductID, r.UserID), Err: err.Error()})
					continue
				}
				s.reviews++
				s.touch(Item{User, r.UserID}, r.UpdatedAt)
				s.touch(Item{Product, r.ProductID}, r.UpdatedAt)
				s.add(Item{User, r.UserID}, "reviewCount", 1)
				p := Item{Product, r.ProductID}
				s.add(p, "reviewCount", 1)
				s.add(p, "ratingTotal", r.Rating)
			}
			a.cfg.Progress.Add("reviews read", int64(len(items)))
			return nil
		})
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	tablesRead := time.Now()
	a.cfg.Progress.Note("tables read; settling %s before the archive and the second reading", a.cfg.Settle)
	if err := sleep(ctx, time.Until(tablesRead.Add(a.cfg.Settle))); err != nil {
		return nil, err
	}
	objects, err := a.readArchive(ctx, arch)
	if err != nil {
		return nil, err
	}
	eventIDs := map[string]bool{}
	for _, obj := range objects {
		s.problems = append(s.problems, obj.problems...)
		for _, l := range obj.lines {
			if eventIDs[l.eventID] || s.seen[l.order.key()] {
				continue // in two objects, or still in the table when it was read
			}
			eventIDs[l.eventID] = true
			s.archived++
			s.addOrder(l.order)
			delete(transit, l.order.key())
		}
	}
	// The archiver's batches still in the failure bucket: orders on their
	// way to the archive.
	pending, problems, err := a.readPendingArchive(ctx)
	if err != nil {
		return nil, err
	}
	s.problems = append(s.problems, problems...)
	for _, l := range pending {
		if eventIDs[l.eventID] || s.seen[l.order.key()] {
			continue
		}
		eventIDs[l.eventID] = true
		s.inTransit++
		s.addOrder(l.order)
		delete(transit, l.order.key())
	}
	for k, o := range transit {
		if !s.seen[k] {
			s.inTransit++
			s.addOrder(o)
		}
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

// readArchive lists the orders archive and reads every object not read yet.
// An object that cannot be listed or fetched fails the audit; one that cannot
// be decompressed or parsed is kept with its problems.
func (a *Auditor) readArchive(ctx context.Context, cache *archiveCache) ([]*archiveObject, error) {
	prefix := tables.Orders + "/"
	var listed []string
	var token *string
	for {
		out, err := a.cfg.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: aws.String(a.cfg.Bucket), Prefix: aws.String(prefix), ContinuationToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list archive s3://%s/%s: %w", a.cfg.Bucket, prefix, err)
		}
		for _, o := range out.Contents {
			listed = append(listed, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			break
		}
		token = out.NextContinuationToken
	}
	sort.Strings(listed)
	var todo []string
	cache.mu.Lock()
	for _, k := range listed {
		if cache.objects[k] == nil {
			todo = append(todo, k)
		}
	}
	cache.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan string)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range work {
				obj, err := a.readObject(ctx, k)
				if err != nil {
					once.Do(func() { first = err })
					cancel()
					continue
				}
				cache.mu.Lock()
				cache.objects[k] = obj
				cache.mu.Unlock()
				a.cfg.Progress.Add("archive objects read", 1)
			}
		})
	}
feed:
	for _, k := range todo {
		select {
		case work <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*archiveObject, 0, len(listed))
	for _, k := range listed {
		out = append(out, cache.objects[k])
	}
	return out, nil
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

// parseLine reads one archive line (CONTRACT §4) of an order.
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
	if err := o.check(); err != nil {
		return archivedOrder{}, err
	}
	return archivedOrder{eventID: l.EventID, order: o}, nil
}
