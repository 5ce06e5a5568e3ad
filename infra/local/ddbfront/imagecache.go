package ddbfront

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
)

// The front prices a write by the item it changes (the larger of before and
// after), which it reads from DynamoDB Local first: a call AWS does not make,
// paid on this machine by every write. Every write passes through the front,
// so the item a write it saw commit left behind is the item as it is now,
// until the next write of it: the image cache keeps that item, and the next
// write is priced from it without reading. An image is kept only when the
// write that made it was the only write of its item in flight from its
// admission to its answer, its outcome is known (200), and its item after is
// computed exactly; any other write of the item drops it, and an image is
// read again at least every imageTTL. The reads AWS charges by the whole
// item (a projected one, a read transaction's) are charged from the image
// too (cachedImages).

// imageTTL bounds how long an image derived from a read stays in use.
const imageTTL = 5 * time.Second

// undecidedFor is how long a write whose answer did not decide it
// (DynamoDB Local failed, or did not answer within undecidedFor; a client
// that goes away does not end the front's wait) counts as in flight: far
// longer than DynamoDB Local takes to apply a write it was sent, so that no
// image is taken from a reading that write could still change.
const undecidedFor = time.Minute

// maxImages bounds the cache; past it the cache starts again empty.
const maxImages = 50_000

// tokenTTL is how long DynamoDB keeps a transaction's ClientRequestToken: a
// transaction sent again with it within that time is not applied again.
const tokenTTL = 10 * time.Minute

type imageEntry struct {
	item   map[string]types.AttributeValue
	readAt time.Time
}

// flight counts the writes of one item in progress; seq numbers their
// admissions. undecided are those of them gone upstream with no answer that
// decides them, kept in flight for undecidedFor; idle, when a write waits
// for the others to end (awaitPriceable), is closed once none but those is
// left.
type flight struct {
	count     int
	seq       uint64
	undecided int
	idle      chan struct{}
}

// live is the writes in flight whose answers are still to come.
func (fl *flight) live() int { return fl.count - fl.undecided }

// wake closes idle once no write whose answer is to come is left.
func (fl *flight) wake() {
	if fl.live() <= 0 && fl.idle != nil {
		close(fl.idle)
		fl.idle = nil
	}
}

// recheckFlights is how often a write waiting for an item's writes in
// flight (awaitPriceable) looks again, should no answer wake it.
const recheckFlights = time.Second

// awaitPriceable waits, l.mu held on entry and on return, until the items of
// refs can be priced: a write of an item the front does not follow
// (possible.go) is priced by a read of it, which a write of it in flight may
// reach DynamoDB Local after, and so be missed: the write that follows would
// be charged by the item before it, though it meets the item after (a 10 KB
// put: 1 unit, not 10). So a write of such an item waits for the answers of
// the writes of it in flight, as it would queue behind them at the item on
// AWS; then the item is known (an image), or read with none in flight. A
// write of a followed item joins its states at once. Writes whose answers
// did not decide them (undecided) are not waited for: they are gone
// upstream, and their outcome may never be known. It returns how long it
// waited.
func (l *limiter) awaitPriceable(refs []ref) time.Duration {
	var waited time.Duration
	for {
		var idle chan struct{}
		for _, r := range refs {
			fl := l.flights[r.id]
			if fl == nil || fl.live() <= 0 || (l.poss[r.id] != nil && l.untracked == 0) {
				continue
			}
			if fl.idle == nil {
				fl.idle = make(chan struct{})
			}
			idle = fl.idle
			break
		}
		if idle == nil {
			return waited
		}
		l.mu.Unlock()
		start := time.Now()
		select {
		case <-idle:
		case <-time.After(recheckFlights):
		}
		waited += time.Since(start)
		l.mu.Lock()
	}
}

// imageTrack is one written item of an admission: what the item will be if
// the write commits.
type imageTrack struct {
	id     string
	seq    uint64
	epoch  uint64 // the limiter's epoch at admission
	exact  bool   // no other write of the item was in flight at admission
	known  bool   // after is the item after the write
	after  map[string]types.AttributeValue
	readAt time.Time
	// before is the item before the write and write says the action
	// changes it: a committed write is kept for StaleReads (stale.go).
	before map[string]types.AttributeValue
	write  bool
	// p is the item's possible states this write is followed in, as w
	// (possible.go), and priced what w was charged as it joined them; p is
	// nil when the write is not followed.
	p      *possible
	w      *pendingWrite
	priced []charge
	// size is the largest the item may be around the write, marked at
	// its start and its end (sizemarks.go).
	size int
	// undecided: the write went upstream with no answer that decided it
	// (flight.undecided counts it).
	undecided bool
}

// following says how the writes of a request meet their items' possible
// states (possible.go): tables are the refs' tables, in order; adm is a
// transaction's admission, whose holds a dropped chain takes back. Every
// write joins the states of its item, so that the writes unanswered are
// charged what it may make of the item; follow says it stays followed in
// them (its answer will say whether it applied), and refusable that it may
// be refused as a conflict where it cannot join them.
type following struct {
	tables        []tables.Table
	transactional bool
	adm           *admission
	follow        bool
	refusable     bool
}

// startedWrites is what startWrites found: by item, the items each write
// may find (the image the cache holds when no other write of it is in
// flight, or the item's possible states; an item left out is to be read),
// the tracks, and what the writes already unanswered owe for the states
// these writes add.
type startedWrites struct {
	priors map[string][]map[string]types.AttributeValue
	tracks []imageTrack
	debts  []charge
	// reread are the items whose states are older than imageTTL: read
	// again, the write priced by what the read finds too.
	reread map[string]bool
	// refused is the position of a write that cannot join its item's
	// states while a transaction freed at its window is among them (-1:
	// none): the request is refused as a conflict, and nothing of it was
	// started.
	refused int
}

// startWrites registers the writes of refs as in flight (f says how they
// meet their items' states). Callers hold l.mu.
func (l *limiter) startWrites(refs []ref, now time.Time, f following) startedWrites {
	if l.imgs == nil {
		l.imgs = map[string]imageEntry{}
	}
	if l.flights == nil {
		l.flights = map[string]*flight{}
	}
	if l.poss == nil {
		l.poss = map[string]*possible{}
	}
	out := startedWrites{priors: map[string][]map[string]types.AttributeValue{}, reread: map[string]bool{}, refused: -1}
	if f.refusable {
		// A write that cannot join its item's states while a transaction
		// freed at its window is among them would be priced by a read that
		// may not see that transaction, and the transaction never charged
		// for what the write makes of the item: refused, as a conflict. So
		// is one whose item another transaction holds again since the
		// write's admission (dropChain).
		own := 0
		if f.transactional {
			own = 1
		}
		for i, r := range refs {
			p := l.poss[r.id]
			if l.txItems[r.id] > own || (l.untracked == 0 && p != nil && p.hasFreed(r.id) && !p.fits(r)) {
				out.refused = i
				return out
			}
		}
	}
	out.tracks = make([]imageTrack, 0, len(refs))
	for i, r := range refs {
		fl := l.flights[r.id]
		if fl == nil {
			fl = &flight{}
			l.flights[r.id] = fl
		}
		exact := fl.count == 0 && l.untracked == 0
		tr := imageTrack{id: r.id, epoch: l.epoch, exact: exact, readAt: now}
		p := l.poss[r.id]
		if e, ok := l.imgs[r.id]; ok && exact && now.Sub(e.readAt) < imageTTL {
			p = newPossible(e)
			l.poss[r.id] = p
		}
		delete(l.imgs, r.id)
		if p != nil && l.untracked == 0 {
			out.priors[r.id] = p.priors()
			tr.readAt, tr.before = p.readAt, p.before()
			// Every write joins, so that those unanswered are charged
			// what it may make of the item (its debts), even one that
			// will not stay followed.
			w := &pendingWrite{r: r, t: f.tables[i], transactional: f.transactional, adm: f.adm}
			debts, ok := p.add(w)
			out.debts = append(out.debts, debts...)
			// A chain is read again at least every imageTTL, as an
			// image is.
			fresh := now.Sub(p.readAt) < imageTTL
			if !fresh {
				out.reread[r.id] = true
			}
			if ok && f.follow && fresh {
				tr.p, tr.w = p, w
				for b, u := range w.most {
					tr.priced = append(tr.priced, charge{pos: i, bucket: b, units: u})
				}
			} else {
				l.dropChain(r.id)
			}
		} else if p != nil {
			l.dropChain(r.id)
		}
		l.started1(r.id)
		fl.count++
		fl.seq++
		tr.seq = fl.seq
		out.tracks = append(out.tracks, tr)
	}
	return out
}

// dropChain stops following item id's states: a transaction followed in them
// whose hold of the item ended at its window holds it again until its
// answer, since a write admitted now would be priced by a read that may not
// see it. Callers hold l.mu.
func (l *limiter) dropChain(id string) {
	p := l.poss[id]
	if p == nil {
		return
	}
	delete(l.poss, id)
	for _, w := range p.pending {
		if w != nil && w.adm != nil {
			w.adm.reholdLocked(id)
		}
	}
	for _, w := range p.checks {
		if w.adm != nil {
			w.adm.reholdLocked(id)
		}
	}
}

// followedLocked says whether the write of txIDs[i] is still followed in its
// item's possible states. Callers hold l.mu.
func (a *admission) followedLocked(i int) bool {
	if i >= len(a.tracks) {
		return false
	}
	t := &a.tracks[i] // its p and id change under l.mu only
	return t.p != nil && a.l.poss[t.id] == t.p
}

// started1 records the start of a write of id. Callers hold l.mu.
func (l *limiter) started1(id string) {
	l.starts++
	if l.started == nil || len(l.started) >= maxImages {
		l.started, l.startedFloor = map[string]uint64{}, l.starts
	}
	l.started[id] = l.starts
}

// lastStart is the number of the last start of a write of id, or a number
// at least as high. Callers hold l.mu.
func (l *limiter) lastStart(id string) uint64 {
	return max(l.started[id], l.startedFloor)
}

// readMark is what the image cache knew as a read of whole items began:
// the writes started so far, the epoch, and the items no write was on.
type readMark struct {
	starts, epoch uint64
	quiet         map[string]bool
}

// markRead marks the start of a read of the items of refs that the front
// makes for itself (images).
func (l *limiter) markRead(refs []ref) readMark {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := readMark{starts: l.starts, epoch: l.epoch, quiet: map[string]bool{}}
	if l.untracked > 0 {
		return m
	}
	for _, r := range refs {
		if fl := l.flights[r.id]; fl == nil || fl.count == 0 {
			m.quiet[r.id] = true
		}
	}
	return m
}

// keepRead keeps, as images, the items of refs that a read the front made
// for itself found (items; an absent one is kept as absent), when no write
// of the item was in flight as the read began (mark) and none started
// since, and no write the limits could not name was about: the item read is
// then the item as it is now, as one a write left is. Those the cache gave
// (have) keep their own age.
func (l *limiter) keepRead(mark readMark, refs []ref, have map[string]imageEntry, items map[string]map[string]types.AttributeValue, readAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.untracked > 0 || l.epoch != mark.epoch {
		return
	}
	for _, r := range refs {
		if _, cached := have[r.id]; cached || !mark.quiet[r.id] || l.lastStart(r.id) > mark.starts ||
			(r.kind == "Put" && r.absentIfApplied) { // not read
			continue
		}
		if fl := l.flights[r.id]; fl != nil && fl.count > 0 {
			continue
		}
		if l.imgs == nil {
			l.imgs, l.flights = map[string]imageEntry{}, map[string]*flight{}
		}
		if len(l.imgs) >= maxImages {
			clear(l.imgs)
		}
		l.imgs[r.id] = imageEntry{item: items[r.id], readAt: readAt}
	}
}

// cachedImages are the items of refs the image cache holds, as they are
// now: an image is dropped as a write of its item starts and kept only from
// a write that was alone on its item, so one held with no write of its item
// in flight, and none the limits could not name, is the item in DynamoDB
// Local. A read charged by it (a projected read, which AWS charges the
// whole item) needs no second read of the item.
func (l *limiter) cachedImages(refs []ref, now time.Time) map[string]imageEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]imageEntry{}
	if l.untracked > 0 {
		return out
	}
	for _, r := range refs {
		if fl := l.flights[r.id]; fl != nil && fl.count > 0 {
			continue
		}
		if e, ok := l.imgs[r.id]; ok && now.Sub(e.readAt) < imageTTL {
			out[r.id] = e
		}
	}
	return out
}

// endWrites ends an admission's writes; committed says its answer was a
// success. Callers hold l.mu.
func (l *limiter) endWrites(tracks []imageTrack, committed bool, now time.Time) {
	for _, t := range tracks {
		fl := l.flights[t.id]
		if fl == nil {
			continue
		}
		fl.count--
		if t.undecided {
			fl.undecided--
		}
		fl.wake()
		l.markSize(t.id, t.size, now)
		if t.p != nil {
			// While the item's states are followed, every write of it in
			// flight is followed in them: none left, none is pending.
			if l.poss[t.id] == t.p {
				t.p.settle(t.w, committed)
				if fl.count == 0 {
					delete(l.poss, t.id)
					if item, ok := t.p.known(); ok && t.epoch == l.epoch {
						if len(l.imgs) >= maxImages {
							clear(l.imgs)
						}
						l.imgs[t.id] = imageEntry{item: item, readAt: t.p.readAt}
					}
				}
			}
		} else if committed && t.known && t.exact && fl.seq == t.seq && t.epoch == l.epoch {
			if len(l.imgs) >= maxImages {
				clear(l.imgs)
			}
			l.imgs[t.id] = imageEntry{item: t.after, readAt: t.readAt}
		}
		if fl.count <= 0 {
			delete(l.flights, t.id)
		}
	}
}

// replayed says whether a transaction with token committed within
// tokenTTL: DynamoDB answers it again without applying it. Callers hold
// l.mu.
func (l *limiter) replayed(token string, now time.Time) bool {
	if token == "" {
		return false
	}
	at, ok := l.tokens[token]
	return ok && now.Sub(at) < tokenTTL
}

// committedToken remembers a committed transaction's token. Callers hold
// l.mu.
func (l *limiter) committedToken(token string, now time.Time) {
	if token == "" {
		return
	}
	if l.tokens == nil {
		l.tokens = map[string]time.Time{}
	}
	if len(l.tokens) >= maxImages {
		for t, at := range l.tokens {
			if now.Sub(at) >= tokenTTL {
				delete(l.tokens, t)
			}
		}
	}
	l.tokens[token] = now
}

// unfollow forgets the possible states of the items of tracks: the answer
// did not decide their writes. Callers hold l.mu.
func (l *limiter) unfollow(tracks []imageTrack) {
	for i, t := range tracks {
		if t.p != nil && l.poss[t.id] == t.p {
			l.dropChain(t.id)
		}
		tracks[i].p = nil
	}
}

// dropChains drops every item's states. Callers hold l.mu.
func (l *limiter) dropChains() {
	for id := range l.poss {
		l.dropChain(id)
	}
}

// forgetImages drops the images of table's items, and keeps the writes of
// them in flight from leaving one: the table was deleted or created again.
func (l *limiter) forgetImages(table string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	prefix := table + "\x00"
	for id := range l.imgs {
		if strings.HasPrefix(id, prefix) {
			delete(l.imgs, id)
		}
	}
	for id := range l.recent {
		if strings.HasPrefix(id, prefix) {
			delete(l.recent, id)
		}
	}
	for id := range l.poss {
		if strings.HasPrefix(id, prefix) {
			l.dropChain(id)
		}
	}
	for id, fl := range l.flights {
		if strings.HasPrefix(id, prefix) {
			fl.seq++
		}
	}
	// A read of the table's items under way is not kept either.
	l.starts++
	l.startedFloor = l.starts
}

// beginUntracked drops every image and keeps any write from leaving one
// until endUntracked: a write the limits could not name is on its way, and
// any item may be its.
func (l *limiter) beginUntracked() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.untracked++
	l.epoch++
	clear(l.imgs)
	l.dropChains()
}

// endUntracked ends what beginUntracked began, once the write has landed.
func (l *limiter) endUntracked() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.untracked--
	l.epoch++
	clear(l.imgs)
	l.dropChains()
}

// sweeping registers the TTL sweeper's deletes of keys in table as writes
// in flight, whose outcome is not followed: answered(i) ends the delete of
// keys[i] once DynamoDB Local answered it (a write of that item waiting to
// be priced, awaitPriceable, goes on then, not after the whole page), and
// done ends those not ended yet.
func (l *limiter) sweeping(ctx context.Context, table string, keys []map[string]types.AttributeValue) (answered func(i int), done func()) {
	if l == nil {
		return func(int) {}, func() {}
	}
	t, err := l.schemas.get(ctx, table)
	if err != nil {
		// Unknown table: drop what may be kept of it, before and after.
		l.forgetImages(table)
		return func(int) {}, func() { l.forgetImages(table) }
	}
	refs := make([]ref, 0, len(keys))
	track := make([]int, len(keys)) // keys[i]'s track, -1 for none
	for i, k := range keys {
		track[i] = -1
		if key, id, err := itemKey(t, table, k, "key"); err == nil {
			track[i] = len(refs)
			refs = append(refs, ref{table: table, id: id, kind: "Delete", key: key})
		}
	}
	tabs := make([]tables.Table, len(refs))
	for i := range tabs {
		tabs[i] = t
	}
	l.mu.Lock()
	started := l.startWrites(refs, time.Now(), following{tables: tabs})
	tracks := started.tracks
	ended := make([]bool, len(tracks))
	l.mu.Unlock()
	for _, d := range started.debts {
		l.charge(d.bucket, d.units)
	}
	end := func(j int) { // l.mu held
		if j >= 0 && j < len(tracks) && !ended[j] {
			ended[j] = true
			l.endWrites(tracks[j:j+1], false, time.Now())
		}
	}
	answered = func(i int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		end(track[i])
	}
	done = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for j := range tracks {
			end(j)
		}
	}
	return answered, done
}
