// Package audit checks the counters of docs/contract.md#3-counters fact by fact against the
// source of truth (the orders and reviews tables, the orders archive in S3
// and the batches the mappings gave up on in the failure bucket), reports
// every counter that differs, and, when asked, repairs it while traffic and
// the stream processors run.
//
// The counters processor writes, with every fact it applies (an order placed
// or cancelled, a review version counted in or taken out), a marker keyed by
// the fact that holds the fact's effects, in the same transaction as the
// counters (docs/counters.md). The audit reads the markers, then the source,
// and decides per fact:
//
//   - a fact the source proves and no marker holds is missing: a repair folds
//     it in through the processor's own conditional transaction
//     (counting.Fold), so that the fold and a record of the fact still on its
//     way contend for one key and the fact is applied once, whichever comes
//     first. A fact whose record waits in the failure bucket is on its way
//     (make replay applies it) and left alone;
//   - a marked fact is never taken out: a marker is written only with its
//     fact's effects, from a real record or a proved fact;
//   - the residual, a counter minus the effects of the markers of its item,
//     is what something other than the processor wrote. It is judged only
//     when the item's version did not move across the reading of the
//     markers, and corrected conditionally on that version.
//
// Nothing depends on a clock: Settle only gives a missing fact's record
// time to arrive before the report calls it drift.
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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/ops/progress"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/tables"
)

// DB is the part of the DynamoDB client the audit uses.
type DB interface {
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Archive is the part of the S3 client the audit uses to read the archive
// (and the failure bucket), and to keep the archive's digest.
type Archive interface {
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Config configures an Auditor.
type Config struct {
	DB DB
	S3 Archive
	// Tables are the names of the tables the audit reads: users, products,
	// orders, reviews and the counters' markers (counter-events).
	Tables tables.Names
	// Bucket is the archive bucket (ARCHIVE_BUCKET).
	Bucket string
	// FailureBucket, when set, is read for the batches not replayed yet:
	// the archiver's orders are on their way to the archive, the counters'
	// facts on their way to the counters.
	FailureBucket string
	// Settle is how long a missing fact is given for its record to arrive
	// before it is reported as drift (default 5 s). It changes the report,
	// never what a repair writes.
	Settle time.Duration
	// MaxWait bounds how long items whose version keeps moving across the
	// reading of the markers are read again before they are reported
	// unsettled. Default 2 min.
	MaxWait time.Duration
	// Segments is the number of parallel scan segments per table (default 4).
	Segments int
	// Repair folds in the missing facts and corrects residuals.
	Repair bool
	// NoDigest reads every archive object whole and leaves the archive's
	// digest (DigestPrefix) alone.
	NoDigest bool
	// Progress, when set, counts what was read.
	Progress *progress.Meter
	// BeforeSource, when set, runs in each round between the reading of the
	// markers and the reading of the source (drills use it to put records
	// in flight at the worst moment).
	BeforeSource func(round int)
	// BeforeMarkers, when set, runs once between the first reading of the
	// counter items and the first reading of the markers (drills use it to
	// apply a fact that reading missed).
	BeforeMarkers func()
}

// Auditor audits and repairs counters.
type Auditor struct{ cfg Config }

// New returns an Auditor.
func New(cfg Config) *Auditor {
	if cfg.Settle < 0 {
		cfg.Settle = 0
	}
	if cfg.Settle == 0 {
		cfg.Settle = 5 * time.Second
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
type Kind = facts.Kind

// Kinds of counter items.
const (
	User    = facts.User
	Product = facts.Product
)

// Counters lists the counters of each kind, as stored (docs/contract.md#3-counters; the
// product's ratingAverage is ratingTotal / reviewCount).
var Counters = facts.Counters

// Item names one counter item: a user or a product.
type Item = facts.Item

// Drift is one counter whose stored value differs from the source.
type Drift struct {
	Item     Item
	Counter  string
	Stored   int64
	Computed int64
	// Repaired: the missing facts were folded in and the residual taken
	// out; the counter now holds Computed plus whatever came since.
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
	// Orders, ArchivedOrders and Reviews are what the source held.
	Orders, ArchivedOrders, Reviews int
	// ArchiveObjects is how many archive objects there are, ArchiveRead how
	// many of them were downloaded (the others were known by the digest,
	// their facts all marked).
	ArchiveObjects, ArchiveRead int
	// Markers is how many facts the counters' markers hold.
	Markers int
	// Missing is how many facts the source proves that no marker holds
	// (repaired: folded in), OnTheirWay how many of those wait in the
	// failure bucket for make replay (not drift).
	Missing, OnTheirWay int
	// Rounds is how many readings of the markers it took.
	Rounds int
	Drift  []Drift
	// Unsettled items kept moving until MaxWait: not judged.
	Unsettled []Item
	Problems  []Problem
	// Rewritten are the counters that held no integer, which the repair
	// set to the sum of their markers (the item was then judged as any).
	Rewritten []Rewrite
}

// Rewrite is a counter that held no integer, set by the repair.
type Rewrite struct {
	Item    Item
	Counter string
	Stored  string // as DynamoDB holds it
	Set     int64
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
// repaired), 1 otherwise: drift remains, items could not be judged, the
// source had input it could not read, or facts wait in the failure bucket
// (the counters agree only once make replay has applied them).
func (r Report) ExitCode() int {
	if len(r.Remaining()) == 0 && len(r.Unsettled) == 0 && len(r.Problems) == 0 && r.OnTheirWay == 0 {
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
	for _, rw := range r.Rewritten {
		fmt.Fprintf(w, "rewritten: %s %s held %s, not an integer: set to %d, the sum of its markers, then judged\n", rw.Item, rw.Counter, rw.Stored, rw.Set)
	}
	for _, it := range r.Unsettled {
		fmt.Fprintf(w, "unsettled (kept moving, not judged): %s\n", it)
	}
	if r.OnTheirWay > 0 {
		fmt.Fprintf(w, "audit: %d facts wait in the failure bucket (on their way: their counters agree once make replay applies them): run make replay\n", r.OnTheirWay)
	}
	repaired := len(r.Drift) - len(r.Remaining())
	fmt.Fprintf(w, "audit: archive: %d objects, %d downloaded (the others known by the digest, their facts all marked)\n", r.ArchiveObjects, r.ArchiveRead)
	_, err := fmt.Fprintf(w, "audit: %d items, %d orders in the table, %d archived, %d reviews, %d markers, %d rounds: %d facts missing, %d counters differ, %d repaired, %d unsettled, %d input problems\n",
		r.Items, r.Orders, r.ArchivedOrders, r.Reviews, r.Markers, r.Rounds, r.Missing-r.OnTheirWay, len(r.Drift), repaired, len(r.Unsettled), len(r.Problems))
	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "audit: the source has input it could not read: facts it holds may be missing from the computation")
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
	// bad are the counters (and "version") whose stored values are not
	// integers (a hand edit, a faulty backfill): the item cannot be judged
	// on this reading.
	bad map[string]types.AttributeValue
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

// errNotNumber is returned for a counter attribute that is not an integer.
var errNotNumber = errors.New("not an integer")

func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, errNotNumber)
	}
	return n, nil
}
