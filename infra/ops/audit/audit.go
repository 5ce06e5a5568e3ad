// Package audit recomputes the counters of CONTRACT §3 from the source of
// truth (the orders and reviews tables and the orders archive in S3), reports
// every counter item whose stored counters differ, and, when asked, repairs
// them while traffic and the stream processors run.
//
// The stream processors follow the tables by the stream's lag, so a counter
// may differ for a moment only because its records are in flight. An item is
// judged only on a settled reading: its counters are read, then the source,
// then, Settle later, the item again; when its version did not move in
// between, no record was in flight for it and the stored value must equal the
// computed one (the argument is in docs/operations.md). An item written to
// (in the source) less than Settle before the first reading is not judged
// either. Such items are read again in the next round, until MaxWait; and a
// difference counts as drift only when two settled rounds in a row find it,
// at the same version. A repair is conditional on the
// version that was judged, so it never overwrites a write it did not see.
//
// A repair also sets the item's watermark (counting.Watermark) to Settle/2
// before the round began: every change the repaired counters hold was made
// before it, every change they miss after it. The counters processor then
// adds to the item only records created at or after the watermark, so a
// record still on its way when the item was repaired (retried, or kept in the
// failure bucket for a replay) is not counted twice (docs/counters.md,
// "Repairs and the watermark").
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/ops/progress"
	"github.com/shopstream/shopstream/shared/clock"
)

// DB is the part of the DynamoDB client the audit uses.
type DB interface {
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Archive is the part of the S3 client the audit uses to read the archive.
type Archive interface {
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Tables are the physical names of the tables the audit reads.
type Tables struct {
	Users, Products, Orders, Reviews string
}

// Config configures an Auditor.
type Config struct {
	DB     DB
	S3     Archive
	Tables Tables
	// Bucket is the archive bucket (ARCHIVE_BUCKET).
	Bucket string
	// FailureBucket, when set, is read for the archiver's batches not
	// replayed yet: their orders count as archived (on their way).
	FailureBucket string
	// Settle bounds how long a table write takes to reach its counters and,
	// for a TTL removal, the archive: the mappings' batching window plus the
	// counters' iterator age, with a margin. Default 5 s.
	Settle time.Duration
	// MaxWait bounds how long items that keep moving are read again before
	// they are reported as unsettled. Default 2 min.
	MaxWait time.Duration
	// Segments is the number of parallel scan segments per table (default 4).
	Segments int
	// Repair corrects the drift it proves. It needs a Settle of at least
	// MinRepairSettle; New raises a shorter one.
	Repair bool
	// Progress, when set, counts what was read.
	Progress *progress.Meter
	// BeforeSource, when set, runs in each round between the first reading of
	// the counter items and the reading of the source (drills use it to put
	// records in flight at the worst moment).
	BeforeSource func(round int)
}

// MinRepairSettle is the shortest Settle a repair accepts. The watermark sits
// Settle/2 before the round began, and a change made after that start must
// not fall before it: stream times are floored to the second (1 s), and the
// audit's clock may differ from DynamoDB's by what is left of Settle/2.
const MinRepairSettle = 3 * time.Second

// Auditor audits and repairs counters.
type Auditor struct{ cfg Config }

// New returns an Auditor.
func New(cfg Config) *Auditor {
	if cfg.Settle <= 0 {
		cfg.Settle = 5 * time.Second
	}
	if cfg.Repair && cfg.Settle < MinRepairSettle {
		cfg.Settle = MinRepairSettle
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 2 * time.Minute
	}
	if cfg.Segments <= 0 {
		cfg.Segments = 4
	}
	return &Auditor{cfg: cfg}
}

// Kind is the kind of a counter item.
type Kind string

// Kinds of counter items.
const (
	User    Kind = "user"
	Product Kind = "product"
)

// Counters lists the counters of each kind, as stored (CONTRACT §3; the
// product's ratingAverage is ratingTotal / reviewCount).
var Counters = map[Kind][]string{
	User:    {"orderCount", "lifetimeSpendCents", "reviewCount"},
	Product: {"reviewCount", "ratingTotal", "unitsSold"},
}

// Item names one counter item: a user or a product.
type Item struct {
	Kind Kind
	ID   string
}

func (it Item) String() string { return string(it.Kind) + "/" + it.ID }

// Drift is one counter whose stored value differs from the source.
type Drift struct {
	Item     Item
	Counter  string
	Stored   int64
	Computed int64
	// Repaired: the stored value was set to Computed.
	Repaired bool
}

// Problem is input the audit could not use: a corrupt archive line or object,
// or a malformed table item. It is reported and the audit goes on.
type Problem struct {
	// Where is the archive object (s3://bucket/key) or the table item.
	Where string
	// Line is the line of the object (1-based); 0 for the object as a whole.
	Line int
	Err  string
}

// Report is what an audit found.
type Report struct {
	// Items is how many counter items were judged or left unsettled.
	Items int
	// Orders, ArchivedOrders and Reviews are what the last round counted from.
	Orders, ArchivedOrders, Reviews int
	// Rounds is how many rounds of readings it took.
	Rounds int
	Drift  []Drift
	// Unsettled items kept moving until MaxWait: not judged.
	Unsettled []Item
	Problems  []Problem
}

// Remaining returns the drift that was not repaired.
func (r Report) Remaining() []Drift {
	var out []Drift
	for _, d := range r.Drift {
		if !d.Repaired {
			out = append(out, d)
		}
	}
	return out
}

// ExitCode is 0 when every counter agrees with a complete source (or was
// repaired), 1 otherwise: drift remains, items could not be judged, or the
// archive had corrupt input.
func (r Report) ExitCode() int {
	if len(r.Remaining()) == 0 && len(r.Unsettled) == 0 && len(r.Problems) == 0 {
		return 0
	}
	return 1
}

// Write prints the report for an operator.
func (r Report) Write(w io.Writer) error {
	for _, p := range r.Problems {
		if p.Line > 0 {
			fmt.Fprintf(w, "archive problem: %s line %d: %s\n", p.Where, p.Line, p.Err)
		} else {
			fmt.Fprintf(w, "input problem: %s: %s\n", p.Where, p.Err)
		}
	}
	if len(r.Drift) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ITEM\tCOUNTER\tSTORED\tCOMPUTED\tACTION")
		for _, d := range r.Drift {
			action := "drift"
			if d.Repaired {
				action = "repaired"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", d.Item, d.Counter, d.Stored, d.Computed, action)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, it := range r.Unsettled {
		fmt.Fprintf(w, "unsettled (kept moving, not judged): %s\n", it)
	}
	repaired := len(r.Drift) - len(r.Remaining())
	_, err := fmt.Fprintf(w, "audit: %d items, %d orders in the table, %d archived, %d reviews, %d rounds: %d counters differ, %d repaired, %d unsettled, %d input problems\n",
		r.Items, r.Orders, r.ArchivedOrders, r.Reviews, r.Rounds, len(r.Drift), repaired, len(r.Unsettled), len(r.Problems))
	if len(r.Problems) > 0 && len(r.Remaining()) > 0 {
		fmt.Fprintln(w, "audit: the archive has input it could not read: differences may come from it, and nothing was repaired")
	}
	return err
}

// Run audits every counter item.
func (a *Auditor) Run(ctx context.Context) (Report, error) { return a.run(ctx, nil) }

// Recount audits (and, with Repair, repairs) the given items only. It still
// reads the whole source: a product's unitsSold comes from every order.
func (a *Auditor) Recount(ctx context.Context, items []Item) (Report, error) {
	set := map[Item]bool{}
	for _, it := range items {
		set[it] = true
	}
	if len(set) == 0 {
		return Report{}, nil
	}
	return a.run(ctx, set)
}

// reading is one counter item as stored.
type reading struct {
	counts  map[string]int64
	version int64
}

func (a *Auditor) run(ctx context.Context, only map[Item]bool) (Report, error) {
	deadline := time.Now().Add(a.cfg.MaxWait)
	arch := newArchiveCache()
	var rep Report
	judged := 0
	pending := only
	// suspects are items found drifting on one settled reading: the drift is
	// confirmed only by a second settled reading at the same version with
	// the same differences (a record held up longer than Settle on its way
	// to the counters or the archive shows once, not twice).
	suspects := map[Item]suspicion{}
	// late are the items read once more past the deadline to confirm a
	// drift; unsettled, those that kept moving.
	late, unsettled := map[Item]bool{}, map[Item]bool{}
	transit := map[string]order{}
	for round := 1; ; round++ {
		rep.Rounds = round
		// Writes older than cutoff have reached the counters before the
		// first reading began; a repair of this round holds every change
		// made before watermark and none made after.
		start := time.Now()
		cutoff := clock.Format(start.Add(-a.cfg.Settle))
		watermark := start.Add(-a.cfg.Settle / 2).Unix()
		first, err := a.readItems(ctx, pending)
		if err != nil {
			return rep, err
		}
		if a.cfg.BeforeSource != nil {
			a.cfg.BeforeSource(round)
		}
		src, err := a.source(ctx, pending, arch, transit)
		if err != nil {
			return rep, err
		}
		rep.Orders, rep.ArchivedOrders, rep.Reviews, rep.Problems = src.orders, src.archived, src.reviews, src.problems
		second, err := a.readItems(ctx, keys(first))
		if err != nil {
			return rep, err
		}
		next := map[Item]bool{}
		for _, it := range sortedItems(first) {
			r1 := first[it]
			r2, ok := second[it]
			if !ok {
				delete(suspects, it)
				continue // deleted meanwhile: nothing left to count on
			}
			if r2.version != r1.version || src.newest[it] >= cutoff {
				delete(suspects, it)
				next[it] = true // records may be in flight: judge it later
				continue
			}
			diffs := compare(it, r1, src.counts[it])
			if len(diffs) == 0 {
				delete(suspects, it)
				judged++
				continue
			}
			if prev, ok := suspects[it]; !ok || prev.version != r1.version || !sameDiffs(prev.diffs, diffs) {
				suspects[it] = suspicion{version: r1.version, diffs: diffs}
				next[it] = true
				continue
			}
			delete(suspects, it)
			if a.cfg.Repair && len(src.problems) == 0 {
				done, err := a.repair(ctx, it, r1.version, watermark, diffs)
				if err != nil {
					return rep, err
				}
				if !done {
					next[it] = true // moved since it was judged: judge it again
					continue
				}
				for i := range diffs {
					diffs[i].Repaired = true
				}
			}
			judged++
			rep.Drift = append(rep.Drift, diffs...)
		}
		a.cfg.Progress.Note("round %d: %d items read, %d judged, %d to read again", round, len(first), judged, len(next))
		if len(next) == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			// Past the deadline, an item that kept moving is unsettled; one
			// that drifted on a settled reading still gets the one reading
			// that confirms it: a slow round (a big table, a long settle) is
			// not movement.
			confirm := map[Item]bool{}
			for it := range next {
				if _, suspect := suspects[it]; suspect && !late[it] {
					confirm[it], late[it] = true, true
				} else {
					unsettled[it] = true
				}
			}
			if len(confirm) == 0 {
				break
			}
			next = confirm
		}
		pending = next
	}
	rep.Unsettled = sortedItems(unsettled)
	rep.Items = judged + len(rep.Unsettled)
	return rep, nil
}

type suspicion struct {
	version int64
	diffs   []Drift
}

func sameDiffs(a, b []Drift) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// compare returns the counters of it whose stored value differs from the
// computed one.
func compare(it Item, r reading, computed map[string]int64) []Drift {
	var out []Drift
	for _, c := range Counters[it.Kind] {
		if r.counts[c] != computed[c] {
			out = append(out, Drift{Item: it, Counter: c, Stored: r.counts[c], Computed: computed[c]})
		}
	}
	return out
}

func keys[V any](m map[Item]V) map[Item]bool {
	out := make(map[Item]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func sortedItems[V any](m map[Item]V) []Item {
	out := make([]Item, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind > out[j].Kind // users first
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errNotNumber is returned for a counter attribute that is not an integer.
var errNotNumber = errors.New("not an integer")

func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, errNotNumber)
	}
	return n, nil
}
