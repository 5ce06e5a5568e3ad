package search

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

// bulkItem is one action of a bulk request.
type bulkItem struct {
	index string
	op    writeOp
	// refused is the item's own error: OpenSearch answers it in items[]
	// and carries out the rest of the bulk.
	refused *apiError
}

// itemResponse is one entry of a bulk response, and the body of a
// single-document write.
type itemResponse struct {
	Index         string      `json:"_index"`
	ID            string      `json:"_id"`
	Version       *int64      `json:"_version,omitempty"`
	Result        string      `json:"result,omitempty"`
	ForcedRefresh bool        `json:"forced_refresh,omitempty"`
	Shards        *shardsInfo `json:"_shards,omitempty"`
	SeqNo         *int64      `json:"_seq_no,omitempty"`
	PrimaryTerm   *int64      `json:"_primary_term,omitempty"`
	Status        int         `json:"status,omitempty"`
	Error         *errorCause `json:"error,omitempty"`
}

func newItemResponse(index string, r writeResult) itemResponse {
	out := itemResponse{Index: index, ID: r.id, Status: r.status}
	if r.err != nil {
		c := r.err.cause()
		out.Error = &c
		return out
	}
	version, seq, term := r.version, r.seqNo, int64(1)
	out.Version, out.Result = &version, r.result
	out.Shards = &shardsInfo{Total: 1, Successful: 1}
	if r.result != "noop" || seq > 0 {
		out.SeqNo, out.PrimaryTerm = &seq, &term
	}
	return out
}

// bulkMeta is the metadata of a bulk action line.
type bulkMeta struct {
	Index         *string          `json:"_index"`
	ID            *json.RawMessage `json:"_id"`
	Version       *json.Number     `json:"version"`
	VersionType   *string          `json:"version_type"`
	IfSeqNo       *json.Number     `json:"if_seq_no"`
	IfPrimaryTerm *json.Number     `json:"if_primary_term"`
}

// bulkMetaKeys are the metadata keys OpenSearch accepts; the ones the
// service has no use for (routing, pipelines, ...) are accepted and ignored.
func bulkMetaKeys(key string) bool {
	switch key {
	case "_index", "_id", "version", "version_type", "if_seq_no", "if_primary_term",
		"routing", "_routing", "pipeline", "require_alias", "retry_on_conflict", "_source",
		"op_type", "dynamic_templates":
		return true
	}
	return false
}

// parseBulk reads the NDJSON body of a bulk request.
func parseBulk(body []byte, pathIndex string, refuseExplicitIndex bool) ([]bulkItem, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, validationError("no requests added")
	}
	if body[len(body)-1] != '\n' {
		return nil, illegalArgument("The bulk request must be terminated by a newline [\\n]")
	}
	lines := bytes.Split(body[:len(body)-1], []byte("\n"))
	var items []bulkItem
	var invalid []string
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := bytes.TrimSpace(lines[i])
		if len(line) == 0 {
			continue
		}
		var action map[string]json.RawMessage
		if err := strictUnmarshal(line, &action); err != nil || action == nil {
			return nil, illegalArgument("Malformed action/metadata line [%d], expected a JSON object with one action: %v", lineNo, errOrNull(err))
		}
		if len(action) == 0 {
			// OpenSearch's parser wants the action's name first ("empty
			// action", bulk/10_basic).
			return nil, illegalArgument("Malformed action/metadata line [%d], expected FIELD_NAME but found [END_OBJECT]", lineNo)
		}
		if len(action) != 1 {
			return nil, illegalArgument("Malformed action/metadata line [%d], expected exactly one action but found %d", lineNo, len(action))
		}
		var name string
		var rawMeta json.RawMessage
		for k, v := range action {
			name, rawMeta = k, v
		}
		switch name {
		case actionIndex, actionCreate, actionDelete, actionUpdate:
		default:
			return nil, illegalArgument("Malformed action/metadata line [%d], expected one of [create, delete, index, update] but found [%s]", lineNo, name)
		}
		var keys map[string]json.RawMessage
		if err := strictUnmarshal(rawMeta, &keys); err != nil || keys == nil {
			return nil, illegalArgument("Malformed action/metadata line [%d], expected START_OBJECT for [%s]", lineNo, name)
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !bulkMetaKeys(k) {
				return nil, illegalArgument("Action/metadata line [%d] contains an unknown parameter [%s]", lineNo, k)
			}
		}
		var meta bulkMeta
		if err := strictUnmarshal(rawMeta, &meta); err != nil {
			return nil, illegalArgument("Malformed action/metadata line [%d]: %v", lineNo, err)
		}
		item := bulkItem{index: pathIndex, op: writeOp{action: name}}
		if meta.Index != nil && refuseExplicitIndex {
			return nil, illegalArgument("explicit index in bulk is not allowed")
		}
		if meta.Index != nil {
			item.index = *meta.Index
		}
		if meta.ID != nil && string(*meta.ID) != "null" {
			id, ok := jsonScalar(*meta.ID)
			if !ok {
				return nil, illegalArgument("Malformed action/metadata line [%d]: [_id] must be a string", lineNo)
			}
			if id == "" {
				item.refused = illegalArgument("if _id is specified it must not be empty")
			}
			item.op.id = id
		}
		get := func(key string) (string, bool) {
			switch key {
			case "version":
				if meta.Version != nil {
					return meta.Version.String(), true
				}
			case "version_type":
				if meta.VersionType != nil {
					return *meta.VersionType, true
				}
			case "if_seq_no":
				if meta.IfSeqNo != nil {
					return meta.IfSeqNo.String(), true
				}
			case "if_primary_term":
				if meta.IfPrimaryTerm != nil {
					return meta.IfPrimaryTerm.String(), true
				}
			}
			return "", false
		}
		if e := parseVersionParams(get, &item.op); e != nil {
			return nil, e
		}
		if name != actionDelete {
			i++
			if i >= len(lines) {
				return nil, illegalArgument("action/metadata line [%d] has no document line after it", lineNo)
			}
			item.op.source = lines[i]
		}
		if item.index == "" {
			invalid = append(invalid, "index is missing")
		}
		invalid = append(invalid, item.op.validate()...)
		items = append(items, item)
	}
	if len(invalid) > 0 {
		return nil, validationError(invalid...)
	}
	if len(items) == 0 {
		return nil, validationError("no requests added")
	}
	return items, nil
}

func errOrNull(err error) any {
	if err == nil {
		return "found null"
	}
	return err
}

// jsonScalar reads a JSON string or number as a string.
func jsonScalar(raw json.RawMessage) (string, bool) {
	var v any
	if err := strictUnmarshal(raw, &v); err != nil {
		return "", false
	}
	return scalarString(v)
}

type bulkResponse struct {
	Took   int64                     `json:"took"`
	Errors bool                      `json:"errors"`
	Items  []map[string]itemResponse `json:"items"`
}

func (s *Server) handleBulk(w http.ResponseWriter, q *request, pathIndex string) (int, any) {
	raw, e := q.body(w)
	if e != nil {
		return 0, e
	}
	if s.faults.takeRequestRejection() {
		return 0, rejection()
	}
	refresh, e := refreshParam(q)
	if e != nil {
		return 0, e
	}
	items, e := parseBulk(raw, pathIndex, s.RefuseExplicitIndex)
	if e != nil {
		return 0, e
	}
	results := make([]itemResponse, len(items))
	// Group the actions by index, keeping their order within each index.
	var order []string
	groups := map[string][]int{}
	for i, it := range items {
		if it.refused != nil {
			results[i] = newItemResponse(it.index, writeResult{id: it.op.id, status: it.refused.status, err: it.refused})
			continue
		}
		if s.faults.takeRejection() {
			e := rejection()
			results[i] = newItemResponse(it.index, writeResult{id: it.op.id, status: e.status, err: e})
			continue
		}
		if _, ok := groups[it.index]; !ok {
			order = append(order, it.index)
		}
		groups[it.index] = append(groups[it.index], i)
	}
	for _, name := range order {
		idxs := groups[name]
		fail := func(e *apiError) {
			for _, i := range idxs {
				results[i] = newItemResponse(name, writeResult{id: items[i].op.id, status: e.status, err: e})
			}
		}
		ix, e, err := s.indexForWrite(name, items, idxs)
		if err != nil {
			return 0, err
		}
		if e != nil {
			fail(e)
			continue
		}
		ops := make([]writeOp, len(idxs))
		for j, i := range idxs {
			ops[j] = items[i].op
		}
		res, e, err := s.applyTo(q.r.Context(), ix, ops, refresh)
		if err != nil {
			return 0, err
		}
		if e != nil {
			fail(e)
			continue
		}
		for j, i := range idxs {
			results[i] = newItemResponse(name, res[j])
			results[i].ForcedRefresh = refresh == "true"
		}
	}
	out := bulkResponse{Items: make([]map[string]itemResponse, len(items))}
	for i, r := range results {
		out.Items[i] = map[string]itemResponse{items[i].op.action: r}
		if r.Error != nil {
			out.Errors = true
		}
	}
	out.Took = q.tookMS()
	return http.StatusOK, out
}

// indexForWrite returns the index a write goes to, creating it with dynamic
// mapping when only index, create or update-with-upsert actions target it
// (a delete alone does not create an index, as in OpenSearch).
func (s *Server) indexForWrite(name string, items []bulkItem, idxs []int) (*index, *apiError, error) {
	create := false
	for _, i := range idxs {
		if items[i].op.action != actionDelete {
			create = true
		}
	}
	if !create {
		ix, e := s.lookupIndex(name)
		return ix, e, nil
	}
	return s.createIndex(name, nil, nil, true)
}

// applyTo runs writes on an index held open for the duration, then
// refreshes it as the request's ?refresh asked (refreshParam).
func (s *Server) applyTo(ctx context.Context, ix *index, ops []writeOp, refresh string) ([]writeResult, *apiError, error) {
	if e := ix.acquire(); e != nil {
		return nil, e, nil
	}
	res, err := ix.apply(ops, s.GCDeletes)
	ix.life.RUnlock() // not held while waiting for a refresh: a close must not wait for it
	if err != nil {
		return nil, nil, err
	}
	if err := ix.afterWrite(ctx, refresh); err != nil {
		return nil, nil, err
	}
	return res, nil, nil
}

// handleWriteDoc serves the single-document index, create, update and delete APIs.
func (s *Server) handleWriteDoc(w http.ResponseWriter, q *request, name, action, id string) (int, any) {
	op := writeOp{action: action, id: id}
	if action != actionDelete {
		raw, e := q.body(w)
		if e != nil {
			return 0, e
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			return 0, validationError("source is missing")
		}
		op.source = raw
	}
	if e := parseVersionParams(q.param, &op); e != nil {
		return 0, e
	}
	if reasons := op.validate(); len(reasons) > 0 {
		return 0, validationError(reasons...)
	}
	refresh, e := refreshParam(q)
	if e != nil {
		return 0, e
	}
	if id == "" && action == actionIndex {
		op.id = newID()
	}
	items := []bulkItem{{index: name, op: op}}
	ix, e, err := s.indexForWrite(name, items, []int{0})
	if e != nil || err != nil {
		return 0, firstErr(e, err)
	}
	res, e, err := s.applyTo(q.r.Context(), ix, []writeOp{op}, refresh)
	if e != nil || err != nil {
		return 0, firstErr(e, err)
	}
	r := res[0]
	if r.err != nil {
		return 0, r.err
	}
	out := newItemResponse(name, r)
	out.Status = 0
	out.ForcedRefresh = refresh == "true"
	return r.status, out
}

// handleGetDoc serves GET and HEAD of a document and of its _source.
func (s *Server) handleGetDoc(q *request, name, id string, sourceOnly bool) (int, any) {
	return s.withIndex(name, func(ix *index) (int, any) {
		doc, ok, err := ix.load(id)
		if err != nil {
			return 0, err
		}
		if !ok {
			if sourceOnly {
				e := newError(http.StatusNotFound, "resource_not_found_exception", "Document not found [%s]/[%s]", name, id)
				return 0, e
			}
			return http.StatusNotFound, map[string]any{"_index": name, "_id": id, "found": false}
		}
		if v, ok := q.param("version"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != doc.state.version {
				return 0, versionConflict(ix, "[%s]: version conflict, current version [%d] is different than the one provided [%s]", id, doc.state.version, v)
			}
		}
		filter, e := sourceFilterFromParams(q)
		if e != nil {
			return 0, e
		}
		src, err := filter.apply(doc.source)
		if err != nil {
			return 0, fmt.Errorf("index %s: filter source of %q: %w", name, id, err)
		}
		if sourceOnly {
			if src == nil {
				src = json.RawMessage("{}")
			}
			return http.StatusOK, src
		}
		out := map[string]any{
			"_index": name, "_id": id, "_version": doc.state.version,
			"_seq_no": doc.state.seqNo, "_primary_term": 1, "found": true,
		}
		if src != nil {
			out["_source"] = src
		}
		return http.StatusOK, out
	})
}
