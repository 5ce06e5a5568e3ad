// Package search is the stack's OpenSearch endpoint: a subset of the
// OpenSearch REST API on bleve, so the product's code reaches it with the
// unchanged opensearch-go client, as it reaches Amazon OpenSearch.
//
// It covers index administration (create with settings and mappings, delete,
// exists, get, mapping and settings reads), documents (index, create,
// update, get, delete, with internal and external versioning and delete
// tombstones kept for index.gc_deletes), the bulk API, and search and count
// with the common query DSL (match_all, match, match_phrase, multi_match,
// term, terms, range, bool, ids, exists, prefix, wildcard, regexp, fuzzy,
// constant_score, dis_max), paging, sorting, track_total_hits and _source
// filtering. Anything else is answered with a 400 that names it.
//
// Each index is one bleve index, in memory or under the data directory.
// Writes are acknowledged once bleve has persisted them; a search sees
// the writes made searchable by a refresh (refresh.go): every second, or at
// once for a write sent with ?refresh.
package search

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Identity the service reports; clients check the distribution and version.
const (
	clusterName    = "shopstream-local"
	versionNumber  = "2.19.0"
	luceneVersion  = "9.12.1"
	maxBodyBytes   = 100 << 20 // OpenSearch's default http.max_content_length
	contentTypeHdr = "application/json; charset=UTF-8"
)

// Server is a local OpenSearch endpoint.
type Server struct {
	// GCDeletes is how long a deleted document's version is remembered
	// (index.gc_deletes) for indexes that do not set it; zero means
	// OpenSearch's default of 60 s. Set it before serving requests.
	GCDeletes time.Duration
	// RefuseExplicitIndex answers as a domain with
	// rest.action.multi.allow_explicit_index false, the deployed one
	// (infra/cdk): a bulk request whose action lines name an _index is
	// refused whole, 400 illegal_argument_exception. OpenSearch's default,
	// false here, accepts them. Set it before serving requests.
	RefuseExplicitIndex bool

	dir         string
	logger      *slog.Logger
	clusterUUID string

	faults faults

	mu      sync.RWMutex
	indexes map[string]*index
	closed  bool
	stop    chan struct{} // ends the scheduled refreshes
}

// New opens the search service. dir == "" keeps every index in memory;
// otherwise indexes live under dir and survive a restart, including a kill
// of the process for acknowledged writes.
func New(dir string, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{dir: dir, logger: logger, clusterUUID: randomHex(11), indexes: map[string]*index{}, stop: make(chan struct{})}
	if dir == "" {
		go s.scheduleRefreshes(s.stop)
		return s, nil
	}
	if err := os.MkdirAll(s.indicesDir(), 0o755); err != nil {
		return nil, fmt.Errorf("open search data dir: %w", err)
	}
	if err := os.RemoveAll(s.trashDir()); err != nil {
		return nil, fmt.Errorf("open search data dir: clear dropped indexes: %w", err)
	}
	entries, err := os.ReadDir(s.indicesDir())
	if err != nil {
		return nil, fmt.Errorf("open search data dir: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name, path := e.Name(), filepath.Join(s.indicesDir(), e.Name())
		if validIndexName(name) != nil {
			logger.Warn("search: skipping a directory that is not an index", "path", path)
			continue
		}
		ix, err := openIndex(name, path, logger)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		if ix == nil {
			logger.Warn("search: removing an index whose creation did not complete", "index", name)
			if err := os.RemoveAll(path); err != nil {
				_ = s.Close()
				return nil, fmt.Errorf("remove incomplete index %s: %w", name, err)
			}
			continue
		}
		s.indexes[name] = ix
	}
	logger.Info("search: opened", "dir", dir, "indexes", len(s.indexes))
	go s.scheduleRefreshes(s.stop)
	return s, nil
}

func (s *Server) indicesDir() string { return filepath.Join(s.dir, "indices") }
func (s *Server) trashDir() string   { return filepath.Join(s.dir, "trash") }

// Close closes every index. Requests after Close get 503.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.stop)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(s.indexes)) {
		errs = append(errs, s.indexes[name].close())
	}
	s.indexes = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close search service: %w", err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// validIndexName applies OpenSearch's rules for index names.
func validIndexName(name string) *apiError {
	bad := func(why string) *apiError {
		e := badRequest("invalid_index_name_exception", "Invalid index name [%s], %s", name, why)
		e.index, e.uuid = name, "_na_"
		return e
	}
	switch {
	case name == "":
		return bad("must not be empty")
	case name == "." || name == "..":
		return bad("must not be '.' or '..'")
	case strings.ToLower(name) != name:
		return bad("must be lowercase")
	case strings.ContainsAny(name, "\\/*?\"<>| ,#:"):
		return bad(`must not contain the following characters [ , ", *, \, <, |, ,, >, /, ?, #, :]`)
	case strings.IndexAny(name[:1], "_-+") == 0:
		return bad("must not start with '_', '-', or '+'")
	case len(name) > 255:
		return bad("index name is too long, (" + fmt.Sprint(len(name)) + " > 255)")
	}
	return nil
}

// lookupIndex returns an existing index for a single-index operation.
func (s *Server) lookupIndex(name string) (*index, *apiError) {
	if strings.ContainsAny(name, ",*") || name == "_all" {
		return nil, unsupported("operations on several indexes [%s]", name)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, newError(http.StatusServiceUnavailable, "node_closed_exception", "the search service is closed")
	}
	ix, ok := s.indexes[name]
	if !ok {
		return nil, indexNotFound(name)
	}
	return ix, nil
}

// createIndex creates an index; autoCreate returns an existing one instead
// of failing, as a write to a missing index does.
func (s *Server) createIndex(name string, settings map[string]string, m *mappingDef, autoCreate bool) (*index, *apiError, error) {
	if e := validIndexName(name); e != nil {
		return nil, e, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, newError(http.StatusServiceUnavailable, "node_closed_exception", "the search service is closed"), nil
	}
	if ix, ok := s.indexes[name]; ok {
		if autoCreate {
			return ix, nil, nil
		}
		e := badRequest("resource_already_exists_exception", "index [%s/%s] already exists", name, ix.meta.UUID)
		e.index, e.uuid = name, ix.meta.UUID
		return nil, e, nil
	}
	if settings == nil {
		settings = map[string]string{}
	}
	if m == nil {
		m = newMapping()
	}
	meta := indexMeta{UUID: randomHex(11), CreatedMS: time.Now().UnixMilli(), Settings: settings}
	path := ""
	if s.dir != "" {
		path = filepath.Join(s.indicesDir(), name)
		// A leftover of an unfinished creation is not an index.
		if err := os.RemoveAll(path); err != nil {
			return nil, nil, fmt.Errorf("create index %s: %w", name, err)
		}
	}
	ix, err := createIndex(name, path, meta, m)
	if err != nil {
		return nil, nil, err
	}
	s.indexes[name] = ix
	s.logger.Info("search: index created", "index", name, "auto", autoCreate)
	return ix, nil, nil
}

func (s *Server) dropIndex(name string) (*apiError, error) {
	if strings.ContainsAny(name, ",*") || name == "_all" {
		return unsupported("deleting several indexes [%s]", name), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ix, ok := s.indexes[name]
	if !ok || s.closed {
		return indexNotFound(name), nil
	}
	delete(s.indexes, name)
	if err := ix.drop(s.trashDir()); err != nil {
		return nil, err
	}
	s.logger.Info("search: index deleted", "index", name)
	return nil, nil
}

// request is one HTTP request on its way through the handlers.
type request struct {
	r     *http.Request
	segs  []string
	query url.Values
	start time.Time
}

func (q *request) param(name string) (string, bool) {
	v, ok := q.query[name]
	if !ok || len(v) == 0 {
		return "", ok
	}
	return v[len(v)-1], true
}

func (q *request) flag(name string) bool {
	v, ok := q.param(name)
	return ok && (v == "" || v == "true")
}

func (q *request) tookMS() int64 { return time.Since(q.start).Milliseconds() }

// body reads the request body, gunzipping it when the client compressed it.
func (q *request) body(w http.ResponseWriter) ([]byte, *apiError) {
	var rd io.Reader = http.MaxBytesReader(w, q.r.Body, maxBodyBytes)
	if strings.EqualFold(q.r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, badRequest("parse_exception", "request body is not valid gzip: %v", err)
		}
		defer zr.Close()
		rd = zr
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, newError(http.StatusRequestEntityTooLarge, "content_too_long_exception", "request body is larger than %d bytes", maxBodyBytes)
		}
		return nil, badRequest("parse_exception", "cannot read the request body: %v", err)
	}
	return b, nil
}

// statusWriter records the status for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// ServeHTTP answers OpenSearch REST requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == FaultsPath {
		s.faults.hook(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	q := &request{r: r, query: r.URL.Query(), start: time.Now()}
	status, body := s.route(sw, q)
	s.respond(sw, q, status, body)
	level := slog.LevelDebug
	if sw.status >= 500 {
		level = slog.LevelError
	}
	s.logger.Log(r.Context(), level, "search: request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "took", time.Since(q.start))
}

// respond writes a JSON answer; body may be an *apiError or an error
// (a failure of the service itself, answered 500).
func (s *Server) respond(w http.ResponseWriter, q *request, status int, body any) {
	switch b := body.(type) {
	case *apiError:
		status, body = b.status, b.body()
	case error:
		s.logger.Error("search: request failed", "method", q.r.Method, "path", q.r.URL.Path, "err", b)
		e := newError(http.StatusInternalServerError, "exception", "%v", b)
		status, body = e.status, e.body()
	}
	w.Header().Set("Content-Type", contentTypeHdr)
	if q.r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	// Documents go back as they were sent: no HTML escaping.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if q.flag("pretty") {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(body); err != nil {
		s.logger.Error("search: encode response", "err", err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"root_cause":[],"type":"exception","reason":"cannot encode the response"},"status":500}` + "\n")
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// splitPath splits an escaped URL path into unescaped segments, so an id
// may contain an escaped slash.
func splitPath(escaped string) ([]string, error) {
	var segs []string
	for _, part := range strings.Split(strings.Trim(escaped, "/"), "/") {
		if part == "" {
			continue
		}
		p, err := url.PathUnescape(part)
		if err != nil {
			return nil, fmt.Errorf("bad path segment %q: %w", part, err)
		}
		segs = append(segs, p)
	}
	return segs, nil
}

func methodNotAllowed(q *request, allowed ...string) (int, any) {
	return http.StatusMethodNotAllowed, map[string]any{
		"error":  fmt.Sprintf("Incorrect HTTP method for uri [%s] and method [%s], allowed: [%s]", q.r.URL.RequestURI(), q.r.Method, strings.Join(allowed, ", ")),
		"status": http.StatusMethodNotAllowed,
	}
}

func noHandler(q *request) (int, any) {
	return 0, badRequest("illegal_argument_exception", "no handler found for uri [%s] and method [%s] (not supported by the local search service)", q.r.URL.Path, q.r.Method)
}

// route dispatches a request; it returns the status and the body to send.
func (s *Server) route(w http.ResponseWriter, q *request) (int, any) {
	segs, err := splitPath(q.r.URL.EscapedPath())
	if err != nil {
		return 0, badRequest("illegal_argument_exception", "%v", err)
	}
	q.segs = segs
	m := q.r.Method
	if len(segs) == 0 {
		if m != http.MethodGet && m != http.MethodHead {
			return methodNotAllowed(q, "GET", "HEAD")
		}
		return http.StatusOK, s.info()
	}
	if strings.HasPrefix(segs[0], "_") {
		return s.routeSystem(w, q)
	}
	name := segs[0]
	if len(segs) == 1 {
		switch m {
		case http.MethodPut:
			return s.handleCreateIndex(w, q, name)
		case http.MethodDelete:
			if e, err := s.dropIndex(name); e != nil || err != nil {
				return 0, firstErr(e, err)
			}
			return http.StatusOK, map[string]any{"acknowledged": true}
		case http.MethodHead:
			if _, e := s.lookupIndex(name); e != nil {
				return e.status, nil
			}
			return http.StatusOK, nil
		case http.MethodGet:
			return s.handleGetIndex(q, name)
		}
		return methodNotAllowed(q, "DELETE", "GET", "HEAD", "PUT")
	}
	switch op := segs[1]; op {
	case "_bulk":
		if m != http.MethodPost && m != http.MethodPut {
			return methodNotAllowed(q, "POST", "PUT")
		}
		return s.handleBulk(w, q, name)
	case "_search", "_count":
		if len(segs) != 2 {
			return noHandler(q)
		}
		if m != http.MethodPost && m != http.MethodGet {
			return methodNotAllowed(q, "GET", "POST")
		}
		return s.handleSearch(w, q, name, op == "_count")
	case "_refresh", "_flush":
		if m != http.MethodPost && m != http.MethodGet {
			return methodNotAllowed(q, "GET", "POST")
		}
		ix, e := s.lookupIndex(name)
		if e != nil {
			return 0, e
		}
		if op == "_refresh" {
			ok, err := ix.refresh()
			if err != nil {
				return 0, err
			}
			if !ok {
				return 0, indexNotFound(name) // deleted meanwhile
			}
		}
		return http.StatusOK, map[string]any{"_shards": shardsInfo{Total: 1, Successful: 1}}
	case "_mapping", "_mappings":
		switch m {
		case http.MethodGet:
			return s.handleGetMapping(name)
		case http.MethodPut, http.MethodPost:
			return s.handlePutMapping(w, q, name)
		}
		return methodNotAllowed(q, "GET", "POST", "PUT")
	case "_settings":
		if m != http.MethodGet {
			return noHandler(q)
		}
		return s.handleGetSettings(q, name)
	case "_doc", "_create", "_update", "_source":
		return s.routeDoc(w, q, name, op)
	}
	return noHandler(q)
}

func (s *Server) routeSystem(w http.ResponseWriter, q *request) (int, any) {
	segs, m := q.segs, q.r.Method
	switch {
	case segs[0] == "_bulk" && len(segs) == 1:
		if m != http.MethodPost && m != http.MethodPut {
			return methodNotAllowed(q, "POST", "PUT")
		}
		return s.handleBulk(w, q, "")
	case segs[0] == "_cluster" && len(segs) >= 2 && segs[1] == "health" && len(segs) <= 3:
		if m != http.MethodGet {
			return methodNotAllowed(q, "GET")
		}
		if len(segs) == 3 {
			for _, name := range strings.Split(segs[2], ",") {
				if _, e := s.lookupIndex(name); e != nil {
					return 0, e
				}
			}
		}
		return http.StatusOK, s.health()
	case (segs[0] == "_refresh" || segs[0] == "_flush") && len(segs) == 1:
		s.mu.RLock()
		ixs := slices.Collect(maps.Values(s.indexes))
		s.mu.RUnlock()
		if segs[0] == "_refresh" {
			for _, ix := range ixs {
				if _, err := ix.refresh(); err != nil { // an index dropped meanwhile is left alone
					return 0, err
				}
			}
		}
		return http.StatusOK, map[string]any{"_shards": shardsInfo{Total: len(ixs), Successful: len(ixs)}}
	case segs[0] == "_search" || segs[0] == "_count" || segs[0] == "_msearch":
		return 0, unsupported("searching without naming exactly one index")
	}
	return noHandler(q)
}

func (s *Server) routeDoc(w http.ResponseWriter, q *request, name, op string) (int, any) {
	m := q.r.Method
	switch {
	case op == "_doc" && len(q.segs) == 2:
		if m != http.MethodPost {
			return methodNotAllowed(q, "POST")
		}
		return s.handleWriteDoc(w, q, name, actionIndex, "")
	case len(q.segs) != 3:
		return noHandler(q)
	}
	id := q.segs[2]
	switch op {
	case "_doc":
		switch m {
		case http.MethodPut, http.MethodPost:
			action := actionIndex
			if v, _ := q.param("op_type"); v == "create" {
				action = actionCreate
			}
			return s.handleWriteDoc(w, q, name, action, id)
		case http.MethodGet, http.MethodHead:
			return s.handleGetDoc(q, name, id, false)
		case http.MethodDelete:
			return s.handleWriteDoc(w, q, name, actionDelete, id)
		}
		return methodNotAllowed(q, "DELETE", "GET", "HEAD", "POST", "PUT")
	case "_create":
		if m != http.MethodPut && m != http.MethodPost {
			return methodNotAllowed(q, "POST", "PUT")
		}
		return s.handleWriteDoc(w, q, name, actionCreate, id)
	case "_update":
		if m != http.MethodPost {
			return methodNotAllowed(q, "POST")
		}
		return s.handleWriteDoc(w, q, name, actionUpdate, id)
	case "_source":
		if m != http.MethodGet && m != http.MethodHead {
			return methodNotAllowed(q, "GET", "HEAD")
		}
		return s.handleGetDoc(q, name, id, true)
	}
	return noHandler(q)
}

func firstErr(e *apiError, err error) any {
	if e != nil {
		return e
	}
	return err
}

func (s *Server) info() map[string]any {
	return map[string]any{
		"name":         clusterName,
		"cluster_name": clusterName,
		"cluster_uuid": s.clusterUUID,
		"version": map[string]any{
			"distribution":                        "opensearch",
			"number":                              versionNumber,
			"build_type":                          "tar",
			"build_hash":                          "shopstream-local",
			"build_date":                          "2025-02-01T00:00:00.000000Z",
			"build_snapshot":                      false,
			"lucene_version":                      luceneVersion,
			"minimum_wire_compatibility_version":  "7.10.0",
			"minimum_index_compatibility_version": "7.0.0",
		},
		"tagline": "The OpenSearch Project: https://opensearch.org/",
	}
}

func (s *Server) health() map[string]any {
	s.mu.RLock()
	n := len(s.indexes)
	s.mu.RUnlock()
	return map[string]any{
		"cluster_name":                     clusterName,
		"status":                           "green",
		"timed_out":                        false,
		"number_of_nodes":                  1,
		"number_of_data_nodes":             1,
		"discovered_master":                true,
		"discovered_cluster_manager":       true,
		"active_primary_shards":            n,
		"active_shards":                    n,
		"relocating_shards":                0,
		"initializing_shards":              0,
		"unassigned_shards":                0,
		"delayed_unassigned_shards":        0,
		"number_of_pending_tasks":          0,
		"number_of_in_flight_fetch":        0,
		"task_max_waiting_in_queue_millis": 0,
		"active_shards_percent_as_number":  100.0,
	}
}

// shardsInfo is the _shards object of write and search responses.
type shardsInfo struct {
	Total      int  `json:"total"`
	Successful int  `json:"successful"`
	Skipped    *int `json:"skipped,omitempty"`
	Failed     int  `json:"failed"`
}
