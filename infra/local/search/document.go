package search

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/document"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

const (
	textOptions    = bleveindex.IndexField | bleveindex.IncludeTermVectors
	keywordOptions = bleveindex.IndexField | bleveindex.DocValues
	valueOptions   = bleveindex.IndexField | bleveindex.DocValues
)

// decodeSource parses a document body; it must be a JSON object.
func decodeSource(raw []byte) (map[string]any, error) {
	var doc map[string]any
	if err := strictUnmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errNotObject{}
	}
	return doc, nil
}

type errNotObject struct{}

func (errNotObject) Error() string { return "the document must be a JSON object" }

// docBuilder turns a JSON document into bleve fields following the index
// mapping, adding dynamic mappings for fields it has not seen.
type docBuilder struct {
	ix    *index
	id    string
	m     *mappingDef          // mapping as of the batch so far
	added map[string]*fieldDef // fields this document introduces
	doc   *document.Document
	names map[string]struct{}
}

func newDocBuilder(ix *index, m *mappingDef, id string) *docBuilder {
	return &docBuilder{ix: ix, id: id, m: m, doc: document.NewDocument(id), names: map[string]struct{}{}}
}

func (b *docBuilder) def(path string) *fieldDef {
	if d, ok := b.added[path]; ok {
		return d
	}
	return b.m.lookup(path)
}

func (b *docBuilder) dynamicFor(parent string) string {
	for p := parent; p != ""; {
		if d, ok := b.added[p]; ok && d.Dynamic != "" {
			return d.Dynamic
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return b.m.dynamicFor(parent)
}

// build indexes src (already decoded) and the raw bytes as _source.
func (b *docBuilder) build(src map[string]any, raw []byte) *apiError {
	for k := range src {
		if isMetadataField(k) {
			return mapperParsing(b.ix, "Field [%s] is a metadata field and cannot be added inside a document. Use the index API request parameters.", k)
		}
	}
	if err := b.object("", src); err != nil {
		return err
	}
	for _, n := range slices.Sorted(maps.Keys(b.names)) {
		b.doc.AddField(document.NewTextFieldCustom(fieldFieldNames, nil, []byte(n), bleveindex.IndexField, nil))
	}
	b.doc.AddField(document.NewTextFieldWithIndexingOptions(fieldSource, nil, raw, bleveindex.StoreField))
	return nil
}

func (b *docBuilder) object(prefix string, obj map[string]any) *apiError {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k == "" || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") || strings.Contains(k, "..") {
			return mapperParsing(b.ix, "field name cannot be an empty string or contain empty path segments (document with id '%s')", b.id)
		}
		path := prefix + k
		if err := b.value(path, obj[k], nil); err != nil {
			return err
		}
	}
	return nil
}

func (b *docBuilder) value(path string, v any, pos []uint64) *apiError {
	if v == nil {
		return nil
	}
	if arr, ok := v.([]any); ok {
		for i, e := range arr {
			if err := b.value(path, e, append(slices.Clip(pos), uint64(i))); err != nil {
				return err
			}
		}
		return nil
	}
	d := b.def(path)
	if d == nil {
		nd, err := b.introduce(path, v)
		if err != nil || nd == nil {
			return err
		}
		d = nd
	}
	obj, isObj := v.(map[string]any)
	if d.kind() == kindObject {
		if !isObj {
			return mapperParsing(b.ix, "object mapping for [%s] tried to parse field [%s] as object, but found a concrete value", path, path)
		}
		b.addName(path)
		return b.object(path+".", obj)
	}
	if isObj {
		return b.parseFailure(path, d, v)
	}
	return b.leaf(path, d, v, pos)
}

// introduce applies the dynamic setting to a field seen for the first time.
// It returns the new definition, or nil and the error to report (nil when
// the field is simply not indexed).
func (b *docBuilder) introduce(path string, v any) (*fieldDef, *apiError) {
	parent, name := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, name = path[:i], path[i+1:]
	}
	switch b.dynamicFor(parent) {
	case "strict":
		in := parent
		if in == "" {
			in = "_doc"
		}
		return nil, badRequest("strict_dynamic_mapping_exception", "mapping set to strict, dynamic introduction of [%s] within [%s] is not allowed", name, in)
	case "false":
		return nil, nil
	}
	d := dynamicDef(v, b.m.dateDetection())
	if d == nil {
		return nil, nil
	}
	if b.added == nil {
		b.added = map[string]*fieldDef{}
	}
	b.added[path] = d
	return d, nil
}

func (b *docBuilder) addName(path string) {
	b.names[path] = struct{}{}
}

func (b *docBuilder) parseFailure(path string, d *fieldDef, v any) *apiError {
	preview, _ := json.Marshal(v)
	if s, ok := v.(string); ok {
		preview = []byte(s)
	}
	return mapperParsing(b.ix, "failed to parse field [%s] of type [%s] in document with id '%s'. Preview of field's value: '%s'", path, d.Type, b.id, preview)
}

func (b *docBuilder) leaf(path string, d *fieldDef, v any, pos []uint64) *apiError {
	if !d.indexed() {
		return nil
	}
	switch d.kind() {
	case kindText:
		s, ok := scalarString(v)
		if !ok {
			return b.parseFailure(path, d, v)
		}
		_, a := b.ix.analyzer(d.Analyzer)
		b.doc.AddField(document.NewTextFieldCustom(path, pos, []byte(s), textOptions, a))
	case kindKeyword:
		s, ok := scalarString(v)
		if !ok {
			return b.parseFailure(path, d, v)
		}
		if d.IgnoreAbove > 0 && utf8.RuneCountInString(s) > d.IgnoreAbove {
			return nil
		}
		b.doc.AddField(document.NewTextFieldCustom(path, pos, []byte(s), keywordOptions, nil))
	case kindLong, kindDouble:
		f, ok := toNumber(v, d.kind() == kindLong)
		if !ok {
			return b.parseFailure(path, d, v)
		}
		b.doc.AddField(document.NewNumericFieldWithIndexingOptions(path, pos, f, valueOptions))
	case kindBool:
		t, ok := toBool(v)
		if !ok {
			return b.parseFailure(path, d, v)
		}
		b.doc.AddField(document.NewBooleanFieldWithIndexingOptions(path, pos, t, valueOptions))
	case kindDate:
		ms, err := parseDateValue(v, d.Format)
		if err != nil {
			return b.parseFailure(path, d, v)
		}
		b.doc.AddField(document.NewNumericFieldWithIndexingOptions(path, pos, float64(ms), valueOptions))
	default:
		return b.parseFailure(path, d, v)
	}
	b.addName(path)
	for i := strings.IndexByte(path, '.'); i > 0; i = nextDot(path, i) {
		b.addName(path[:i])
	}
	for _, sub := range slices.Sorted(maps.Keys(d.Fields)) {
		sp := path + "." + sub
		if err := b.leaf(sp, d.Fields[sub], v, pos); err != nil {
			return err
		}
	}
	return nil
}

// toNumber coerces a JSON value to a number as OpenSearch does: numeric
// strings are accepted and integer types drop the fraction.
func toNumber(v any, integral bool) (float64, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	if integral {
		f = math.Trunc(f)
	}
	return f, true
}

func toBool(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		switch x {
		case "true":
			return true, true
		case "false", "":
			return false, true
		}
	}
	return false, false
}

// trimSource trims a body to the bytes kept as _source.
func trimSource(raw []byte) []byte {
	return bytes.TrimSpace(raw)
}
