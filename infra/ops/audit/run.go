package audit

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/counters/counting"
	"github.com/shopstream/shopstream/infra/ops/scan"
	"github.com/shopstream/shopstream/shared/ddbcall"
	"github.com/shopstream/shopstream/shared/facts"
)

// markers is one reading of the marker table, held compactly: the audit of
// a stage reads tens of millions of markers, and a decoded marker with its
// effects takes about 2 KB. What the audit needs of them is which facts are
// marked, the sum of the marked effects per counter item, and, for review
// facts, enough to derive the other side of a pair (reviewFacts).
type markers struct {
	// keys are the marked facts, by a hash of their key (128 bits of
	// SHA-256: 16 bytes where a key takes 40 to 90).
	keys map[keyHash]struct{}
	// sums are the marked facts' effects, summed per counter item.
	sums map[Item]map[string]int64
	// reviews are the review facts' markers whose effects are a review's
	// (reviewSide); odd holds, whole, any other review marker.
	reviews map[string]reviewSide
	odd     map[string]facts.Effects
	// legacy markers are keyed by stream event and hold no effects (written
	// before markers were keyed by fact): they account for nothing, and the
	// residual of their items is what they counted.
	legacy int
}

func newMarkers() markers {
	return markers{keys: map[keyHash]struct{}{}, sums: map[Item]map[string]int64{},
		reviews: map[string]reviewSide{}, odd: map[string]facts.Effects{}}
}

// keyHash names a fact in markers.keys.
type keyHash [16]byte

func hashKey(k string) keyHash {
	sum := sha256.Sum256([]byte(k))
	return keyHash(sum[:16])
}

// has reports whether the fact with key k is marked.
func (m markers) has(k string) bool {
	_, ok := m.keys[hashKey(k)]
	return ok
}

// add takes in one marker of a fact.
func (m markers) add(f facts.Fact) {
	h := hashKey(f.Key)
	if _, ok := m.keys[h]; ok {
		return
	}
	m.keys[h] = struct{}{}
	for it, cs := range f.Effects {
		c := m.sums[it]
		if c == nil {
			c = map[string]int64{}
			m.sums[it] = c
		}
		for name, n := range cs {
			c[name] += n
		}
	}
	if k, ok := facts.ParseReviewKey(f.Key); ok {
		if s, ok := compactReview(k, f.Effects); ok {
			m.reviews[f.Key] = s
		} else {
			m.odd[f.Key] = f.Effects
		}
	}
}

// effects returns a review fact marker's effects.
func (m markers) effects(key string) facts.Effects {
	if s, ok := m.reviews[key]; ok {
		k, _ := facts.ParseReviewKey(key)
		return s.effects(k.In)
	}
	return m.odd[key]
}

// reviewSide is a review fact's marker whose effects are those of facts.In
// (or facts.Out) of a review by user of product with rating.
type reviewSide struct {
	user, product string
	rating        int64
}

func sign(in bool) int64 {
	if in {
		return 1
	}
	return -1
}

// compactReview reads a review fact's effects as a reviewSide, when they have
// that shape.
func compactReview(k facts.ReviewKey, e facts.Effects) (reviewSide, bool) {
	sg := sign(k.In)
	var s reviewSide
	users, products := 0, 0
	for it, cs := range e {
		switch it.Kind {
		case facts.User:
			if len(cs) != 1 || cs["reviewCount"] != sg {
				return s, false
			}
			s.user = it.ID
			users++
		case facts.Product:
			if len(cs) != 2 || cs["reviewCount"] != sg || cs["ratingTotal"]*sg < 1 {
				return s, false
			}
			s.product, s.rating = it.ID, cs["ratingTotal"]*sg
			products++
		default:
			return s, false
		}
	}
	return s, users == 1 && products == 1
}

func (s reviewSide) effects(in bool) facts.Effects {
	sg := sign(in)
	e := facts.Effects{}
	e.Add(Item{Kind: facts.User, ID: s.user}, "reviewCount", sg)
	e.Add(Item{Kind: facts.Product, ID: s.product}, "reviewCount", sg)
	e.Add(Item{Kind: facts.Product, ID: s.product}, "ratingTotal", sg*s.rating)
	return e
}

// readMarkers scans the marker table with strongly consistent reads: every
// marker committed before the scan is in it.
func (a *Auditor) readMarkers(ctx context.Context) (markers, []Problem, error) {
	m := newMarkers()
	var mu sync.Mutex
	var problems []Problem
	err := scan.Table(ctx, a.cfg.DB, scan.Input{Table: a.cfg.Tables.CounterEvents, Segments: a.cfg.Segments, Consistent: true},
		func(items []map[string]types.AttributeValue) error {
			mu.Lock()
			defer mu.Unlock()
			for _, item := range items {
				f, err := facts.DecodeMarker(item)
				switch {
				case err != nil:
					problems = append(problems, Problem{Where: "table " + a.cfg.Tables.CounterEvents, Err: err.Error()})
				case f.Effects == nil:
					m.legacy++
				default:
					m.add(f)
				}
			}
			a.cfg.Progress.Add("marker reads (every round)", int64(len(items)))
			return nil
		})
	if err != nil {
		return m, nil, fmt.Errorf("read markers: %w", err)
	}
	return m, problems, nil
}

// present returns which of keys have a marker now (strongly consistent).
func (a *Auditor) present(ctx context.Context, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	for start := 0; start < len(keys); start += 100 {
		req := map[string]types.KeysAndAttributes{a.cfg.Tables.CounterEvents: {ConsistentRead: aws.Bool(true)}}
		ka := req[a.cfg.Tables.CounterEvents]
		for _, k := range keys[start:min(start+100, len(keys))] {
			ka.Keys = append(ka.Keys, map[string]types.AttributeValue{facts.KeyAttr: &types.AttributeValueMemberS{Value: k}})
		}
		ka.ProjectionExpression = aws.String("#k")
		ka.ExpressionAttributeNames = map[string]string{"#k": facts.KeyAttr}
		req[a.cfg.Tables.CounterEvents] = ka
		err := ddbcall.BatchGet(ctx, a.cfg.DB, req, retries, func(_ string, item map[string]types.AttributeValue) error {
			if k, ok := item[facts.KeyAttr].(*types.AttributeValueMemberS); ok {
				out[k.Value] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read markers: %w", err)
		}
	}
	return out, nil
}

// reviewFacts derives the review facts the table and the markers prove
// (docs/counters.md, "What the audit decides, per fact"). The markers were
// read before the table, so a marked review version whose instance the
// table does not show at that version or above was taken out. The live
// version of a review instance must be counted in, with the table's rating.
// Every earlier version, and every version of an instance no longer in the
// table, was counted in and taken out: a pair that sums to nothing. When a
// marker holds one side of such a pair, the other side is proven, with the
// opposite effects. A review the table holds but the audit could not read
// (unread, by reviewPrefix) proves nothing: taken for gone, its counted
// version would be taken out of the counters while it is still shown, and
// the pair then complete would hide it from every later audit.
func reviewFacts(m markers, live map[string]facts.Review, unread map[string]bool) map[string]facts.Fact {
	type sides struct{ in, out string }
	byInstance := map[string]map[int64]*sides{}
	note := func(key string) {
		k, ok := facts.ParseReviewKey(key)
		if !ok {
			return
		}
		vs := byInstance[k.Instance]
		if vs == nil {
			vs = map[int64]*sides{}
			byInstance[k.Instance] = vs
		}
		s := vs[k.Version]
		if s == nil {
			s = &sides{}
			vs[k.Version] = s
		}
		if k.In {
			s.in = key
		} else {
			s.out = key
		}
	}
	for key := range m.reviews {
		note(key)
	}
	for key := range m.odd {
		note(key)
	}
	out := map[string]facts.Fact{}
	for _, r := range live {
		f := facts.In(r)
		out[f.Key] = f
	}
	for instance, vs := range byInstance {
		if unreadable(instance, unread) {
			continue
		}
		r, isLive := live[instance]
		for v, s := range vs {
			if isLive && v >= r.Version {
				continue // the live version (in, above), or a later one the table did not show yet
			}
			switch {
			case s.in != "" && s.out == "":
				out[facts.OutKey(instance, v)] = facts.Fact{Key: facts.OutKey(instance, v), Effects: m.effects(s.in).Negated()}
			case s.out != "" && s.in == "":
				out[facts.InKey(instance, v)] = facts.Fact{Key: facts.InKey(instance, v), Effects: m.effects(s.out).Negated()}
			}
		}
	}
	return out
}

// judgement is one item's counters against its markers.
type judgement struct {
	stored   reading
	residual map[string]int64
}

// residuals compares each item read before the markers with the effects of
// its marked facts. Items whose version moved between that reading and a
// reading after the markers cannot be judged on this one: they are returned
// as moved. Every item is read again, not only those with a residual: a
// fact applied between the two readings is in the markers and not in the
// first reading, and can hide a drift of the same size behind a residual
// of 0.
func (a *Auditor) residuals(ctx context.Context, before map[Item]reading, m markers) (map[Item]judgement, map[Item]bool, error) {
	marked := m.sums
	out := map[Item]judgement{}
	all := map[Item]bool{}
	moved := map[Item]bool{}
	for it, r := range before {
		if len(r.bad) > 0 {
			moved[it] = true // written with no integer since: read again
			continue
		}
		res := map[string]int64{}
		for _, c := range Counters[it.Kind] {
			if d := r.counts[c] - marked[it][c]; d != 0 {
				res[c] = d
			}
		}
		out[it] = judgement{stored: r, residual: res}
		all[it] = true
	}
	if len(all) == 0 {
		return out, moved, nil
	}
	set := all
	if len(all) > rescanAbove {
		set = nil // a scan of the tables costs less than this many keys
	}
	after, err := a.readItems(ctx, set)
	if err != nil {
		return nil, nil, err
	}
	for it := range all {
		if r, ok := after[it]; !ok || r.version != before[it].version {
			moved[it] = true
			delete(out, it)
		}
	}
	return out, moved, nil
}

// rescanAbove is how many items are read again by key; more are read again
// by a scan of the tables.
const rescanAbove = 1000

func touches(f facts.Fact, only map[Item]bool) bool {
	if only == nil {
		return true
	}
	for it := range f.Effects {
		if only[it] {
			return true
		}
	}
	return false
}

func (a *Auditor) run(ctx context.Context, only map[Item]bool) (Report, error) {
	deadline := time.Now().Add(a.cfg.MaxWait)
	var rep Report
	rep.Rounds = 1
	before, err := a.readItems(ctx, only)
	if err != nil {
		return rep, err
	}
	if a.cfg.BeforeMarkers != nil {
		a.cfg.BeforeMarkers()
	}
	m, problems, err := a.readMarkers(ctx)
	if err != nil {
		return rep, err
	}
	rep.Problems = append(rep.Problems, problems...)
	// An item holding counters that are no integers cannot be judged: a
	// problem, or with Repair, its counters set from their markers and the
	// item judged again below, as one that moved.
	rewritten := map[Item]bool{}
	for _, it := range sortedItems(before) {
		r := before[it]
		if len(r.bad) == 0 {
			continue
		}
		delete(before, it)
		if a.cfg.Repair {
			rw, err := a.rewrite(ctx, it, r, m)
			if err != nil {
				return rep, err
			}
			if len(rw) > 0 {
				rep.Rewritten = append(rep.Rewritten, rw...)
				rewritten[it] = true
				continue
			}
		}
		rep.Problems = append(rep.Problems, badProblem(a, it, r))
	}
	if a.cfg.BeforeSource != nil {
		a.cfg.BeforeSource(1)
	}
	src, err := a.source(ctx, m.has)
	if err != nil {
		return rep, err
	}
	rep.Orders, rep.ArchivedOrders, rep.Reviews = src.orders, src.archived+src.inTransit, src.reviews
	rep.ArchiveObjects, rep.ArchiveRead = src.archiveObjects, src.archiveRead
	rep.Problems = append(rep.Problems, src.problems...)

	proven := src.proven
	for k, f := range reviewFacts(m, src.live, src.unread) {
		proven[k] = f
	}
	var missing []facts.Fact
	for k, f := range proven {
		if !m.has(k) && touches(f, only) {
			missing = append(missing, f)
		}
	}
	judged, moved, err := a.residuals(ctx, before, m)
	if err != nil {
		return rep, err
	}
	for it := range rewritten {
		moved[it] = true
	}
	// A residual counts only once a second reading of the markers finds it
	// again: AWS makes a transaction's writes visible item by item
	// (read-committed), so one reading can see a fact's effects on the
	// counters and miss its marker. It is then taken out conditionally on
	// the version of the confirming reading. An item that moved across the
	// markers' reading, whose residual waits for its confirmation, or that
	// moved before its correction, is read again with the markers, until it
	// holds still or MaxWait is over.
	corrected := map[Item]bool{}
	seen := map[Item]judgement{}
	correct := func(judged map[Item]judgement, moved map[Item]bool) error {
		for _, it := range sortedItems(judged) {
			j := judged[it]
			if len(j.residual) == 0 || (only != nil && !only[it]) {
				delete(seen, it)
				continue
			}
			// The same residual again confirms it, whatever the version
			// did meanwhile (a fact applied with its marker leaves the
			// residual as it was); the correction is conditional on the
			// version of this reading.
			if s, ok := seen[it]; !ok || !maps.Equal(s.residual, j.residual) {
				seen[it] = j
				moved[it] = true
				continue
			}
			if !a.cfg.Repair {
				continue
			}
			ok, err := a.correct(ctx, it, j.stored.version, j.residual)
			if err != nil {
				return err
			}
			if ok {
				corrected[it] = true
			} else {
				moved[it] = true
			}
		}
		return nil
	}
	if err := correct(judged, moved); err != nil {
		return rep, err
	}
	for it := range moved {
		delete(judged, it)
	}
	// The second round runs whatever MaxWait says, and past MaxWait one
	// more round runs for residuals seen once and awaiting their
	// confirmation: a slow first round must not leave a drift unjudged.
	// Each round waits 200 ms first, time for what the last reading saw
	// half of to be visible whole.
	extra := false
	for len(moved) > 0 {
		if rep.Rounds > 1 && !time.Now().Before(deadline) {
			if extra || !awaiting(moved, seen) {
				break
			}
			extra = true
		}
		if err := ddbcall.Sleep(ctx, 200*time.Millisecond); err != nil {
			return rep, err
		}
		rep.Rounds++
		again, err := a.readItems(ctx, moved)
		if err != nil {
			return rep, err
		}
		if m, _, err = a.readMarkers(ctx); err != nil {
			return rep, err
		}
		j, mv, err := a.residuals(ctx, again, m)
		if err != nil {
			return rep, err
		}
		if err := correct(j, mv); err != nil {
			return rep, err
		}
		for it, v := range j {
			if !mv[it] {
				judged[it] = v
			}
		}
		moved = mv
	}
	rep.Unsettled = sortedItems(moved)
	rep.Markers = len(m.keys)

	// A missing fact's record may be on its way through the stream: given
	// Settle, it is no longer missing. Whatever the wait, a repair stays
	// exact: a fold and the record contend for the fact's marker.
	missing = a.stillMissing(ctx, missing, m)
	if len(missing) > 0 && a.cfg.Settle > 0 {
		a.cfg.Progress.Note("%d facts without a marker; settling %s for their records", len(missing), a.cfg.Settle)
		if err := ddbcall.Sleep(ctx, a.cfg.Settle); err != nil {
			return rep, err
		}
		keys := make([]string, len(missing))
		for i, f := range missing {
			keys[i] = f.Key
		}
		now, err := a.present(ctx, keys)
		if err != nil {
			return rep, err
		}
		kept := missing[:0]
		for _, f := range missing {
			if !now[f.Key] {
				kept = append(kept, f)
			}
		}
		missing = kept
	}
	var toFold []facts.Fact
	expected := map[Item]map[string]int64{}
	for _, f := range missing {
		rep.Missing++
		if src.onTheirWay[f.Key] {
			rep.OnTheirWay++
			continue
		}
		toFold = append(toFold, f)
		for it, cs := range f.Effects {
			if expected[it] == nil {
				expected[it] = map[string]int64{}
			}
			for c, n := range cs {
				expected[it][c] += n
			}
		}
	}
	sort.Slice(toFold, func(i, j int) bool { return toFold[i].Key < toFold[j].Key })

	// Drift: per counter, what the markers account for plus the missing
	// facts, against what is stored.
	drifting := map[Item][]Drift{}
	for it, j := range judged {
		if only != nil && !only[it] {
			continue
		}
		for _, c := range Counters[it.Kind] {
			stored := j.stored.counts[c]
			computed := stored - j.residual[c] + expected[it][c]
			if stored != computed {
				drifting[it] = append(drifting[it], Drift{Item: it, Counter: c, Stored: stored, Computed: computed})
			}
		}
	}
	rep.Items = len(judged) + len(rep.Unsettled)
	if a.cfg.Repair {
		failed := map[Item]bool{}
		for it := range moved {
			failed[it] = true
		}
		if len(toFold) > 0 {
			h := counting.New(counting.Deps{DB: a.cfg.DB, Tables: a.cfg.Tables})
			res := h.Fold(ctx, toFold)
			a.cfg.Progress.Note("%d facts folded in, %d applied meanwhile, %d failed", len(res.Applied), len(toFold)-len(res.Applied)-len(res.Failed), len(res.Failed))
			byKey := map[string]facts.Fact{}
			for _, f := range toFold {
				byKey[f.Key] = f
			}
			for _, k := range res.Failed {
				for it := range byKey[k].Effects {
					failed[it] = true
				}
			}
			if err := ctx.Err(); err != nil {
				// Stopped (Ctrl-C, a deadline): the repair did not run to its
				// end, which is not drift (exit 2, not 1); what was folded
				// stays folded, and the next audit takes the rest.
				return rep, fmt.Errorf("repair stopped after %d of %d facts: %w", len(res.Applied), len(toFold), err)
			}
		}
		for it, ds := range drifting {
			for i := range ds {
				ds[i].Repaired = !failed[it]
			}
		}
	}
	for _, it := range sortedItems(drifting) {
		rep.Drift = append(rep.Drift, drifting[it]...)
	}
	return rep, nil
}

// awaiting reports whether an item read again holds a residual seen once.
func awaiting(moved map[Item]bool, seen map[Item]judgement) bool {
	for it := range moved {
		if _, ok := seen[it]; ok {
			return true
		}
	}
	return false
}

// stillMissing drops the facts a later reading of the markers holds.
func (a *Auditor) stillMissing(_ context.Context, missing []facts.Fact, m markers) []facts.Fact {
	kept := missing[:0]
	for _, f := range missing {
		if !m.has(f.Key) {
			kept = append(kept, f)
		}
	}
	return kept
}

// unreadable says whether instance is of a review the audit could not read.
func unreadable(instance string, unread map[string]bool) bool {
	for prefix := range unread {
		if strings.HasPrefix(instance, prefix) {
			return true
		}
	}
	return false
}
