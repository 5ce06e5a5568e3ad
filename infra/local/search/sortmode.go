package search

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2/search"
)

// Sort modes pick one value of a multi-valued numeric field, as OpenSearch's
// MultiValueMode does. Served: min and max, which bleve sorts by. Refused
// with a 400: sum, avg and median, which nothing shopstream sends uses
// (docs/decisions.md, "Local search").
var (
	sortModes        = []string{"min", "max"}
	unsupportedModes = []string{"sum", "avg", "median"}
)

// numbersAt reads the numbers a document's source holds at a dotted field
// path, arrays flattened, as JSON numbers (exact: a long keeps its 64 bits).
// Numeric strings count, as OpenSearch coerces them.
func numbersAt(source []byte, field string) []json.Number {
	dec := json.NewDecoder(bytes.NewReader(source))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil
	}
	var out []json.Number
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e, path)
			}
		case map[string]any:
			if len(path) > 0 {
				walk(v[path[0]], path[1:])
			}
		case json.Number:
			if len(path) == 0 {
				out = append(out, v)
			}
		case string:
			if len(path) == 0 {
				if _, err := strconv.ParseFloat(v, 64); err == nil {
					out = append(out, json.Number(v))
				}
			}
		}
	}
	walk(doc, strings.Split(field, "."))
	return out
}

// pickLong applies a mode to a long field's values; ok is false when the
// document has none.
func pickLong(nums []json.Number, mode string) (int64, bool) {
	vs := make([]int64, 0, len(nums))
	for _, n := range nums {
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			vs = append(vs, i)
		} else if f, err := strconv.ParseFloat(string(n), 64); err == nil {
			vs = append(vs, int64(f)) // a long field truncates a fraction
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if mode == "max" {
		return vs[len(vs)-1], true
	}
	return vs[0], true
}

// pickDouble applies a mode to a double field's values.
func pickDouble(nums []json.Number, mode string) (float64, bool) {
	vs := make([]float64, 0, len(nums))
	for _, n := range nums {
		if f, err := strconv.ParseFloat(string(n), 64); err == nil {
			vs = append(vs, f)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if mode == "max" {
		return vs[len(vs)-1], true
	}
	return vs[0], true
}

// modeOf is the mode a sort key uses: its own, else min ascending and max
// descending.
func modeOf(k sortKey) string {
	if k.mode != "" {
		return k.mode
	}
	if k.desc {
		return "max"
	}
	return "min"
}

// sourceSortValue is the sort value of a numeric field from the hit's
// source: exact for a long (bleve keeps numbers as float64, which loses a
// long's low bits), by the key's mode.
func sourceSortValue(spec sortSpec, source []byte) (any, bool) {
	nums := numbersAt(source, spec.key.field)
	switch spec.kind {
	case kindLong:
		v, ok := pickLong(nums, modeOf(spec.key))
		return v, ok
	case kindDouble:
		v, ok := pickDouble(nums, modeOf(spec.key))
		return v, ok
	}
	return nil, false
}

// hitSource is the stored source of a hit.
func hitSource(h *search.DocumentMatch) []byte {
	src, _ := h.Fields[fieldSource].(string)
	return []byte(src)
}
