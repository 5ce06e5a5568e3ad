package search

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Version types, as named in requests.
const (
	versionInternal   = "internal"
	versionExternal   = "external"
	versionExternalGE = "external_gte"
)

// Write actions.
const (
	actionIndex  = "index"
	actionCreate = "create"
	actionDelete = "delete"
	actionUpdate = "update"
)

const maxIDBytes = 512

// writeOp is one document write, from the bulk API or a single-document call.
type writeOp struct {
	action      string
	id          string
	source      []byte // the document, or the update body
	version     int64
	hasVersion  bool
	versionType string
	ifSeqNo     *int64
	ifPrimary   *int64
}

// writeResult is the outcome of one writeOp.
type writeResult struct {
	action  string
	id      string
	version int64
	seqNo   int64
	result  string // created, updated, deleted, not_found, noop
	status  int
	err     *apiError
}

// newID makes an identifier for a document indexed without one.
func newID() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validate checks what OpenSearch rejects before running anything; the
// messages are OpenSearch's.
func (op *writeOp) validate() []string {
	var reasons []string
	switch op.versionType {
	case "":
		op.versionType = versionInternal
	case versionInternal, versionExternal, versionExternalGE:
	default:
		reasons = append(reasons, fmt.Sprintf("version type [%s] is not supported", op.versionType))
		return reasons
	}
	external := op.versionType != versionInternal
	if op.action != actionIndex && op.id == "" {
		if op.action == actionCreate {
			op.id = newID()
		} else {
			reasons = append(reasons, "id is missing")
		}
	}
	if len(op.id) > maxIDBytes {
		reasons = append(reasons, fmt.Sprintf("id [%s] is too long, must be no longer than 512 bytes but was: %d", op.id, len(op.id)))
	}
	switch {
	case op.action == actionCreate && external:
		reasons = append(reasons, "create operations only support internal versioning. use index instead")
	case op.action == actionUpdate && (op.hasVersion || external):
		reasons = append(reasons, "can't provide version in update; use if_seq_no and if_primary_term")
	case external && !op.hasVersion:
		reasons = append(reasons, fmt.Sprintf("illegal version value [-3] for version type [%s]", strings.ToUpper(op.versionType)))
	case external && op.version < 0:
		reasons = append(reasons, fmt.Sprintf("illegal version value [%d] for version type [%s]", op.version, strings.ToUpper(op.versionType)))
	case !external && op.hasVersion:
		reasons = append(reasons, "internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead")
	}
	if op.ifSeqNo != nil || op.ifPrimary != nil {
		switch {
		case external:
			reasons = append(reasons, fmt.Sprintf("compare and write operations can not be used with version type [%s]", strings.ToUpper(op.versionType)))
		case op.ifSeqNo == nil || *op.ifSeqNo < 0:
			reasons = append(reasons, "ifSeqNo is unassigned, but primary term is set")
		case op.ifPrimary == nil || *op.ifPrimary <= 0:
			reasons = append(reasons, "ifSeqNo is set, but primary term is [0]")
		}
	}
	return reasons
}

// current is what a write sees of a document before it runs.
type current struct {
	exists bool
	state  docState
	source []byte // only when asked for
	tomb   *tombstone
}

// pending is a document's state after an earlier write of the same batch.
type pending struct {
	live   bool
	state  docState
	source []byte
	tomb   tombstone
}

// writer runs one batch of writes against an index under its write lock.
type writer struct {
	ix      *index
	m       *mappingDef
	mapped  bool // m is a private copy with new fields
	batch   *bleve.Batch
	pending map[string]*pending
	order   []string
	views   []viewOp // the batch's writes, for the search view's next refresh
	seqNo   int64
	now     time.Time
	gc      time.Duration
}

// apply runs ops in order as one bleve batch. An error means nothing was
// written; per-document failures are in the results.
func (ix *index) apply(ops []writeOp, defaultGC time.Duration) ([]writeResult, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	gc := ix.gcDeletes
	if _, set := ix.meta.Settings["index.gc_deletes"]; !set {
		gc = defaultGC
		if gc <= 0 {
			gc = defaultGCDeletes
		}
	}
	w := &writer{
		ix: ix, m: ix.mapping.Load(), batch: ix.bleve.NewBatch(),
		pending: map[string]*pending{}, seqNo: ix.seqNo, now: time.Now(), gc: gc,
	}
	results := make([]writeResult, len(ops))
	for i := range ops {
		r, err := w.do(&ops[i])
		if err != nil {
			return nil, err
		}
		results[i] = r
	}
	if err := w.commit(); err != nil {
		return nil, err
	}
	return results, nil
}

// lookup finds what a write sees of id: an earlier write of this batch,
// the version cache, a live tombstone, or the stored document.
func (w *writer) lookup(id string, withSource bool) (current, error) {
	if p, ok := w.pending[id]; ok {
		if p.live {
			return current{exists: true, state: p.state, source: p.source}, nil
		}
		return current{tomb: w.activeTomb(p.tomb)}, nil
	}
	if st, ok := w.ix.versions[id]; ok && !withSource {
		return current{exists: true, state: st}, nil
	}
	if t, ok := w.ix.tombstones[id]; ok {
		if _, live := w.ix.versions[id]; !live {
			if at := w.activeTomb(t); at != nil {
				return current{tomb: at}, nil
			}
		}
	}
	doc, ok, err := w.ix.load(id)
	if err != nil {
		return current{}, err
	}
	if !ok {
		return current{}, nil
	}
	w.ix.versions[id] = doc.state
	return current{exists: true, state: doc.state, source: doc.source}, nil
}

// activeTomb returns the tombstone while gc_deletes has not passed.
func (w *writer) activeTomb(t tombstone) *tombstone {
	if w.gc <= 0 || w.now.UnixMilli()-t.DeletedMS >= w.gc.Milliseconds() {
		return nil
	}
	return &t
}

// version is the version a document had, live or remembered by a tombstone.
func (c current) version() (int64, bool) {
	switch {
	case c.exists:
		return c.state.version, true
	case c.tomb != nil:
		return c.tomb.Version, true
	}
	return 0, false
}

func (w *writer) conflict(op *writeOp, cur current) *apiError {
	if op.ifSeqNo != nil {
		if !cur.exists {
			return versionConflict(w.ix, "[%s]: version conflict, required seqNo [%d], primary term [%d]. but no document was found", op.id, *op.ifSeqNo, *op.ifPrimary)
		}
		if cur.state.seqNo != *op.ifSeqNo || *op.ifPrimary != 1 {
			return versionConflict(w.ix, "[%s]: version conflict, required seqNo [%d], primary term [%d]. current document has seqNo [%d] and primary term [1]", op.id, *op.ifSeqNo, *op.ifPrimary, cur.state.seqNo)
		}
	}
	curV, known := cur.version()
	switch op.versionType {
	case versionExternal:
		if known && op.version <= curV {
			return versionConflict(w.ix, "[%s]: version conflict, current version [%d] is higher or equal to the one provided [%d]", op.id, curV, op.version)
		}
	case versionExternalGE:
		if known && op.version < curV {
			return versionConflict(w.ix, "[%s]: version conflict, current version [%d] is higher than the one provided [%d]", op.id, curV, op.version)
		}
	}
	return nil
}

func (w *writer) nextVersion(op *writeOp, cur current) int64 {
	if op.versionType != versionInternal {
		return op.version
	}
	v, _ := cur.version()
	return v + 1
}

func (w *writer) do(op *writeOp) (writeResult, error) {
	res := writeResult{action: op.action, id: op.id}
	fail := func(e *apiError) (writeResult, error) {
		res.status, res.err = e.status, e
		return res, nil
	}
	switch op.action {
	case actionIndex, actionCreate:
		if op.id == "" {
			op.id = newID()
			res.id = op.id
		}
		src, err := decodeSource(op.source)
		if err != nil {
			return fail(mapperParsing(w.ix, "failed to parse: %v", err))
		}
		b := newDocBuilder(w.ix, w.m, op.id)
		if e := b.build(src, trimSource(op.source)); e != nil {
			return fail(e)
		}
		cur, err := w.lookup(op.id, false)
		if err != nil {
			return res, err
		}
		if op.action == actionCreate && cur.exists {
			return fail(versionConflict(w.ix, "[%s]: version conflict, document already exists (current version [%d])", op.id, cur.state.version))
		}
		if e := w.conflict(op, cur); e != nil {
			return fail(e)
		}
		return w.put(res, b, cur, w.nextVersion(op, cur), trimSource(op.source)), nil
	case actionDelete:
		cur, err := w.lookup(op.id, false)
		if err != nil {
			return res, err
		}
		if e := w.conflict(op, cur); e != nil {
			return fail(e)
		}
		res.version = w.nextVersion(op, cur)
		w.seqNo++
		res.seqNo = w.seqNo
		if !cur.exists {
			res.result, res.status = "not_found", http.StatusNotFound
			if op.versionType == versionInternal {
				return res, nil
			}
		} else {
			res.result, res.status = "deleted", http.StatusOK
			w.batch.Delete(op.id)
			w.views = append(w.views, viewOp{id: op.id})
		}
		w.set(op.id, &pending{tomb: tombstone{Version: res.version, SeqNo: res.seqNo, DeletedMS: w.now.UnixMilli()}})
		return res, nil
	case actionUpdate:
		return w.update(op, res)
	}
	return fail(illegalArgument("unknown action [%s]", op.action))
}

// update refuses the update API (POST /{index}/_update/{id} and bulk
// update): nothing shopstream sends uses it (docs/decisions.md, "Local
// search"), so it is answered with a 400 rather than emulated.
func (w *writer) update(op *writeOp, res writeResult) (writeResult, error) {
	e := unsupported("the update API ([_update] and bulk [update])")
	res.status, res.err = e.status, e
	return res, nil
}

// put adds a built document to the batch.
func (w *writer) put(res writeResult, b *docBuilder, cur current, version int64, source []byte) writeResult {
	w.seqNo++
	st := docState{version: version, seqNo: w.seqNo}
	b.doc.AddField(document.NewTextFieldWithIndexingOptions(fieldMeta, nil, encodeDocMeta(st), bleveindex.StoreField))
	// The view gets its own document over the same fields: the live
	// batch adds an _id field to the one it indexes.
	view := document.NewDocument(b.doc.ID())
	view.Fields = slices.Clone(b.doc.Fields)
	_ = w.batch.IndexAdvanced(b.doc) // fails only for an empty id, excluded by validate
	w.views = append(w.views, viewOp{id: res.id, doc: view})
	if len(b.added) > 0 {
		if !w.mapped {
			w.m, w.mapped = w.m.clone(), true
		}
		maps.Copy(w.m.Props, b.added)
	}
	w.set(res.id, &pending{live: true, state: st, source: source})
	res.version, res.seqNo = version, st.seqNo
	if cur.exists {
		res.result, res.status = "updated", http.StatusOK
	} else {
		res.result, res.status = "created", http.StatusCreated
	}
	return res
}

func (w *writer) set(id string, p *pending) {
	if _, ok := w.pending[id]; !ok {
		w.order = append(w.order, id)
	}
	w.pending[id] = p
}

// commit writes the batch with the bookkeeping that must survive a
// restart, then publishes the new state.
func (w *writer) commit() error {
	if len(w.pending) == 0 {
		return nil
	}
	ix := w.ix
	tombs := ix.tombstones
	tombsChanged := false
	cloneTombs := func() {
		if !tombsChanged {
			tombs, tombsChanged = maps.Clone(tombs), true
		}
	}
	for _, id := range w.order {
		p := w.pending[id]
		if p.live {
			if _, ok := tombs[id]; ok {
				cloneTombs()
				delete(tombs, id)
			}
			continue
		}
		cloneTombs()
		tombs[id] = p.tomb
	}
	for id, t := range tombs {
		if w.activeTomb(t) == nil {
			cloneTombs()
			delete(tombs, id)
		}
	}
	if w.mapped {
		mb, err := json.Marshal(w.m)
		if err != nil {
			return fmt.Errorf("index %s: encode mapping: %w", ix.name, err)
		}
		w.batch.SetInternal([]byte(keyMapping), mb)
	}
	seq := make([]byte, 8)
	binary.BigEndian.PutUint64(seq, uint64(w.seqNo))
	w.batch.SetInternal([]byte(keySeqNo), seq)
	if err := ix.bleve.Batch(w.batch); err != nil {
		return fmt.Errorf("index %s: write batch: %w", ix.name, err)
	}
	for _, id := range w.order {
		if p := w.pending[id]; p.live {
			ix.versions[id] = p.state
		} else {
			delete(ix.versions, id)
		}
	}
	ix.tombstones = tombs
	ix.seqNo = w.seqNo
	ix.queueView(w.views)
	if w.mapped {
		ix.mapping.Store(w.m)
	}
	return nil
}

// parseVersionParams reads version, version_type, if_seq_no and
// if_primary_term from a query string or bulk metadata.
func parseVersionParams(get func(string) (string, bool), op *writeOp) *apiError {
	if v, ok := get("version"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return illegalArgument("failed to parse [version] value [%s]", v)
		}
		op.version, op.hasVersion = n, true
	}
	if v, ok := get("version_type"); ok {
		op.versionType = v
	}
	for _, p := range []struct {
		name string
		dst  **int64
	}{{"if_seq_no", &op.ifSeqNo}, {"if_primary_term", &op.ifPrimary}} {
		if v, ok := get(p.name); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return illegalArgument("failed to parse [%s] value [%s]", p.name, v)
			}
			*p.dst = &n
		}
	}
	return nil
}
