package search

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// kind is how a field is indexed and queried.
type kind int

const (
	kindNone kind = iota
	kindObject
	kindText
	kindKeyword
	kindLong
	kindDouble
	kindBool
	kindDate
)

// kindOf maps an OpenSearch field type to its kind; ok is false for a type
// the service does not implement.
func kindOf(typ string) (k kind, ok bool) {
	switch typ {
	case "object", "nested":
		return kindObject, true
	case "text", "match_only_text":
		return kindText, true
	case "keyword", "constant_keyword", "wildcard":
		return kindKeyword, true
	case "long", "integer", "short", "byte", "unsigned_long":
		return kindLong, true
	case "double", "float", "half_float", "scaled_float":
		return kindDouble, true
	case "boolean":
		return kindBool, true
	case "date", "date_nanos":
		return kindDate, true
	}
	return kindNone, false
}

// fieldDef is one mapped field. Published definitions are never modified:
// a mapping change replaces the whole mappingDef.
type fieldDef struct {
	Type           string               `json:"type,omitempty"`
	Analyzer       string               `json:"analyzer,omitempty"`
	SearchAnalyzer string               `json:"search_analyzer,omitempty"`
	Format         string               `json:"format,omitempty"`
	IgnoreAbove    int                  `json:"ignore_above,omitempty"`
	Index          *bool                `json:"index,omitempty"`
	Dynamic        string               `json:"dynamic,omitempty"`
	Fields         map[string]*fieldDef `json:"fields,omitempty"`
}

func (d *fieldDef) kind() kind {
	k, _ := kindOf(d.Type)
	return k
}

func (d *fieldDef) indexed() bool { return d.Index == nil || *d.Index }

// mappingDef is an index's mapping, kept flat: every object and leaf field
// under its full dotted path. Multi-fields stay inside their parent's Fields.
type mappingDef struct {
	Dynamic       string               `json:"dynamic,omitempty"`
	DateDetection *bool                `json:"date_detection,omitempty"`
	Props         map[string]*fieldDef `json:"properties"`
}

func newMapping() *mappingDef {
	return &mappingDef{Props: map[string]*fieldDef{}}
}

// clone copies the path table; the definitions themselves are shared.
func (m *mappingDef) clone() *mappingDef {
	c := *m
	c.Props = maps.Clone(m.Props)
	return &c
}

func (m *mappingDef) dateDetection() bool { return m.DateDetection == nil || *m.DateDetection }

// lookup finds the definition of a path, including a multi-field such as
// "name.keyword".
func (m *mappingDef) lookup(path string) *fieldDef {
	if d, ok := m.Props[path]; ok {
		return d
	}
	if i := strings.LastIndexByte(path, '.'); i > 0 {
		if parent, ok := m.Props[path[:i]]; ok && parent.Fields != nil {
			return parent.Fields[path[i+1:]]
		}
	}
	return nil
}

// leafPaths lists every searchable leaf path, multi-fields included, sorted.
func (m *mappingDef) leafPaths() []string {
	var out []string
	for p, d := range m.Props {
		if d.kind() == kindObject {
			continue
		}
		out = append(out, p)
		for sub := range d.Fields {
			out = append(out, p+"."+sub)
		}
	}
	slices.Sort(out)
	return out
}

// dynamicFor is the dynamic setting that applies to new fields directly
// under the object at path ("" is the root).
func (m *mappingDef) dynamicFor(path string) string {
	for path != "" {
		if d, ok := m.Props[path]; ok && d.Dynamic != "" {
			return d.Dynamic
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			break
		}
		path = path[:i]
	}
	if m.Dynamic != "" {
		return m.Dynamic
	}
	return "true"
}

// tree renders the mapping the way OpenSearch returns it.
func (m *mappingDef) tree() map[string]any {
	root := map[string]any{}
	if m.Dynamic != "" {
		root["dynamic"] = m.Dynamic
	}
	if m.DateDetection != nil {
		root["date_detection"] = *m.DateDetection
	}
	props := map[string]any{}
	paths := slices.Sorted(maps.Keys(m.Props))
	for _, p := range paths {
		d := m.Props[p]
		parts := strings.Split(p, ".")
		cur := props
		for _, part := range parts[:len(parts)-1] {
			obj, _ := cur[part].(map[string]any)
			if obj == nil {
				obj = map[string]any{}
				cur[part] = obj
			}
			sub, _ := obj["properties"].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				obj["properties"] = sub
			}
			cur = sub
		}
		node, _ := cur[parts[len(parts)-1]].(map[string]any)
		if node == nil {
			node = map[string]any{}
			cur[parts[len(parts)-1]] = node
		}
		if d.kind() == kindObject {
			if d.Type == "nested" {
				node["type"] = "nested"
			}
			if d.Dynamic != "" {
				node["dynamic"] = d.Dynamic
			}
			continue
		}
		var fields map[string]any
		raw, _ := json.Marshal(d)
		_ = json.Unmarshal(raw, &fields)
		maps.Copy(node, fields)
	}
	if len(props) > 0 {
		root["properties"] = props
	}
	return root
}

// rawField is a field definition as a client sends it.
type rawField struct {
	Type           string                     `json:"type"`
	Properties     map[string]json.RawMessage `json:"properties"`
	Fields         map[string]json.RawMessage `json:"fields"`
	Analyzer       string                     `json:"analyzer"`
	SearchAnalyzer string                     `json:"search_analyzer"`
	Format         string                     `json:"format"`
	IgnoreAbove    int                        `json:"ignore_above"`
	Index          *bool                      `json:"index"`
	Dynamic        json.RawMessage            `json:"dynamic"`
}

// mappingParser turns the "mappings" of a create-index or put-mapping body
// into a mappingDef. analyzerOK says whether an analyzer name can be used.
type mappingParser struct {
	analyzerOK func(name string) bool
}

func (p mappingParser) parse(raw json.RawMessage, into *mappingDef) *apiError {
	// Mapping types are gone: a mapping under "_doc" is refused as
	// OpenSearch refuses it, not read as a field named "_doc".
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) == nil {
		if _, typed := top["_doc"]; typed {
			return illegalArgument("The mapping definition cannot be nested under a type [_doc] unless include_type_name is set to true.")
		}
	}
	var body struct {
		Properties    map[string]json.RawMessage `json:"properties"`
		Dynamic       json.RawMessage            `json:"dynamic"`
		DateDetection *bool                      `json:"date_detection"`
	}
	if err := strictUnmarshal(raw, &body); err != nil {
		return badRequest("mapper_parsing_exception", "failed to parse mapping: %v", err)
	}
	if len(body.Dynamic) > 0 {
		dyn, err := parseDynamic(body.Dynamic)
		if err != nil {
			return err
		}
		into.Dynamic = dyn
	}
	if body.DateDetection != nil {
		into.DateDetection = body.DateDetection
	}
	return p.properties("", body.Properties, into)
}

func (p mappingParser) properties(prefix string, props map[string]json.RawMessage, into *mappingDef) *apiError {
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if name == "" {
			// OpenSearch's mapper throws an IllegalArgumentException, which
			// the mapping's parse wraps ("Create index with invalid
			// mappings", indices.create/10_basic).
			e := badRequest("mapper_parsing_exception", "Failed to parse mapping [_doc]: field name cannot be an empty string")
			e.causedBy = &errorCause{Type: "illegal_argument_exception", Reason: "field name cannot be an empty string"}
			return e
		}
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
			return badRequest("mapper_parsing_exception", "field name [%s] cannot be empty or contain empty path segments", name)
		}
		path := prefix + name
		if prefix == "" && isMetadataField(name) {
			return badRequest("mapper_parsing_exception", "Field [%s] is defined more than once or is a metadata field", name)
		}
		var rf rawField
		if err := json.Unmarshal(props[name], &rf); err != nil {
			return badRequest("mapper_parsing_exception", "failed to parse mapping of field [%s]: %v", path, err)
		}
		if rf.Type == "" && rf.Properties == nil {
			return badRequest("mapper_parsing_exception", "No type specified for field [%s]", path)
		}
		// A dotted name such as "a.b" declares the objects on its way.
		for i := strings.IndexByte(path, '.'); i > 0; i = nextDot(path, i) {
			if _, ok := into.Props[path[:i]]; !ok {
				into.Props[path[:i]] = &fieldDef{Type: "object"}
			}
		}
		def, err := p.field(path, rf, true)
		if err != nil {
			return err
		}
		if old, ok := into.Props[path]; ok && old.kind() != def.kind() {
			return illegalArgument("mapper [%s] cannot be changed from type [%s] to [%s]", path, old.Type, def.Type)
		}
		into.Props[path] = def
		if def.kind() == kindObject {
			if err := p.properties(path+".", rf.Properties, into); err != nil {
				return err
			}
		}
	}
	return nil
}

func nextDot(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '.')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func (p mappingParser) field(path string, rf rawField, allowSubfields bool) (*fieldDef, *apiError) {
	typ := rf.Type
	if typ == "" {
		typ = "object"
	}
	k, ok := kindOf(typ)
	if !ok {
		return nil, unsupported("field type [%s] of field [%s]", typ, path)
	}
	def := &fieldDef{Type: typ}
	if k == kindObject {
		if len(rf.Dynamic) > 0 {
			dyn, err := parseDynamic(rf.Dynamic)
			if err != nil {
				return nil, err
			}
			def.Dynamic = dyn
		}
		return def, nil
	}
	if rf.Properties != nil {
		return nil, badRequest("mapper_parsing_exception", "field [%s] of type [%s] cannot have properties", path, typ)
	}
	def.Index = rf.Index
	def.Format = rf.Format
	if k == kindKeyword {
		def.IgnoreAbove = rf.IgnoreAbove
	}
	if k == kindText {
		for _, a := range []string{rf.Analyzer, rf.SearchAnalyzer} {
			if a != "" && !p.analyzerOK(a) {
				return nil, badRequest("mapper_parsing_exception", "analyzer [%s] has not been configured in mappings", a)
			}
		}
		def.Analyzer, def.SearchAnalyzer = rf.Analyzer, rf.SearchAnalyzer
	}
	if len(rf.Fields) > 0 {
		if !allowSubfields {
			return nil, badRequest("mapper_parsing_exception", "multi-field [%s] cannot have multi-fields of its own", path)
		}
		def.Fields = map[string]*fieldDef{}
		for _, sub := range slices.Sorted(maps.Keys(rf.Fields)) {
			var srf rawField
			if err := json.Unmarshal(rf.Fields[sub], &srf); err != nil {
				return nil, badRequest("mapper_parsing_exception", "failed to parse multi-field [%s.%s]: %v", path, sub, err)
			}
			if srf.Type == "" || srf.Type == "object" || srf.Type == "nested" {
				return nil, badRequest("mapper_parsing_exception", "multi-field [%s.%s] needs a leaf type", path, sub)
			}
			sd, err := p.field(path+"."+sub, srf, false)
			if err != nil {
				return nil, err
			}
			def.Fields[sub] = sd
		}
	}
	return def, nil
}

func parseDynamic(raw json.RawMessage) (string, *apiError) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", badRequest("mapper_parsing_exception", "malformed [dynamic]: %v", err)
	}
	switch v {
	case true, "true":
		return "true", nil
	case false, "false":
		return "false", nil
	case "strict":
		return "strict", nil
	}
	return "", badRequest("mapper_parsing_exception", "unknown value for [dynamic]: %v (use true, false or strict)", v)
}

// isMetadataField reports the names OpenSearch reserves at the root of a document.
func isMetadataField(name string) bool {
	switch name {
	case "_id", "_index", "_source", "_version", "_seq_no", "_primary_term", "_routing",
		"_field_names", "_ignored", "_meta", "_doc_count", "_data_stream_timestamp", "_type":
		return true
	}
	return false
}

// dynamicDef is the definition OpenSearch's dynamic mapping gives a value
// seen for the first time; nil when the value does not introduce a field.
func dynamicDef(v any, dateDetection bool) *fieldDef {
	switch x := v.(type) {
	case bool:
		return &fieldDef{Type: "boolean"}
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return &fieldDef{Type: "float"}
		}
		return &fieldDef{Type: "long"}
	case string:
		if dateDetection && looksLikeDate(x) {
			return &fieldDef{Type: "date"}
		}
		return &fieldDef{Type: "text", Fields: map[string]*fieldDef{"keyword": {Type: "keyword", IgnoreAbove: 256}}}
	case map[string]any:
		return &fieldDef{Type: "object"}
	case []any:
		for _, e := range x {
			if d := dynamicDef(e, dateDetection); d != nil {
				return d
			}
		}
	}
	return nil
}

// strictUnmarshal decodes JSON and rejects trailing data.
func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// scalarString renders a JSON scalar as the string a text or keyword field indexes.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return string(x), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}
