package search

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// versionCreated is the index.version.created of OpenSearch 2.19.0.
const versionCreated = "136407927"

func (s *Server) handleCreateIndex(w http.ResponseWriter, q *request, name string) (int, any) {
	if e := validIndexName(name); e != nil {
		return 0, e
	}
	raw, e := q.body(w)
	if e != nil {
		return 0, e
	}
	var body map[string]json.RawMessage
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := strictUnmarshal(raw, &body); err != nil {
			return 0, jsonParseError(err)
		}
	}
	settings := map[string]string{}
	m := newMapping()
	for _, key := range slices.Sorted(maps.Keys(body)) {
		switch key {
		case "settings":
			if settings, e = parseSettings(body[key]); e != nil {
				return 0, e
			}
		case "mappings", "aliases":
		default:
			return 0, parsingError("unknown key [%s] for create index", key)
		}
	}
	if raw, ok := body["mappings"]; ok && string(raw) != "null" {
		meta := indexMeta{Settings: settings}
		if e := (mappingParser{analyzerOK: meta.analyzerOK}).parse(raw, m); e != nil {
			return 0, e
		}
	}
	if raw, ok := body["aliases"]; ok {
		var aliases map[string]json.RawMessage
		if err := json.Unmarshal(raw, &aliases); err != nil {
			return 0, parsingError("malformed [aliases]: %v", err)
		}
		if len(aliases) > 0 {
			return 0, unsupported("index aliases")
		}
	}
	_, e, err := s.createIndex(name, settings, m, false)
	if e != nil || err != nil {
		return 0, firstErr(e, err)
	}
	return http.StatusOK, map[string]any{"acknowledged": true, "shards_acknowledged": true, "index": name}
}

// parseSettings flattens index settings to "index.*" keys with string
// values, as OpenSearch stores them, and checks the ones the service uses.
func parseSettings(raw json.RawMessage) (map[string]string, *apiError) {
	var tree map[string]any
	if err := strictUnmarshal(raw, &tree); err != nil {
		return nil, badRequest("settings_exception", "failed to parse settings: %v", err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				walk(prefix+k+".", sub)
			}
			return
		}
		key := strings.TrimSuffix(prefix, ".")
		if !strings.HasPrefix(key, "index.") {
			key = "index." + key
		}
		switch x := v.(type) {
		case string:
			out[key] = x
		case nil:
		default:
			b, _ := json.Marshal(x)
			out[key] = string(b)
		}
	}
	walk("", tree)
	for _, k := range []string{"index.uuid", "index.creation_date", "index.provided_name", "index.version.created"} {
		delete(out, k)
	}
	if v, ok := out["index.gc_deletes"]; ok {
		if _, err := parseDuration(v); err != nil {
			return nil, illegalArgument("failed to parse value [%s] for setting [index.gc_deletes]", v)
		}
	}
	if _, err := refreshInterval(out); err != nil {
		return nil, illegalArgument("%s", err.Error())
	}
	if v, ok := out["index.max_result_window"]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return nil, illegalArgument("failed to parse value [%s] for setting [index.max_result_window], must be >= [1]", v)
		}
	}
	return out, nil
}

// settingsView is an index's settings as GET returns them.
func (ix *index) settingsView(flat bool) any {
	all := map[string]string{
		"index.number_of_shards":   "1",
		"index.number_of_replicas": "1",
	}
	maps.Copy(all, ix.meta.Settings)
	all["index.uuid"] = ix.meta.UUID
	all["index.creation_date"] = strconv.FormatInt(ix.meta.CreatedMS, 10)
	all["index.provided_name"] = ix.name
	all["index.version.created"] = versionCreated
	if flat {
		return all
	}
	root := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		parts := strings.Split(k, ".")
		cur := root
		for _, p := range parts[:len(parts)-1] {
			next, ok := cur[p].(map[string]any)
			if !ok {
				if _, leaf := cur[p]; leaf {
					break
				}
				next = map[string]any{}
				cur[p] = next
			}
			cur = next
		}
		cur[parts[len(parts)-1]] = all[k]
	}
	return root
}

func (s *Server) withIndex(name string, fn func(ix *index) (int, any)) (int, any) {
	ix, e := s.lookupIndex(name)
	if e != nil {
		return 0, e
	}
	if e := ix.acquire(); e != nil {
		return 0, e
	}
	defer ix.life.RUnlock()
	return fn(ix)
}

func (s *Server) handleGetIndex(q *request, name string) (int, any) {
	return s.withIndex(name, func(ix *index) (int, any) {
		return http.StatusOK, map[string]any{name: map[string]any{
			"aliases":  map[string]any{},
			"mappings": ix.mapping.Load().tree(),
			"settings": ix.settingsView(q.flag("flat_settings")),
		}}
	})
}

func (s *Server) handleGetMapping(name string) (int, any) {
	return s.withIndex(name, func(ix *index) (int, any) {
		return http.StatusOK, map[string]any{name: map[string]any{"mappings": ix.mapping.Load().tree()}}
	})
}

func (s *Server) handleGetSettings(q *request, name string) (int, any) {
	return s.withIndex(name, func(ix *index) (int, any) {
		return http.StatusOK, map[string]any{name: map[string]any{"settings": ix.settingsView(q.flag("flat_settings"))}}
	})
}

func (s *Server) handlePutMapping(w http.ResponseWriter, q *request, name string) (int, any) {
	raw, e := q.body(w)
	if e != nil {
		return 0, e
	}
	return s.withIndex(name, func(ix *index) (int, any) {
		if e, err := ix.putMapping(raw); e != nil || err != nil {
			return 0, firstErr(e, err)
		}
		return http.StatusOK, map[string]any{"acknowledged": true}
	})
}

// putMapping adds fields to the mapping; existing fields keep their type.
func (ix *index) putMapping(raw []byte) (*apiError, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	m := ix.mapping.Load().clone()
	if e := (mappingParser{analyzerOK: ix.meta.analyzerOK}).parse(raw, m); e != nil {
		return e, nil
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("index %s: encode mapping: %w", ix.name, err)
	}
	b := ix.bleve.NewBatch()
	b.SetInternal([]byte(keyMapping), mb)
	if err := ix.bleve.Batch(b); err != nil {
		return nil, fmt.Errorf("index %s: store mapping: %w", ix.name, err)
	}
	ix.mapping.Store(m)
	return nil, nil
}
