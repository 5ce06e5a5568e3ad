package audit_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/failures"
)

func run(t *testing.T, a *audit.Auditor) audit.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := a.Run(ctx)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	var out bytes.Buffer
	rep.Write(&out)
	t.Logf("report:\n%s", out.String())
	return rep
}

// archiveKeys lists the orders archive.
func archiveKeys(t *testing.T, f *fixture) []string { return listKeys(t, f, "orders/") }

// digestKeys lists the archive digest's objects.
func digestKeys(t *testing.T, f *fixture) []string { return listKeys(t, f, audit.DigestPrefix) }

// listKeys lists the archive bucket's keys under prefix.
func listKeys(t *testing.T, f *fixture, prefix string) []string {
	t.Helper()
	out, err := f.sys.S3().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(envcontract.LocalArchiveBucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// TestAudit runs the audit's cases one after the other on one system and one
// workload (each case leaves the counters exact for the next).
func TestAudit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	us, ps := f.workload()
	for _, c := range []struct {
		name string
		run  func(*testing.T, *fixture, []string, []string)
	}{
		{"AgreesAndCountsArchivedOrders", agreesAndCountsArchivedOrders},
		{"ArchiveDigestSparesMarkedObjects", archiveDigestSparesMarkedObjects},
		{"SealedArchiveDaysAreNotListed", sealedArchiveDaysAreNotListed},
		{"ArchiveDuplicatesCountOnce", archiveDuplicatesCountOnce},
		{"RecordsInFlightAreNotDrift", recordsInFlightAreNotDrift},
		{"DriftOffsetByAFactAppliedMeanwhileIsFound", driftOffsetByAFactAppliedMeanwhileIsFound},
		{"HalfATransactionInTheMarkersIsNotDrift", halfATransactionInTheMarkersIsNotDrift},
		{"AMarkerNotVisibleYetIsNotDrift", aMarkerNotVisibleYetIsNotDrift},
		{"ReportsDriftThenRepairsIt", reportsDriftThenRepairsIt},
		{"UnreadableCountersAreReportedThenRewritten", unreadableCountersAreReportedThenRewritten},
		{"StoppedRepairIsNotDrift", stoppedRepairIsNotDrift},
		{"SlowFirstRoundStillRepairs", slowFirstRoundStillRepairs},
		{"SlowFirstRoundWithAMovedDriftStillRepairs", slowFirstRoundWithAMovedDriftStillRepairs},
		{"RecountRepairsOnlyTheNamedItems", recountRepairsOnlyTheNamedItems},
		{"UnreadableArchiveObjectFailsTheAudit", unreadableArchiveObjectFailsTheAudit},
	} {
		if !t.Run(c.name, func(t *testing.T) {
			f.t = t
			c.run(t, f, us, ps)
		}) {
			return
		}
	}
}

// unreadableCountersAreReportedThenRewritten: a counter stored as text,
// and one stored as a number that is no integer (hand edits), stopped the
// whole audit with exit 2 ("not an integer"), so nothing was judged and
// nothing could be repaired. The item is now a problem (exit 1), the rest is
// judged, and a repair sets its counters to the sum of their markers and
// judges it as any other: the counters end exact.
func unreadableCountersAreReportedThenRewritten(t *testing.T, f *fixture, us, ps []string) {
	u := user(us[1])
	if _, err := f.sys.DynamoDB().UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(f.tables().Users), Key: map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: us[1]}},
		UpdateExpression:          aws.String("SET orderCount = :s, lifetimeSpendCents = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "lots"}, ":n": &types.AttributeValueMemberN{Value: "2.5"}},
	}); err != nil {
		t.Fatal(err)
	}
	f.tamper(user(us[2]), "orderCount", 1) // drift elsewhere is still found

	rep := run(t, f.auditor(audit.Config{}))
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Err, `orderCount holds "lots"`) || !strings.Contains(rep.Problems[0].Err, "lifetimeSpendCents holds 2.5") {
		t.Errorf("problems: %+v; want one naming both counters of %s", rep.Problems, u)
	}
	if len(rep.Drift) != 1 || rep.Drift[0].Item != user(us[2]) || rep.ExitCode() != 1 {
		t.Errorf("drift %+v, exit %d; want the other user's drift and 1", rep.Drift, rep.ExitCode())
	}

	rep = run(t, f.auditor(audit.Config{Repair: true}))
	if len(rep.Rewritten) != 2 || rep.Rewritten[0].Item != u || rep.ExitCode() != 0 || len(rep.Problems) != 0 {
		t.Errorf("repair: rewritten %+v, problems %+v, exit %d; want both counters rewritten and 0", rep.Rewritten, rep.Problems, rep.ExitCode())
	}
	f.checkExact()
	if rep := run(t, f.auditor(audit.Config{})); len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Errorf("after the repair: drift %+v, exit %d; want none and 0", rep.Drift, rep.ExitCode())
	}
}

func agreesAndCountsArchivedOrders(t *testing.T, f *fixture, us, ps []string) {
	if len(archiveKeys(t, f)) == 0 {
		t.Fatal("got no archive object, want the delivered orders archived")
	}
	f.checkExact() // the processors did their job: the model and the tables agree

	rep := run(t, f.auditor(audit.Config{}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Errorf("got drift %+v exit %d, want none and 0", rep.Drift, rep.ExitCode())
	}
	if rep.ArchivedOrders != 9 || rep.Orders != 4 {
		t.Errorf("got %d orders in the table and %d archived, want 4 and 9", rep.Orders, rep.ArchivedOrders)
	}
	if want := len(f.model.counts); rep.Items != want {
		t.Errorf("got %d items judged, want %d", rep.Items, want)
	}

	// The same audit, and its repair, over an empty archive: the archived
	// orders' facts are marked, and a marked fact is never taken out (an
	// audit by sums took them out of the counters).
	if _, err := f.sys.S3().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("empty")}); err != nil {
		t.Fatal(err)
	}
	rep = run(t, f.auditor(audit.Config{Bucket: "empty", Repair: true}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 || rep.Missing != 0 {
		t.Errorf("without the archive: got drift %+v, %d facts missing, exit %d; want none and 0", rep.Drift, rep.Missing, rep.ExitCode())
	}
	f.checkExact()
}

func reportsDriftThenRepairsIt(t *testing.T, f *fixture, us, ps []string) {
	f.tamper(user(us[1]), "orderCount", 2)
	f.tamper(user(us[2]), "lifetimeSpendCents", -700)
	f.tamper(product(ps[0]), "unitsSold", -3)
	f.tamper(product(ps[2]), "ratingTotal", 1)
	f.tamper(product(ps[2]), "reviewCount", 1)
	want := []audit.Drift{
		{Item: user(us[1]), Counter: "orderCount", Stored: f.model.get(user(us[1]), "orderCount") + 2, Computed: f.model.get(user(us[1]), "orderCount")},
		{Item: user(us[2]), Counter: "lifetimeSpendCents", Stored: f.model.get(user(us[2]), "lifetimeSpendCents") - 700, Computed: f.model.get(user(us[2]), "lifetimeSpendCents")},
		{Item: product(ps[0]), Counter: "unitsSold", Stored: f.model.get(product(ps[0]), "unitsSold") - 3, Computed: f.model.get(product(ps[0]), "unitsSold")},
		{Item: product(ps[2]), Counter: "reviewCount", Stored: f.model.get(product(ps[2]), "reviewCount") + 1, Computed: f.model.get(product(ps[2]), "reviewCount")},
		{Item: product(ps[2]), Counter: "ratingTotal", Stored: f.model.get(product(ps[2]), "ratingTotal") + 1, Computed: f.model.get(product(ps[2]), "ratingTotal")},
	}
	sortDrift(want)

	rep := run(t, f.auditor(audit.Config{}))
	sortDrift(rep.Drift)
	if diff := cmp.Diff(want, rep.Drift); diff != "" || rep.ExitCode() != 1 {
		t.Fatalf("audit: exit %d (want 1), drift (-want +got):\n%s", rep.ExitCode(), diff)
	}
	var out bytes.Buffer
	rep.Write(&out)
	line := fmt.Sprintf("%s orderCount %d %d drift", user(us[1]), want[len(want)-2].Stored, want[len(want)-2].Computed)
	found := false
	for _, l := range strings.Split(out.String(), "\n") {
		found = found || strings.Join(strings.Fields(l), " ") == line
	}
	if !found {
		t.Errorf("report %q has no line %q (item, counter, stored, computed)", out.String(), line)
	}
	_, v := f.stored(product(ps[0]))

	rep = run(t, f.auditor(audit.Config{Repair: true}))
	for i := range want {
		want[i].Repaired = true
	}
	sortDrift(rep.Drift)
	if diff := cmp.Diff(want, rep.Drift); diff != "" || rep.ExitCode() != 0 {
		t.Fatalf("repair: exit %d (want 0), drift (-want +got):\n%s", rep.ExitCode(), diff)
	}
	f.checkExact()
	if _, v2 := f.stored(product(ps[0])); v2 != v+1 {
		t.Errorf("repaired product version: got %d, want %d (one write)", v2, v+1)
	}
	_, uv := f.stored(user(us[0]))
	rep = run(t, f.auditor(audit.Config{Repair: true}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Errorf("after repair: got drift %+v exit %d, want none and 0", rep.Drift, rep.ExitCode())
	}
	if _, uv2 := f.stored(user(us[0])); uv2 != uv {
		t.Errorf("a right counter item was written: version %d, then %d", uv, uv2)
	}
}

// slowFirstRoundStillRepairs: a first round longer than MaxWait (a stage's
// size: the whole archive and every item read) still gets the second
// reading that confirms a drift, and repairs it; before, every drift of such
// an audit was reported "unsettled" though nothing moved.
func slowFirstRoundStillRepairs(t *testing.T, f *fixture, us, ps []string) {
	f.tamper(user(us[3]), "orderCount", 4)
	want := f.model.get(user(us[3]), "orderCount")
	rep := run(t, f.auditor(audit.Config{Repair: true, MaxWait: time.Millisecond, BeforeSource: func(round int) {
		if round == 1 {
			time.Sleep(100 * time.Millisecond)
		}
	}}))
	if rep.ExitCode() != 0 || len(rep.Unsettled) != 0 || len(rep.Drift) != 1 || !rep.Drift[0].Repaired {
		t.Fatalf("slow first round: exit %d, unsettled %v, drift %+v; want the drift confirmed and repaired", rep.ExitCode(), rep.Unsettled, rep.Drift)
	}
	if got, _ := f.stored(user(us[3])); got["orderCount"] != want {
		t.Errorf("orderCount after the repair: got %d, want %d", got["orderCount"], want)
	}
	f.checkExact()
}

// A drift on an item that moved in the first round is seen in the second
// and confirmed in a third, which runs past MaxWait for it.
func slowFirstRoundWithAMovedDriftStillRepairs(t *testing.T, f *fixture, us, ps []string) {
	f.tamper(product(ps[2]), "unitsSold", 3)
	rep := run(t, f.auditor(audit.Config{Repair: true, MaxWait: time.Millisecond,
		BeforeMarkers: func() {
			f.mustOrder(us[1], []string{ps[2]}, []int{1})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := f.sys.Poller.Idle(ctx); err != nil {
				t.Error(err)
			}
		},
		BeforeSource: func(round int) {
			if round == 1 {
				time.Sleep(100 * time.Millisecond)
			}
		}}))
	if rep.ExitCode() != 0 || len(rep.Unsettled) != 0 || len(rep.Drift) != 1 || !rep.Drift[0].Repaired {
		t.Fatalf("a moved drift after a slow first round: exit %d, unsettled %v, drift %+v, %d rounds; want it confirmed and repaired", rep.ExitCode(), rep.Unsettled, rep.Drift, rep.Rounds)
	}
	f.idle()
	f.checkExact()
}

func sortDrift(ds []audit.Drift) {
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].Item != ds[j].Item {
			return ds[i].Item.String() < ds[j].Item.String()
		}
		return ds[i].Counter < ds[j].Counter
	})
}

// A counter 3 units off, read just before an order of 3 units lands on it:
// the markers then account for what the reading holds, and the residual is
// 0 although the counter is 3 off. The item moved across the markers'
// reading, so it must be read again, not judged clean.
func driftOffsetByAFactAppliedMeanwhileIsFound(t *testing.T, f *fixture, us, ps []string) {
	f.tamper(product(ps[2]), "unitsSold", 3)
	var hooked atomic.Int32
	rep := run(t, f.auditor(audit.Config{Repair: true, BeforeMarkers: func() {
		hooked.Add(1)
		f.mustOrder(us[1], []string{ps[2]}, []int{3})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.sys.Poller.Idle(ctx); err != nil {
			t.Error(err)
		}
	}}))
	if hooked.Load() != 1 {
		t.Fatal("the hook did not run")
	}
	found := false
	for _, d := range rep.Drift {
		if d.Item == product(ps[2]) && d.Counter == "unitsSold" && d.Stored-d.Computed == 3 && d.Repaired {
			found = true
		}
	}
	if !found {
		t.Errorf("got drift %+v, want %s unitsSold 3 over, repaired", rep.Drift, product(ps[2]))
	}
	f.idle()
	f.checkExact()
}

// halfScan is the DynamoDB client with the first reading of the markers cut
// by a transaction: the scan had passed one of the transaction's markers
// when it committed and reads the others after. AWS allows it (a Scan is
// read-committed, not isolated from a transaction), and a table this small,
// read in one page per segment, never shows it by itself.
type halfScan struct {
	audit.DB
	markers string
	// cut runs once, when the first reading starts (a drill commits a
	// transaction there), and returns the key of the marker that reading
	// leaves out.
	cut    func() string
	once   sync.Once
	passed string
	// reading is true during the first reading of the markers.
	reading atomic.Bool
	hidden  atomic.Int32
}

func (h *halfScan) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	cut := aws.ToString(in.TableName) == h.markers && h.reading.Load()
	if cut {
		h.once.Do(func() { h.passed = h.cut() })
	}
	out, err := h.DB.Scan(ctx, in, opts...)
	if err != nil || !cut {
		return out, err
	}
	kept := out.Items[:0]
	for _, item := range out.Items {
		if k, ok := item[facts.KeyAttr].(*types.AttributeValueMemberS); ok && k.Value == h.passed {
			h.hidden.Add(1)
			continue
		}
		kept = append(kept, item)
	}
	out.Items = kept
	return out, nil
}

// A review replaced with the same rating is the pair out(n), in(n+1): its
// transaction's effects cancel on the user and on the product. A reading of
// the markers that sees out(n) and not in(n+1) finds 1 review fewer than the
// counters hold; the items must be read again, not corrected by 1.
func halfATransactionInTheMarkersIsNotDrift(t *testing.T, f *fixture, us, ps []string) {
	rating, err := f.reviewRating(ps[0], us[0])
	if err != nil || rating == 0 {
		t.Fatalf("want the workload's review of %s by %s: rating %d, %v", ps[0], us[0], rating, err)
	}
	db := &halfScan{DB: f.sys.DynamoDB(), markers: f.tables().CounterEvents, cut: func() string {
		if err := f.review(ps[0], us[0], rating); err != nil {
			t.Error(err)
		}
		f.idle()
		out, err := f.sys.DynamoDB().GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: aws.String(f.tables().Reviews), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				"productId": &types.AttributeValueMemberS{Value: ps[0]},
				"userId":    &types.AttributeValueMemberS{Value: us[0]},
			},
		})
		var r facts.Review
		if err == nil {
			err = attributevalue.UnmarshalMap(out.Item, &r)
		}
		if err != nil {
			t.Error(err)
		}
		return facts.InKey(r.Instance(), r.Version)
	}}
	db.reading.Store(true)
	rep := run(t, f.auditor(audit.Config{DB: db, Repair: true, BeforeSource: func(int) { db.reading.Store(false) }}))
	if db.hidden.Load() != 1 {
		t.Fatalf("the first reading of the markers left out %d markers, want the new in(n+1)", db.hidden.Load())
	}
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Errorf("got drift %+v, exit %d; want none and 0 (the items moved across the reading)", rep.Drift, rep.ExitCode())
	}
	f.idle()
	f.checkExact()
}

// AWS makes a transaction's writes visible item by item, read-committed, not
// all at one instant: a reading of the counters can see an order's effects
// while a later scan of the markers does not see its marker yet. The item's
// version then holds still across the reading, and the residual is the
// order's effects: it must be confirmed by another reading of the markers
// before anything is corrected.
func aMarkerNotVisibleYetIsNotDrift(t *testing.T, f *fixture, us, ps []string) {
	o := f.mustOrder(us[2], []string{ps[1]}, []int{2})
	f.idle()
	key := facts.Placed(facts.Order{OrderID: o.OrderID}).Key
	db := &halfScan{DB: f.sys.DynamoDB(), markers: f.tables().CounterEvents, cut: func() string { return key }}
	db.reading.Store(true)
	rep := run(t, f.auditor(audit.Config{DB: db, Repair: true, BeforeSource: func(int) { db.reading.Store(false) }}))
	if db.hidden.Load() != 1 {
		t.Fatalf("the first reading of the markers left out %d markers, want %s", db.hidden.Load(), key)
	}
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 || rep.Missing != 0 {
		t.Errorf("got drift %+v, exit %d, %d facts missing; want none (the marker was there, not yet visible)", rep.Drift, rep.ExitCode(), rep.Missing)
	}
	f.idle()
	f.checkExact()
}

func recordsInFlightAreNotDrift(t *testing.T, f *fixture, us, ps []string) {
	// Between the first reading of the counters and the reading of the
	// tables, new orders and reviews land: the tables count them, the
	// counters do not yet.
	var hooked atomic.Int32
	a := f.auditor(audit.Config{Repair: true, BeforeSource: func(round int) {
		if round != 1 {
			return
		}
		hooked.Add(1)
		f.mustOrder(us[0], []string{ps[0], ps[1]}, []int{3, 1})
		f.mustOrder(us[3], []string{ps[0]}, []int{2})
		if err := f.review(ps[3], us[0], 2); err != nil {
			t.Error(err)
		}
		// The counters read before this hook stay behind what the tables
		// now hold; the processors catch up before the tables are read, so
		// the settle's second reading finds them whatever the machine's
		// load (the settle is 2 s).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.sys.Poller.Idle(ctx); err != nil {
			t.Error(err)
		}
	}})
	rep := run(t, a)
	if hooked.Load() != 1 {
		t.Fatal("the hook did not run")
	}
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 || rep.Missing != 0 {
		t.Errorf("got drift %+v, exit %d, %d facts missing; want none, 0 and none (their records arrived within the settle)", rep.Drift, rep.ExitCode(), rep.Missing)
	}
	f.idle()
	f.checkExact()
}

func TestRepairUnderOrderLoad(t *testing.T) {
	t.Parallel()
	f := newFixtureRetention(t, time.Hour)
	us, ps := f.workload()
	// Drift on items the load hits and on items it does not.
	f.tamper(user(us[0]), "orderCount", 3)
	f.tamper(product(ps[0]), "unitsSold", 4)
	f.tamper(user(us[3]), "lifetimeSpendCents", 999)
	f.tamper(product(ps[3]), "ratingTotal", -2)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var placed, cancelled atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				u := us[rnd.IntN(3)] // us[3] is left alone
				p := ps[rnd.IntN(3)]
				o, err := f.order(u, []string{p}, []int{1 + rnd.IntN(3)})
				if err != nil {
					t.Errorf("place order: %v", err)
					return
				}
				placed.Add(1)
				if rnd.IntN(4) == 0 {
					if err := f.cancel(o); err != nil {
						t.Errorf("cancel: %v", err)
						return
					}
					cancelled.Add(1)
				}
				if rnd.IntN(5) == 0 {
					if err := f.review(p, u, 1+rnd.IntN(5)); err != nil {
						t.Errorf("review: %v", err)
						return
					}
				}
			}
		})
	}
	time.AfterFunc(4*time.Second, stop)
	time.Sleep(300 * time.Millisecond)
	rep := run(t, f.auditor(audit.Config{Repair: true}))
	loadOver := ctx.Err() != nil
	stop()
	wg.Wait()
	t.Logf("load: %d orders placed, %d cancelled; audit over before the load: %v", placed.Load(), cancelled.Load(), !loadOver)
	if placed.Load() < 10 {
		t.Fatalf("got %d orders during the audit, want a load", placed.Load())
	}
	if rep.ExitCode() != 0 || len(rep.Remaining()) != 0 {
		t.Errorf("audit+repair under load: exit %d, remaining %+v, unsettled %v", rep.ExitCode(), rep.Remaining(), rep.Unsettled)
	}
	repaired := map[audit.Item]bool{}
	for _, d := range rep.Drift {
		repaired[d.Item] = true
	}
	for _, it := range []audit.Item{user(us[0]), product(ps[0]), user(us[3]), product(ps[3])} {
		if !repaired[it] {
			t.Errorf("%s: not repaired (drift %+v)", it, rep.Drift)
		}
	}
	// Other items may be reported too: facts whose records were still on
	// their way when the settle ended are folded in, and their records
	// dropped on the markers when they come; checkExact below holds them.
	f.idle()
	f.checkExact()
	if rep := run(t, f.auditor(audit.Config{})); rep.ExitCode() != 0 {
		t.Errorf("after the load: exit %d, drift %+v", rep.ExitCode(), rep.Drift)
	}
}

func recountRepairsOnlyTheNamedItems(t *testing.T, f *fixture, us, ps []string) {
	f.tamper(user(us[1]), "reviewCount", 1)
	f.tamper(product(ps[1]), "unitsSold", 2)
	f.tamper(user(us[2]), "orderCount", 1) // not named
	rep, err := f.auditor(audit.Config{Repair: true}).Recount(context.Background(), []audit.Item{user(us[1]), product(ps[1]), user(us[0])})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Items != 3 || len(rep.Drift) != 2 || rep.ExitCode() != 0 {
		t.Fatalf("recount: got %d items, drift %+v, exit %d; want 3 items, 2 counters repaired, 0", rep.Items, rep.Drift, rep.ExitCode())
	}
	if got, _ := f.stored(user(us[2])); got["orderCount"] != f.model.get(user(us[2]), "orderCount")+1 {
		t.Errorf("an item not named was changed: orderCount %d", got["orderCount"])
	}
	if got, _ := f.stored(product(ps[1])); got["unitsSold"] != f.model.get(product(ps[1]), "unitsSold") {
		t.Errorf("unitsSold of %s: got %d, want %d", ps[1], got["unitsSold"], f.model.get(product(ps[1]), "unitsSold"))
	}
}

func gz(lines ...string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for _, l := range lines {
		io.WriteString(zw, l+"\n")
	}
	zw.Close()
	return b.Bytes()
}

func (f *fixture) put(key string, body []byte) {
	f.t.Helper()
	if _, err := f.sys.S3().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(envcontract.LocalArchiveBucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) get(key string) []byte {
	f.t.Helper()
	out, err := f.sys.S3().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(envcontract.LocalArchiveBucket), Key: aws.String(key)})
	if err != nil {
		f.t.Fatal(err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return b
}

func archiveDuplicatesCountOnce(t *testing.T, f *fixture, us, ps []string) {
	keys := archiveKeys(t, f)
	// A line in two objects (a resumed batch), and an order that is both in
	// the table and in the archive (TTL removed it while the table was read).
	f.put("orders/year=2031/month=01/day=01/copy.jsonl.gz", f.get(keys[0]))
	o := f.mustOrder(us[1], []string{ps[0]}, []int{1})
	line := fmt.Sprintf(`{"eventId":"e-table","table":"orders","keys":{},"removedAt":"2031-01-01T00:00:00Z","item":{"userId":%q,"orderId":%q,"status":"PLACED","totalCents":%d,"lines":[{"productId":%q,"quantity":1}]}}`,
		us[1], o.OrderID, o.TotalCents, o.Lines[0].ProductID)
	f.put("orders/year=2031/month=01/day=02/also-in-table.jsonl.gz", gz(line))
	f.idle()
	rep := run(t, f.auditor(audit.Config{}))
	if len(rep.Drift) != 0 || rep.ExitCode() != 0 || rep.ArchivedOrders != 9 {
		t.Errorf("got drift %+v, exit %d, %d archived; want none, 0, 9", rep.Drift, rep.ExitCode(), rep.ArchivedOrders)
	}
}

func TestCorruptArchiveInputIsReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	us, _ := f.workload()
	good := f.get(archiveKeys(t, f)[0])
	zr, err := gzip.NewReader(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	f.put("orders/year=2031/month=01/day=01/lines.jsonl.gz", gz(
		`{"eventId":"e1","table":"orders","item":{"userId":"u9","orderId":"o9","status":"PLACED","totalCents":5,"lines":[{"productId":"p9","quantity":1}]}}`,
		`{"eventId":"e2","table":"orders","item":{"userId":`,
		`{"eventId":"e3","table":"carts","item":{}}`,
	))
	f.put("orders/year=2031/month=01/day=01/not-gzip.jsonl.gz", plain)
	truncated := good[:len(good)-6]
	f.put("orders/year=2031/month=01/day=01/truncated.jsonl.gz", truncated)
	f.tamper(user(us[1]), "orderCount", 1)

	rep := run(t, f.auditor(audit.Config{Repair: true}))
	type at struct {
		obj  string
		line int
	}
	var got []at
	for _, p := range rep.Problems {
		got = append(got, at{p.Where[strings.LastIndex(p.Where, "/")+1:], p.Line})
	}
	want := []at{{"lines.jsonl.gz", 2}, {"lines.jsonl.gz", 3}, {"not-gzip.jsonl.gz", 0}}
	if len(got) != 4 || !cmp.Equal(got[:3], want, cmp.AllowUnexported(at{})) || got[3].obj != "truncated.jsonl.gz" {
		t.Errorf("problems: got %v, want %v and truncated.jsonl.gz", got, want)
	}
	// The audit went on: the tampered counter is found and repaired (a
	// residual against the markers needs no archive), the readable line
	// counted (user u9 does not exist, so it changes nothing), and the exit
	// is 1: facts the unreadable lines hold may be missing.
	if len(rep.Drift) != 1 || rep.Drift[0].Item != user(us[1]) || !rep.Drift[0].Repaired || rep.ExitCode() != 1 {
		t.Errorf("got drift %+v exit %d, want the tampered counter, repaired, and 1", rep.Drift, rep.ExitCode())
	}
	f.checkExact()
}

// failingGet is the local S3 with one object that cannot be fetched.
type failingGet struct {
	audit.Archive
	key string
}

func (s failingGet) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if aws.ToString(in.Key) == s.key {
		return nil, errors.New("AccessDenied: injected")
	}
	return s.Archive.GetObject(ctx, in, opts...)
}

func unreadableArchiveObjectFailsTheAudit(t *testing.T, f *fixture, us, ps []string) {
	key := archiveKeys(t, f)[0]
	// Without the digest: with it, an object whose facts are all marked is
	// not downloaded at all (TestArchiveDigest).
	_, err := f.auditor(audit.Config{S3: failingGet{f.sys.S3(), key}, NoDigest: true}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), key) {
		t.Errorf("got %v, want an error naming %s", err, key)
	}
}

// archiveDigestSparesMarkedObjects: a second audit downloads no archive
// object whose facts are all marked; an object with a fact whose marker is
// gone, one rewritten, and the objects of a day whose digest is unreadable
// are downloaded again, and the audit's findings are what a full read finds.
func archiveDigestSparesMarkedObjects(t *testing.T, f *fixture, us, ps []string) {
	ctx := context.Background()
	for _, k := range digestKeys(t, f) {
		if _, err := f.sys.S3().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(envcontract.LocalArchiveBucket), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	objects := archiveKeys(t, f)
	rep := run(t, f.auditor(audit.Config{}))
	if rep.ArchiveObjects != len(objects) || rep.ArchiveRead != len(objects) || len(digestKeys(t, f)) == 0 {
		t.Fatalf("first audit: %d objects, %d read, digest %v; want %d, %d and a digest", rep.ArchiveObjects, rep.ArchiveRead, digestKeys(t, f), len(objects), len(objects))
	}
	rep = run(t, f.auditor(audit.Config{}))
	if rep.ArchiveRead != 0 || rep.ArchivedOrders != 9 || len(rep.Drift) != 0 || rep.ExitCode() != 0 {
		t.Errorf("second audit: %d read, %d archived, drift %+v, exit %d; want 0, 9, none, 0", rep.ArchiveRead, rep.ArchivedOrders, rep.Drift, rep.ExitCode())
	}

	// A marker deleted by hand: its fact is missing again, proven only by
	// its archive object, which is read again; the repair is exact.
	zr, err := gzip.NewReader(bytes.NewReader(f.get(objects[0])))
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Item struct {
			OrderID string `json:"orderId"`
		} `json:"item"`
	}
	if err := json.NewDecoder(zr).Decode(&line); err != nil || line.Item.OrderID == "" {
		t.Fatalf("archive line: %+v, %v", line, err)
	}
	placed := facts.Placed(facts.Order{OrderID: line.Item.OrderID}).Key
	if _, err := f.sys.DynamoDB().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.tables().CounterEvents),
		Key: map[string]types.AttributeValue{facts.KeyAttr: &types.AttributeValueMemberS{Value: placed}}}); err != nil {
		t.Fatal(err)
	}
	rep = run(t, f.auditor(audit.Config{Repair: true}))
	if rep.ArchiveRead != 1 || rep.Missing != 1 || rep.ExitCode() != 0 {
		t.Errorf("marker deleted: %d read, %d missing, exit %d; want 1, 1, 0", rep.ArchiveRead, rep.Missing, rep.ExitCode())
	}
	f.checkExact()

	// An object rewritten (a blank line more) is read again.
	f.put(objects[0], gz(string(f.plain(objects[0])), ""))
	rep = run(t, f.auditor(audit.Config{}))
	if rep.ArchiveRead != 1 || len(rep.Drift) != 0 || rep.ExitCode() != 0 || rep.ArchivedOrders != 9 {
		t.Errorf("after a rewrite: %d read, drift %+v, exit %d, %d archived; want 1, none, 0, 9", rep.ArchiveRead, rep.Drift, rep.ExitCode(), rep.ArchivedOrders)
	}
	// A day's digest that cannot be read: that day's objects are read
	// again, the digest written anew.
	day := audit.DigestPrefix + path.Dir(objects[len(objects)-1]) + ".json.gz"
	inDay := 0
	for _, k := range objects {
		if path.Dir(k) == path.Dir(objects[len(objects)-1]) {
			inDay++
		}
	}
	f.put(day, []byte("not a digest"))
	rep = run(t, f.auditor(audit.Config{}))
	if rep.ArchiveRead != inDay || len(rep.Drift) != 0 || rep.ExitCode() != 0 || len(rep.Problems) != 0 {
		t.Errorf("corrupt digest %s: %d read, drift %+v, exit %d, problems %v; want %d, none, 0, none", day, rep.ArchiveRead, rep.Drift, rep.ExitCode(), rep.Problems, inDay)
	}
	if rep = run(t, f.auditor(audit.Config{})); rep.ArchiveRead != 0 {
		t.Errorf("then: %d read, want 0", rep.ArchiveRead)
	}
}

// listings counts the listings of an archive bucket's orders and keeps the
// last one's StartAfter.
type listings struct {
	audit.Archive
	bucket     string
	mu         sync.Mutex
	n          int
	startAfter string
}

func (l *listings) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	if aws.ToString(in.Bucket) == l.bucket && aws.ToString(in.Prefix) == "orders/" {
		l.mu.Lock()
		l.n++
		l.startAfter = aws.ToString(in.StartAfter)
		l.mu.Unlock()
	}
	return l.Archive.ListObjectsV2(ctx, in, o...)
}

// sealedArchiveDaysAreNotListed: the archive's objects copied under two
// days of January, and one left under today. The first audit lists them all
// and seals the days up to three days ago; the next lists only after the
// seal and still counts every object (the sealed days' from the digest). An
// object put by hand into a sealed day is not seen; a failure object
// discarded the next day moves the seal back before it, and it is.
func sealedArchiveDaysAreNotListed(t *testing.T, f *fixture, us, ps []string) {
	ctx := context.Background()
	c := f.sys.S3()
	const bucket, failuresBucket = "sealed-archive", "sealed-failures"
	for _, b := range []string{bucket, failuresBucket} {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	objects := archiveKeys(t, f)
	if len(objects) == 0 {
		t.Fatal("no archive object")
	}
	put := func(b, key string, body []byte) {
		t.Helper()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range objects {
		for day := 1; day <= 2; day++ { // the same orders: they count once
			put(bucket, fmt.Sprintf("orders/year=2026/month=01/day=%02d/%s", day, path.Base(k)), f.get(k))
		}
	}
	put(bucket, objects[0], f.get(objects[0])) // and one under today
	total := 2*len(objects) + 1
	l := &listings{Archive: c, bucket: bucket}
	auditor := func() *audit.Auditor {
		return f.auditor(audit.Config{Bucket: bucket, S3: l, FailureBucket: failuresBucket})
	}
	check := func(when string, rep audit.Report, objects int, startAfter string) {
		t.Helper()
		if rep.ExitCode() != 0 || len(rep.Drift) != 0 || rep.ArchivedOrders != 9 || rep.ArchiveObjects != objects || l.startAfter != startAfter {
			t.Errorf("%s: exit %d, drift %+v, %d archived, %d objects, listed after %q; want 0, none, 9, %d, after %q",
				when, rep.ExitCode(), rep.Drift, rep.ArchivedOrders, rep.ArchiveObjects, l.startAfter, objects, startAfter)
		}
	}
	rep := run(t, auditor())
	check("first audit", rep, total, "")
	sealed := "orders/" + time.Now().UTC().AddDate(0, 0, -3).Format("year=2006/month=01/day=02")
	if now := time.Now().UTC(); now.Hour() == 0 || now.Hour() == 23 {
		sealed = "" // S3's day and ours may differ: check only that a seal was set
	}
	rep = run(t, auditor())
	if sealed != "" {
		check("second audit", rep, total, sealed+"0")
	} else if l.startAfter == "" {
		t.Errorf("second audit listed everything, want only the days after the seal")
	}
	if rep.ArchiveRead != 0 {
		t.Errorf("second audit: %d objects downloaded, want 0", rep.ArchiveRead)
	}

	// By hand into a sealed day: not listed.
	put(bucket, "orders/year=2026/month=01/day=01/by-hand.jsonl.gz", f.get(objects[0]))
	rep = run(t, auditor())
	if rep.ArchiveObjects != total {
		t.Errorf("an object put into a sealed day: %d objects, want %d (not listed)", rep.ArchiveObjects, total)
	}
	// A failure object discarded on January 2 (its records may be of
	// January 1): the seal moves back and the days are listed again.
	key := failures.NewKey(failures.LocalMappingID("orders-archiver"), "shardId-1", time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)).String()
	put(failuresBucket, key, []byte("{}"))
	run(t, auditor()) // moves the seal back (the failure object is a problem of its own)
	rep = run(t, auditor())
	if rep.ArchiveObjects != total+1 || l.startAfter != "orders/year=2025/month=12/day=300" {
		t.Errorf("with a failure object of January 2: %d objects, listed after %q; want %d, after the seal of December 30", rep.ArchiveObjects, l.startAfter, total+1)
	}
}

// plain is an archive object's lines, decompressed.
func (f *fixture) plain(key string) []byte {
	f.t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(f.get(key)))
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		f.t.Fatal(err)
	}
	return bytes.TrimRight(b, "\n")
}

// stopAtWrite cancels its context at the first transaction, as Ctrl-C
// during a repair does, and lets the transaction go on.
type stopAtWrite struct {
	audit.DB
	stop context.CancelFunc
}

func (d stopAtWrite) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	d.stop()
	return d.DB.TransactWriteItems(context.WithoutCancel(ctx), in, opts...)
}

// stoppedRepairIsNotDrift: a repair stopped on its way (Ctrl-C) is an error
// (exit 2, "could not run"), not a report of drift left (exit 1); the next
// repair finishes it.
func stoppedRepairIsNotDrift(t *testing.T, f *fixture, us, ps []string) {
	// A fact whose marker is gone: the repair folds it in, in a transaction.
	o := f.mustOrder(us[0], []string{ps[0]}, []int{1})
	f.idle()
	if _, err := f.sys.DynamoDB().DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(f.tables().CounterEvents),
		Key: map[string]types.AttributeValue{facts.KeyAttr: &types.AttributeValueMemberS{Value: facts.Placed(facts.Order{OrderID: o.OrderID}).Key}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := f.auditor(audit.Config{Repair: true, DB: stopAtWrite{DB: f.sys.DynamoDB(), stop: cancel}}).Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("repair stopped at its first write: got %v, want context.Canceled", err)
	}
	rep := run(t, f.auditor(audit.Config{Repair: true}))
	if rep.ExitCode() != 0 {
		t.Fatalf("the repair after it: exit %d, drift %+v; want 0", rep.ExitCode(), rep.Drift)
	}
	f.checkExact()
}
