package search

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/simple"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/whitespace"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Names of the bleve analyzers behind OpenSearch's analyzer names.
const (
	textAnalyzer       = "shopstream_standard"   // standard tokenizer, lower case, English stemming
	whitespaceAnalyzer = "shopstream_whitespace" // whitespace tokenizer only
)

// Stored fields and internal keys of every bleve index.
const (
	fieldSource     = "_source"
	fieldMeta       = "_meta"
	fieldFieldNames = "_field_names"

	keyMeta    = "shopstream.meta"
	keyMapping = "shopstream.mapping"
	keySeqNo   = "shopstream.seq_no"
	// keyOldTombstones is where releases before 0.13.0 kept tombstones.
	keyOldTombstones = "shopstream.tombstones"
)

// Defaults of index settings.
const (
	defaultGCDeletes       = 60 * time.Second
	defaultMaxResultWindow = 10000
)

// indexMeta is what an index keeps about itself besides documents and mapping.
type indexMeta struct {
	UUID      string            `json:"uuid"`
	CreatedMS int64             `json:"creation_date"`
	Settings  map[string]string `json:"settings"`
}

// docState is the version bookkeeping of one live document.
type docState struct {
	version int64
	seqNo   int64
}

// tombstone remembers the version of a deleted document until gc_deletes
// has passed, so a late write carrying an older version stays rejected.
type tombstone struct {
	Version   int64 `json:"v"`
	SeqNo     int64 `json:"s"`
	DeletedMS int64 `json:"t"`
}

// index is one OpenSearch index backed by one bleve index.
type index struct {
	name      string
	path      string // "" when in memory
	bleve     bleve.Index
	meta      indexMeta
	analyzers map[string]analysis.Analyzer

	// gcDeletes and maxResultWindow come from the index settings; a zero
	// gcDeletes defers to the server's default.
	gcDeletes       time.Duration
	maxResultWindow int

	// life is held shared by every operation and exclusively by close.
	life   sync.RWMutex
	closed bool

	mapping atomic.Pointer[mappingDef]

	// view is what searches read: the documents as of the last refresh
	// (refresh.go). viewMu guards the view's pending batch, refreshed
	// (closed at the next refresh) and nextRefresh.
	view         bleve.Index
	refreshEvery time.Duration // 0: no scheduled refresh
	viewMu       sync.Mutex
	viewPending  *bleve.Batch
	refreshed    chan struct{}
	waiters      int // writes waiting for the next refresh
	nextRefresh  time.Time

	// writeMu serialises writes; it guards the fields below.
	writeMu    sync.Mutex
	versions   map[string]docState
	tombstones map[string]tombstone
	seqNo      int64
}

// bleveMapping is the bleve-level mapping of every index: documents are
// built field by field from the OpenSearch mapping, so bleve only needs the
// analyzers and the scoring model.
func bleveMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	if err := im.AddCustomAnalyzer(textAnalyzer, map[string]any{
		"type":          custom.Name,
		"tokenizer":     unicode.Name,
		"token_filters": []any{en.PossessiveName, lowercase.Name, porter.Name},
	}); err != nil {
		return nil, fmt.Errorf("register text analyzer: %w", err)
	}
	if err := im.AddCustomAnalyzer(whitespaceAnalyzer, map[string]any{
		"type":      custom.Name,
		"tokenizer": whitespace.Name,
	}); err != nil {
		return nil, fmt.Errorf("register whitespace analyzer: %w", err)
	}
	im.DefaultAnalyzer = textAnalyzer
	im.ScoringModel = bleveindex.BM25Scoring
	im.IndexDynamic = false
	im.StoreDynamic = false
	im.DocValuesDynamic = false
	im.DefaultMapping.Dynamic = false
	return im, nil
}

// bleveAnalyzerName maps an OpenSearch analyzer name to the bleve analyzer
// that stands in for it; ok is false for a name the service does not know.
func bleveAnalyzerName(name string) (string, bool) {
	switch name {
	case "", "standard", "default":
		return textAnalyzer, true
	case "english":
		return en.AnalyzerName, true
	case "simple":
		return simple.Name, true
	case "whitespace":
		return whitespaceAnalyzer, true
	case "keyword":
		return keyword.Name, true
	}
	return "", false
}

func (ix *index) loadAnalyzers() error {
	ix.analyzers = map[string]analysis.Analyzer{}
	for _, name := range []string{textAnalyzer, en.AnalyzerName, simple.Name, whitespaceAnalyzer, keyword.Name} {
		a := ix.bleve.Mapping().AnalyzerNamed(name)
		if a == nil {
			return fmt.Errorf("index %s: analyzer %s missing", ix.name, name)
		}
		ix.analyzers[name] = a
	}
	return nil
}

// analyzer returns the analyzer of an OpenSearch analyzer name; names
// defined only in the index's analysis settings fall back to the standard one.
func (ix *index) analyzer(name string) (string, analysis.Analyzer) {
	bn, ok := bleveAnalyzerName(name)
	if !ok {
		bn = textAnalyzer
	}
	return bn, ix.analyzers[bn]
}

// analyzerOK says whether a mapping may name this analyzer.
func (meta indexMeta) analyzerOK(name string) bool {
	if _, ok := bleveAnalyzerName(name); ok {
		return true
	}
	_, ok := meta.Settings["index.analysis.analyzer."+name+".type"]
	if !ok {
		_, ok = meta.Settings["index.analysis.analyzer."+name+".tokenizer"]
	}
	return ok
}

func bleveConfig() map[string]any {
	// A second process on the same data dir fails fast instead of waiting.
	return map[string]any{"bolt_timeout": "2s"}
}

// createIndex makes a new index at path ("" for memory).
func createIndex(name, path string, meta indexMeta, m *mappingDef) (*index, error) {
	bm, err := bleveMapping()
	if err != nil {
		return nil, err
	}
	bi, err := bleve.NewUsing(path, bm, scorch.Name, scorch.Name, bleveConfig())
	if err != nil {
		return nil, fmt.Errorf("create index %s: %w", name, err)
	}
	ix := &index{name: name, path: path, bleve: bi, meta: meta, versions: map[string]docState{}, tombstones: map[string]tombstone{}}
	if err := ix.init(m); err != nil {
		_ = bi.Close()
		return nil, err
	}
	if err := ix.openView(); err != nil {
		_ = bi.Close()
		return nil, err
	}
	// The meta key is written last: an index directory without it is a
	// creation that never completed and is discarded on the next start.
	b := bi.NewBatch()
	mb, _ := json.Marshal(m)
	b.SetInternal([]byte(keyMapping), mb)
	metab, _ := json.Marshal(meta)
	b.SetInternal([]byte(keyMeta), metab)
	if err := bi.Batch(b); err != nil {
		_ = ix.view.Close()
		_ = bi.Close()
		return nil, fmt.Errorf("create index %s: store metadata: %w", name, err)
	}
	return ix, nil
}

// openIndex opens an index persisted at path. It returns nil and no error
// for a directory whose creation never completed.
func openIndex(name, path string, logger *slog.Logger) (*index, error) {
	bi, err := bleve.OpenUsing(path, bleveConfig())
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", name, err)
	}
	ix := &index{name: name, path: path, bleve: bi, versions: map[string]docState{}, tombstones: map[string]tombstone{}}
	fail := func(err error) (*index, error) {
		_ = bi.Close()
		return nil, err
	}
	metab, err := bi.GetInternal([]byte(keyMeta))
	if err != nil {
		return fail(fmt.Errorf("open index %s: read metadata: %w", name, err))
	}
	if metab == nil {
		_ = bi.Close()
		return nil, nil
	}
	if err := json.Unmarshal(metab, &ix.meta); err != nil {
		return fail(fmt.Errorf("open index %s: decode metadata: %w", name, err))
	}
	m := newMapping()
	if mb, err := bi.GetInternal([]byte(keyMapping)); err != nil {
		return fail(fmt.Errorf("open index %s: read mapping: %w", name, err))
	} else if mb != nil {
		if err := json.Unmarshal(mb, m); err != nil {
			return fail(fmt.Errorf("open index %s: decode mapping: %w", name, err))
		}
		if m.Props == nil {
			m.Props = map[string]*fieldDef{}
		}
	}
	// The tombstones of deletes are not brought back: OpenSearch keeps them
	// in memory only (its engine's live version map), so a restart, or a
	// shard moved to another node, forgets every delete the last flush
	// wrote, whatever index.gc_deletes says (elastic/elasticsearch#101178).
	// Locally a restart forgets them all, which is no kinder. The key
	// where releases before 0.13.0 kept them goes too, so that a stack of
	// one of them, run again on this data, does not find them back.
	ix.tombstones = map[string]tombstone{}
	if err := bi.DeleteInternal([]byte(keyOldTombstones)); err != nil {
		return fail(fmt.Errorf("open index %s: drop old tombstones: %w", name, err))
	}
	if sb, err := bi.GetInternal([]byte(keySeqNo)); err != nil {
		return fail(fmt.Errorf("open index %s: read sequence number: %w", name, err))
	} else if len(sb) == 8 {
		ix.seqNo = int64(binary.BigEndian.Uint64(sb))
	}
	if err := ix.init(m); err != nil {
		return fail(err)
	}
	if err := ix.openView(); err != nil {
		return fail(err)
	}
	if err := ix.rebuildView(logger); err != nil {
		_ = ix.view.Close()
		return fail(err)
	}
	return ix, nil
}

func (ix *index) init(m *mappingDef) error {
	if ix.meta.Settings == nil {
		ix.meta.Settings = map[string]string{}
	}
	if err := ix.loadAnalyzers(); err != nil {
		return err
	}
	ix.maxResultWindow = defaultMaxResultWindow
	if v, ok := ix.meta.Settings["index.max_result_window"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("index %s: bad index.max_result_window %q", ix.name, v)
		}
		ix.maxResultWindow = n
	}
	if v, ok := ix.meta.Settings["index.gc_deletes"]; ok {
		d, err := parseDuration(v)
		if err != nil {
			return fmt.Errorf("index %s: bad index.gc_deletes: %w", ix.name, err)
		}
		ix.gcDeletes = d
	}
	every, err := refreshInterval(ix.meta.Settings)
	if err != nil {
		return fmt.Errorf("index %s: %w", ix.name, err)
	}
	ix.refreshEvery = every
	ix.mapping.Store(m)
	return nil
}

// acquire holds the index open for one operation; release with ix.life.RUnlock.
func (ix *index) acquire() *apiError {
	ix.life.RLock()
	if ix.closed {
		ix.life.RUnlock()
		return indexNotFound(ix.name)
	}
	return nil
}

// close waits for running operations and closes the bleve index.
func (ix *index) close() error {
	ix.life.Lock()
	defer ix.life.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	ix.releaseWaiters()
	var viewErr error
	if ix.view != nil {
		viewErr = ix.view.Close()
	}
	if err := ix.bleve.Close(); err != nil {
		return fmt.Errorf("close index %s: %w", ix.name, err)
	}
	if viewErr != nil {
		return fmt.Errorf("close index %s: search view: %w", ix.name, viewErr)
	}
	return nil
}

// drop closes the index and removes its files.
func (ix *index) drop(trash string) error {
	if err := ix.close(); err != nil {
		return err
	}
	if ix.path == "" {
		return nil
	}
	// Renaming first makes the removal atomic as far as a restart can see.
	if err := os.MkdirAll(trash, 0o755); err != nil {
		return fmt.Errorf("drop index %s: %w", ix.name, err)
	}
	dead := filepath.Join(trash, fmt.Sprintf("%s-%d", ix.name, time.Now().UnixNano()))
	if err := os.Rename(ix.path, dead); err != nil {
		return fmt.Errorf("drop index %s: %w", ix.name, err)
	}
	if err := os.RemoveAll(dead); err != nil {
		return fmt.Errorf("drop index %s: %w", ix.name, err)
	}
	return nil
}

// encodeDocMeta packs a document's version and sequence number for the _meta stored field.
func encodeDocMeta(s docState) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(s.version))
	binary.BigEndian.PutUint64(b[8:], uint64(s.seqNo))
	return b
}

func decodeDocMeta(b []byte) (docState, bool) {
	if len(b) != 16 {
		return docState{}, false
	}
	return docState{version: int64(binary.BigEndian.Uint64(b)), seqNo: int64(binary.BigEndian.Uint64(b[8:]))}, true
}

// storedDoc is a document read back from the index.
type storedDoc struct {
	source []byte
	state  docState
}

// load reads a live document; ok is false when there is none.
func (ix *index) load(id string) (doc storedDoc, ok bool, err error) {
	d, err := ix.bleve.Document(id)
	if err != nil {
		return storedDoc{}, false, fmt.Errorf("index %s: read document %q: %w", ix.name, id, err)
	}
	if d == nil {
		return storedDoc{}, false, nil
	}
	var haveMeta bool
	d.VisitFields(func(f bleveindex.Field) {
		switch f.Name() {
		case fieldSource:
			doc.source = append([]byte(nil), f.Value()...)
		case fieldMeta:
			doc.state, haveMeta = decodeDocMeta(f.Value())
		}
	})
	if !haveMeta {
		return storedDoc{}, false, fmt.Errorf("index %s: document %q has no version", ix.name, id)
	}
	return doc, true, nil
}
