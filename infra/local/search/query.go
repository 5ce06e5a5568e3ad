package search

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2/search/query"
)

// compiler turns OpenSearch query DSL into a bleve query for one index.
type compiler struct {
	ix *index
	m  *mappingDef
}

func isNone(q query.Query) bool {
	_, ok := q.(*query.MatchNoneQuery)
	return ok
}

func isAll(q query.Query) bool {
	_, ok := q.(*query.MatchAllQuery)
	return ok
}

func none() query.Query { return query.NewMatchNoneQuery() }

func boosted(q query.Query, boost float64) query.Query {
	if boost == 1 || isNone(q) {
		return q
	}
	if bq, ok := q.(query.BoostableQuery); ok {
		bq.SetBoost(boost * bq.Boost())
	}
	return q
}

// decodeObject reads a JSON object, keeping numbers as json.Number.
func decodeObject(raw json.RawMessage, what string) (map[string]json.RawMessage, *apiError) {
	var obj map[string]json.RawMessage
	if err := strictUnmarshal(raw, &obj); err != nil || obj == nil {
		return nil, parsingError("[%s] malformed query, expected a JSON object", what)
	}
	return obj, nil
}

func decodeValue(raw json.RawMessage) (any, bool) {
	var v any
	if err := strictUnmarshal(raw, &v); err != nil {
		return nil, false
	}
	return v, true
}

// knownUnsupported are real OpenSearch queries this service does not
// implement: nothing shopstream sends uses them (docs/decisions.md, "Local
// search"), and each is refused with a 400 naming it rather than answered
// differently from OpenSearch.
func knownUnsupported(name string) bool {
	switch name {
	case "prefix", "wildcard", "regexp", "fuzzy", "constant_score", "dis_max",
		"query_string", "simple_query_string", "nested", "has_child", "has_parent", "parent_id",
		"function_score", "script_score", "script", "geo_bounding_box", "geo_distance", "geo_polygon",
		"geo_shape", "more_like_this", "boosting", "intervals", "span_term", "span_near", "span_or",
		"span_not", "span_first", "span_multi", "span_containing", "span_within", "field_masking_span",
		"combined_fields", "match_bool_prefix", "match_phrase_prefix", "knn", "neural", "percolate",
		"rank_feature", "distance_feature", "pinned", "wrapper", "terms_set", "hybrid", "xy_shape":
		return true
	}
	return false
}

// compile translates one query clause.
func (c *compiler) compile(raw json.RawMessage) (query.Query, *apiError) {
	obj, e := decodeObject(raw, "query")
	if e != nil {
		return nil, e
	}
	if len(obj) == 0 {
		return query.NewMatchAllQuery(), nil
	}
	if len(obj) > 1 {
		keys := slices.Sorted(maps.Keys(obj))
		return nil, parsingError("[%s] malformed query, expected [END_OBJECT] but found [FIELD_NAME] [%s]", keys[0], keys[1])
	}
	for name, body := range obj {
		switch name {
		case "match_all":
			return c.matchAll(body)
		case "match_none":
			return none(), nil
		case "match":
			return c.match(body, false)
		case "match_phrase":
			return c.match(body, true)
		case "multi_match":
			return c.multiMatch(body)
		case "term":
			return c.term(body)
		case "terms":
			return c.terms(body)
		case "range":
			return c.rangeQuery(body)
		case "bool":
			return c.boolQuery(body)
		case "ids":
			return c.ids(body)
		case "exists":
			return c.exists(body)
		}
		if knownUnsupported(name) {
			return nil, unsupported("query [%s]", name)
		}
		return nil, parsingError("unknown query [%s]", name)
	}
	return nil, nil
}

// params holds the options of a query object; take removes what it reads
// so that leftovers can be reported.
type params map[string]json.RawMessage

func (p params) take(key string) (json.RawMessage, bool) {
	v, ok := p[key]
	delete(p, key)
	return v, ok
}

func (p params) float(key string, def float64) (float64, *apiError) {
	raw, ok := p.take(key)
	if !ok {
		return def, nil
	}
	v, ok := decodeValue(raw)
	if !ok {
		return 0, parsingError("[%s] must be a number", key)
	}
	f, ok := toNumber(v, false)
	if !ok {
		return 0, parsingError("[%s] must be a number", key)
	}
	return f, nil
}

func (p params) str(key string) (string, bool, *apiError) {
	raw, ok := p.take(key)
	if !ok {
		return "", false, nil
	}
	v, ok := decodeValue(raw)
	if !ok {
		return "", false, parsingError("[%s] must be a string", key)
	}
	s, ok := scalarString(v)
	if !ok {
		return "", false, parsingError("[%s] must be a string", key)
	}
	return s, true, nil
}

// rest rejects options the query does not know.
func (p params) rest(queryName string, ignored ...string) *apiError {
	for _, k := range ignored {
		delete(p, k)
	}
	delete(p, "_name")
	if len(p) > 0 {
		return parsingError("[%s] query does not support [%s]", queryName, slices.Sorted(maps.Keys(p))[0])
	}
	return nil
}

func (c *compiler) matchAll(body json.RawMessage) (query.Query, *apiError) {
	obj, e := decodeObject(body, "match_all")
	if e != nil {
		return nil, e
	}
	p := params(obj)
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	if e := p.rest("match_all"); e != nil {
		return nil, e
	}
	q := query.NewMatchAllQuery()
	if boost != 1 {
		q.SetBoost(boost)
	}
	return q, nil
}

// fieldQuery splits {"field": value-or-options} used by match, term,
// range and friends. Options in object form come back as params.
func fieldQuery(name string, body json.RawMessage) (field string, value json.RawMessage, opts params, e *apiError) {
	obj, e := decodeObject(body, name)
	if e != nil {
		return "", nil, nil, e
	}
	p := params(obj)
	var outer []string
	for k := range p {
		if k != "boost" && k != "_name" {
			outer = append(outer, k)
		}
	}
	if len(outer) != 1 {
		return "", nil, nil, parsingError("[%s] query doesn't support multiple fields, found %d", name, len(outer))
	}
	field = outer[0]
	raw := p[field]
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(raw, &inner); err == nil && inner != nil {
		opts = params(inner)
	} else {
		value = raw
		opts = params{}
	}
	if b, ok := p["boost"]; ok {
		if _, dup := opts["boost"]; !dup {
			opts["boost"] = b
		}
	}
	return field, value, opts, nil
}

// fuzziness reads "AUTO", "AUTO:3,6" (treated as AUTO) or an edit distance.
type fuzziness struct {
	auto  bool
	edits int
}

func parseFuzziness(raw json.RawMessage) (fuzziness, *apiError) {
	v, ok := decodeValue(raw)
	if !ok {
		return fuzziness{}, parsingError("malformed [fuzziness]")
	}
	s, _ := scalarString(v)
	if strings.HasPrefix(strings.ToUpper(s), "AUTO") {
		return fuzziness{auto: true}, nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return fuzziness{}, parsingError("malformed [fuzziness] [%s]", s)
	}
	return fuzziness{edits: min(int(n), 2)}, nil
}

// minimumShouldMatch resolves "2", -1, "75%" or "-25%" against n clauses.
func minimumShouldMatch(raw json.RawMessage, n int) (int, *apiError) {
	v, ok := decodeValue(raw)
	if !ok {
		return 0, parsingError("malformed [minimum_should_match]")
	}
	s, _ := scalarString(v)
	s = strings.TrimSpace(s)
	var r int
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil {
			return 0, parsingError("malformed [minimum_should_match] [%s]", s)
		}
		if f < 0 {
			r = n - int(math.Floor(float64(n)*-f/100))
		} else {
			r = int(math.Floor(float64(n) * f / 100))
		}
	} else {
		i, err := strconv.Atoi(s)
		if err != nil {
			return 0, unsupported("[minimum_should_match] [%s]", s)
		}
		if i < 0 {
			r = n + i
		} else {
			r = i
		}
	}
	return max(0, min(r, n)), nil
}

// matchOptions are the options shared by match and multi_match.
type matchOptions struct {
	operatorAnd bool
	fuzz        *fuzziness
	prefixLen   int
	msm         json.RawMessage
	analyzer    string
	lenient     bool
	phrase      bool
}

func (c *compiler) readMatchOptions(p params, mo *matchOptions) *apiError {
	if op, ok, e := p.str("operator"); e != nil {
		return e
	} else if ok {
		switch strings.ToLower(op) {
		case "and":
			mo.operatorAnd = true
		case "or":
		default:
			return parsingError("unknown operator [%s]", op)
		}
	}
	if raw, ok := p.take("fuzziness"); ok {
		f, e := parseFuzziness(raw)
		if e != nil {
			return e
		}
		mo.fuzz = &f
	}
	pl, e := p.float("prefix_length", 0)
	if e != nil {
		return e
	}
	mo.prefixLen = int(pl)
	if raw, ok := p.take("minimum_should_match"); ok {
		mo.msm = raw
	}
	if a, ok, e := p.str("analyzer"); e != nil {
		return e
	} else if ok {
		if _, known := bleveAnalyzerName(a); !known && !c.ix.meta.analyzerOK(a) {
			return badRequest("query_shard_exception", "[match] analyzer [%s] not found", a)
		}
		mo.analyzer = a
	}
	if raw, ok := p.take("lenient"); ok {
		v, _ := decodeValue(raw)
		mo.lenient, _ = toBool(v)
	}
	return nil
}

func (c *compiler) match(body json.RawMessage, phrase bool) (query.Query, *apiError) {
	name := "match"
	if phrase {
		name = "match_phrase"
	}
	field, value, p, e := fieldQuery(name, body)
	if e != nil {
		return nil, e
	}
	if value == nil {
		var ok bool
		if value, ok = p.take("query"); !ok {
			return nil, parsingError("[%s] requires query value", name)
		}
	}
	v, ok := decodeValue(value)
	if !ok {
		return nil, parsingError("[%s] malformed query value", name)
	}
	text, ok := scalarString(v)
	if !ok {
		return nil, parsingError("[%s] unknown token [%T] after [query]", name, v)
	}
	mo := matchOptions{phrase: phrase}
	if e := c.readMatchOptions(p, &mo); e != nil {
		return nil, e
	}
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	if e := p.rest(name, "zero_terms_query", "auto_generate_synonyms_phrase_query", "fuzzy_transpositions",
		"max_expansions", "cutoff_frequency", "slop", "fuzzy_rewrite"); e != nil {
		return nil, e
	}
	q, e := c.matchField(field, text, mo)
	if e != nil {
		return nil, e
	}
	return boosted(q, boost), nil
}

// matchField is a match (or match_phrase) of text against one field.
func (c *compiler) matchField(field, text string, mo matchOptions) (query.Query, *apiError) {
	if field == "_id" {
		return query.NewDocIDQuery([]string{text}), nil
	}
	d := c.m.lookup(field)
	if d == nil {
		return none(), nil
	}
	switch d.kind() {
	case kindText:
	case kindObject:
		return none(), nil
	default:
		q, e := c.termValue(field, d, text)
		if e != nil && mo.lenient {
			return none(), nil
		}
		return q, e
	}
	an := d.SearchAnalyzer
	if an == "" {
		an = d.Analyzer
	}
	if mo.analyzer != "" {
		an = mo.analyzer
	}
	bleveName, analyzer := c.ix.analyzer(an)
	if mo.phrase {
		q := query.NewMatchPhraseQuery(text)
		q.SetField(field)
		q.Analyzer = bleveName
		return q, nil
	}
	var terms []string
	seen := map[string]bool{}
	for _, tok := range analyzer.Analyze([]byte(text)) {
		t := string(tok.Term)
		if !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return none(), nil
	}
	clauses := make([]query.Query, len(terms))
	for i, t := range terms {
		if mo.fuzz != nil && (mo.fuzz.auto || mo.fuzz.edits > 0) {
			fq := query.NewFuzzyQuery(t)
			fq.SetField(field)
			fq.SetPrefix(mo.prefixLen)
			if mo.fuzz.auto {
				fq.SetAutoFuzziness(true)
			} else {
				fq.SetFuzziness(mo.fuzz.edits)
			}
			clauses[i] = fq
			continue
		}
		tq := query.NewTermQuery(t)
		tq.SetField(field)
		clauses[i] = tq
	}
	if len(clauses) == 1 {
		return clauses[0], nil
	}
	if mo.operatorAnd {
		return query.NewConjunctionQuery(clauses), nil
	}
	need := 1
	if mo.msm != nil {
		n, e := minimumShouldMatch(mo.msm, len(clauses))
		if e != nil {
			return nil, e
		}
		need = max(n, 1)
	}
	dq := query.NewDisjunctionQuery(clauses)
	dq.SetMin(float64(need))
	return dq, nil
}

// expandFields resolves multi_match fields such as "name^3" or "desc*"
// to mapped fields and their boosts.
func (c *compiler) expandFields(specs []string) ([]string, []float64, *apiError) {
	var fields []string
	var boosts []float64
	add := func(f string, b float64) {
		if i := slices.Index(fields, f); i >= 0 {
			boosts[i] = max(boosts[i], b)
			return
		}
		fields = append(fields, f)
		boosts = append(boosts, b)
	}
	for _, spec := range specs {
		name, boost := spec, 1.0
		if i := strings.LastIndexByte(spec, '^'); i >= 0 {
			b, err := strconv.ParseFloat(spec[i+1:], 64)
			if err != nil {
				return nil, nil, parsingError("malformed field boost [%s]", spec)
			}
			name, boost = spec[:i], b
		}
		if !strings.Contains(name, "*") {
			add(name, boost)
			continue
		}
		for _, p := range c.m.leafPaths() {
			d := c.m.lookup(p)
			if k := d.kind(); (k == kindText || k == kindKeyword) && wildcardMatch(name, p) {
				add(p, boost)
			}
		}
	}
	return fields, boosts, nil
}

func (c *compiler) multiMatch(body json.RawMessage) (query.Query, *apiError) {
	obj, e := decodeObject(body, "multi_match")
	if e != nil {
		return nil, e
	}
	p := params(obj)
	rawQ, ok := p.take("query")
	if !ok {
		return nil, parsingError("[multi_match] requires query value")
	}
	v, _ := decodeValue(rawQ)
	text, ok := scalarString(v)
	if !ok {
		return nil, parsingError("[multi_match] query must be a string")
	}
	var specs []string
	if raw, ok := p.take("fields"); ok {
		if err := json.Unmarshal(raw, &specs); err != nil {
			var one string
			if json.Unmarshal(raw, &one) != nil {
				return nil, parsingError("[multi_match] [fields] must be an array of strings")
			}
			specs = []string{one}
		}
	}
	if len(specs) == 0 {
		specs = []string{"*"}
	}
	mo := matchOptions{lenient: true}
	if typ, ok, e := p.str("type"); e != nil {
		return nil, e
	} else if ok {
		switch typ {
		case "best_fields", "most_fields", "cross_fields":
		case "phrase":
			mo.phrase = true
		default:
			return nil, unsupported("[multi_match] type [%s]", typ)
		}
	}
	if e := c.readMatchOptions(p, &mo); e != nil {
		return nil, e
	}
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	if e := p.rest("multi_match", "tie_breaker", "zero_terms_query", "auto_generate_synonyms_phrase_query",
		"fuzzy_transpositions", "max_expansions", "slop", "cutoff_frequency", "fuzzy_rewrite"); e != nil {
		return nil, e
	}
	fields, boosts, e := c.expandFields(specs)
	if e != nil {
		return nil, e
	}
	var clauses []query.Query
	for i, f := range fields {
		q, e := c.matchField(f, text, mo)
		if e != nil {
			return nil, e
		}
		if !isNone(q) {
			clauses = append(clauses, boosted(q, boosts[i]))
		}
	}
	switch len(clauses) {
	case 0:
		return none(), nil
	case 1:
		return boosted(clauses[0], boost), nil
	}
	return boosted(query.NewDisjunctionQuery(clauses), boost), nil
}

// termValue is an exact-value query on one field of a known type.
func (c *compiler) termValue(field string, d *fieldDef, v any) (query.Query, *apiError) {
	if !d.indexed() {
		return nil, badRequest("query_shard_exception", "failed to create query: Cannot search on field [%s] since it is not indexed.", field)
	}
	inclusive := true
	switch d.kind() {
	case kindText, kindKeyword:
		s, ok := scalarString(v)
		if !ok {
			return nil, badRequest("query_shard_exception", "failed to create query: [%s] needs a string, number or boolean value", field)
		}
		q := query.NewTermQuery(s)
		q.SetField(field)
		return q, nil
	case kindLong, kindDouble:
		f, ok := toNumber(v, false)
		if !ok {
			return nil, badRequest("query_shard_exception", "failed to create query: For input string: \"%v\" (field [%s] is numeric)", v, field)
		}
		if d.kind() == kindLong && f != math.Trunc(f) {
			return none(), nil
		}
		return withField(query.NewNumericRangeInclusiveQuery(&f, &f, &inclusive, &inclusive), field), nil
	case kindDate:
		ms, err := parseDateBound(v, d.Format)
		if errors.Is(err, errDateMath) {
			return nil, unsupported("date math [%v] on [%s]", v, field)
		}
		if err != nil {
			return nil, badRequest("parse_exception", "failed to parse date field [%v] of [%s]: %v", v, field, err)
		}
		f := float64(ms)
		return withField(query.NewNumericRangeInclusiveQuery(&f, &f, &inclusive, &inclusive), field), nil
	case kindBool:
		b, ok := toBool(v)
		if !ok {
			return nil, badRequest("query_shard_exception", "failed to create query: Can't parse boolean value [%v] of [%s], expected [true] or [false]", v, field)
		}
		q := query.NewBoolFieldQuery(b)
		q.SetField(field)
		return q, nil
	}
	return none(), nil
}

func withField(q query.Query, field string) query.Query {
	if fq, ok := q.(query.FieldableQuery); ok {
		fq.SetField(field)
	}
	return q
}

func (c *compiler) term(body json.RawMessage) (query.Query, *apiError) {
	field, value, p, e := fieldQuery("term", body)
	if e != nil {
		return nil, e
	}
	if value == nil {
		var ok bool
		if value, ok = p.take("value"); !ok {
			return nil, parsingError("[term] query requires a value")
		}
	}
	v, ok := decodeValue(value)
	if !ok {
		return nil, parsingError("[term] malformed value")
	}
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	if raw, ok := p.take("case_insensitive"); ok {
		if ci, _ := decodeValue(raw); ci == true {
			return nil, unsupported("[term] case_insensitive")
		}
	}
	if e := p.rest("term"); e != nil {
		return nil, e
	}
	q, e := c.exact(field, v)
	if e != nil {
		return nil, e
	}
	return boosted(q, boost), nil
}

// exact is a term query on any field, including _id.
func (c *compiler) exact(field string, v any) (query.Query, *apiError) {
	if field == "_id" {
		s, ok := scalarString(v)
		if !ok {
			return nil, parsingError("[_id] value must be a string")
		}
		return query.NewDocIDQuery([]string{s}), nil
	}
	d := c.m.lookup(field)
	if d == nil {
		return none(), nil
	}
	q, e := c.termValue(field, d, v)
	if e != nil {
		return nil, e
	}
	return withField(q, field), nil
}

func (c *compiler) terms(body json.RawMessage) (query.Query, *apiError) {
	obj, e := decodeObject(body, "terms")
	if e != nil {
		return nil, e
	}
	p := params(obj)
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	delete(p, "_name")
	delete(p, "value_type")
	if len(p) != 1 {
		return nil, parsingError("[terms] query requires exactly one field, found %d", len(p))
	}
	for field, raw := range p {
		var values []any
		if err := strictUnmarshal(raw, &values); err != nil {
			if _, isObj := decodeValue(raw); isObj {
				return nil, unsupported("[terms] lookup")
			}
			return nil, parsingError("[terms] query requires an array of values for [%s]", field)
		}
		if field == "_id" {
			ids := make([]string, 0, len(values))
			for _, v := range values {
				s, ok := scalarString(v)
				if !ok {
					return nil, parsingError("[_id] values must be strings")
				}
				ids = append(ids, s)
			}
			return boosted(query.NewDocIDQuery(ids), boost), nil
		}
		var clauses []query.Query
		for _, v := range values {
			q, e := c.exact(field, v)
			if e != nil {
				return nil, e
			}
			if !isNone(q) {
				clauses = append(clauses, q)
			}
		}
		switch len(clauses) {
		case 0:
			return none(), nil
		case 1:
			return boosted(clauses[0], boost), nil
		}
		return boosted(query.NewDisjunctionQuery(clauses), boost), nil
	}
	return none(), nil
}

func (c *compiler) rangeQuery(body json.RawMessage) (query.Query, *apiError) {
	field, value, p, e := fieldQuery("range", body)
	if e != nil {
		return nil, e
	}
	if value != nil {
		return nil, parsingError("[range] query malformed, expected an object of bounds for [%s]", field)
	}
	type bound struct {
		v         any
		inclusive bool
		set       bool
	}
	var lo, hi bound
	read := func(key string, b *bound, inclusive bool) *apiError {
		raw, ok := p.take(key)
		if !ok {
			return nil
		}
		v, ok := decodeValue(raw)
		if !ok {
			return parsingError("[range] malformed [%s]", key)
		}
		if v == nil {
			return nil
		}
		*b = bound{v: v, inclusive: inclusive, set: true}
		return nil
	}
	for _, r := range []struct {
		key       string
		b         *bound
		inclusive bool
	}{{"from", &lo, true}, {"to", &hi, true}, {"gte", &lo, true}, {"gt", &lo, false}, {"lte", &hi, true}, {"lt", &hi, false}} {
		if e := read(r.key, r.b, r.inclusive); e != nil {
			return nil, e
		}
	}
	for _, inc := range []struct {
		key string
		b   *bound
	}{{"include_lower", &lo}, {"include_upper", &hi}} {
		if raw, ok := p.take(inc.key); ok {
			v, _ := decodeValue(raw)
			if t, ok := toBool(v); ok {
				inc.b.inclusive = t
			}
		}
	}
	format, _, e := p.str("format")
	if e != nil {
		return nil, e
	}
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	if tz, ok, _ := p.str("time_zone"); ok && tz != "UTC" && tz != "Z" && tz != "+00:00" {
		return nil, unsupported("[range] time_zone [%s]", tz)
	}
	if e := p.rest("range", "relation"); e != nil {
		return nil, e
	}
	d := c.m.lookup(field)
	if d == nil || d.kind() == kindObject {
		return none(), nil
	}
	if !d.indexed() {
		return nil, badRequest("query_shard_exception", "failed to create query: Cannot search on field [%s] since it is not indexed.", field)
	}
	var q query.Query
	switch d.kind() {
	case kindLong, kindDouble, kindDate:
		num := func(b bound) (*float64, *apiError) {
			if !b.set {
				return nil, nil
			}
			if d.kind() == kindDate {
				f := format
				if f == "" {
					f = d.Format
				}
				ms, err := parseDateBound(b.v, f)
				if errors.Is(err, errDateMath) {
					return nil, unsupported("date math [%v] on [%s]", b.v, field)
				}
				if err != nil {
					return nil, badRequest("parse_exception", "failed to parse date field [%v] of [%s]: %v", b.v, field, err)
				}
				x := float64(ms)
				return &x, nil
			}
			x, ok := toNumber(b.v, false)
			if !ok {
				return nil, badRequest("query_shard_exception", "failed to create query: For input string: \"%v\"", b.v)
			}
			return &x, nil
		}
		lower, e := num(lo)
		if e != nil {
			return nil, e
		}
		upper, e := num(hi)
		if e != nil {
			return nil, e
		}
		if lower == nil && upper == nil {
			q = c.existsField(field)
			break
		}
		q = withField(query.NewNumericRangeInclusiveQuery(lower, upper, &lo.inclusive, &hi.inclusive), field)
	case kindText, kindKeyword:
		str := func(b bound) string {
			if !b.set {
				return ""
			}
			s, _ := scalarString(b.v)
			return s
		}
		tr := query.NewTermRangeInclusiveQuery(str(lo), str(hi), &lo.inclusive, &hi.inclusive)
		tr.SetField(field)
		// A term range that matches no term yields bleve's match-none
		// searcher, which a boolean query would drop; a conjunction keeps
		// it a clause that matches nothing.
		q = query.NewConjunctionQuery([]query.Query{tr})
	default:
		return nil, unsupported("[range] on field [%s] of type [%s]", field, d.Type)
	}
	return boosted(q, boost), nil
}

// clauses reads a bool clause: one query object or an array of them.
func (c *compiler) clauses(raw json.RawMessage) ([]query.Query, *apiError) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		list = []json.RawMessage{raw}
	}
	out := make([]query.Query, 0, len(list))
	for _, r := range list {
		q, e := c.compile(r)
		if e != nil {
			return nil, e
		}
		out = append(out, q)
	}
	return out, nil
}

func (c *compiler) boolQuery(body json.RawMessage) (query.Query, *apiError) {
	obj, e := decodeObject(body, "bool")
	if e != nil {
		return nil, e
	}
	p := params(obj)
	var must, filter, should, mustNot []query.Query
	for _, part := range []struct {
		key string
		dst *[]query.Query
	}{{"must", &must}, {"filter", &filter}, {"should", &should}, {"must_not", &mustNot}} {
		if raw, ok := p.take(part.key); ok {
			qs, e := c.clauses(raw)
			if e != nil {
				return nil, e
			}
			*part.dst = qs
		}
	}
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	msmRaw, hasMSM := p.take("minimum_should_match")
	if e := p.rest("bool", "adjust_pure_negative"); e != nil {
		return nil, e
	}
	shouldCount := len(should)
	msm := 0
	if hasMSM {
		if msm, e = minimumShouldMatch(msmRaw, shouldCount); e != nil {
			return nil, e
		}
	} else if len(must) == 0 && len(filter) == 0 && shouldCount > 0 {
		msm = 1
	}
	// Simplify around clauses that match nothing or everything, which
	// bleve's boolean query would otherwise drop or misjudge.
	if slices.ContainsFunc(must, isNone) || slices.ContainsFunc(filter, isNone) || slices.ContainsFunc(mustNot, isAll) {
		return none(), nil
	}
	should = slices.DeleteFunc(should, isNone)
	mustNot = slices.DeleteFunc(mustNot, isNone)
	filter = slices.DeleteFunc(filter, isAll)
	if msm > len(should) {
		return none(), nil
	}
	if len(must) == 0 && len(filter) == 0 && len(should) == 0 && len(mustNot) == 0 {
		return boosted(query.NewMatchAllQuery(), boost), nil
	}
	if len(must) == 1 && len(filter) == 0 && len(should) == 0 && len(mustNot) == 0 {
		return boosted(must[0], boost), nil
	}
	bq := query.NewBooleanQuery(nil, nil, nil)
	if len(must) == 0 && len(should) > 0 && msm == 0 {
		// Optional should clauses only add to the score of what the
		// filter and must_not keep.
		must = append(must, query.NewMatchAllQuery())
	}
	if len(must) > 0 {
		bq.AddMust(must...)
	}
	if len(should) > 0 {
		bq.AddShould(should...)
		bq.SetMinShould(float64(msm))
	}
	if len(mustNot) > 0 {
		bq.AddMustNot(mustNot...)
	}
	switch len(filter) {
	case 0:
	case 1:
		bq.AddFilter(filter[0])
	default:
		bq.AddFilter(query.NewConjunctionQuery(filter))
	}
	return boosted(bq, boost), nil
}

func (c *compiler) ids(body json.RawMessage) (query.Query, *apiError) {
	var b struct {
		Values []json.RawMessage `json:"values"`
		Boost  *float64          `json:"boost"`
		Name   string            `json:"_name"`
	}
	if err := strictUnmarshal(body, &b); err != nil {
		return nil, parsingError("[ids] malformed query: %v", err)
	}
	ids := make([]string, 0, len(b.Values))
	for _, raw := range b.Values {
		s, ok := jsonScalar(raw)
		if !ok {
			return nil, parsingError("[ids] values must be strings")
		}
		ids = append(ids, s)
	}
	if len(ids) == 0 {
		return none(), nil
	}
	q := query.NewDocIDQuery(ids)
	if b.Boost != nil {
		q.SetBoost(*b.Boost)
	}
	return q, nil
}

func (c *compiler) existsField(field string) query.Query {
	if field == "_id" {
		return query.NewMatchAllQuery()
	}
	if c.m.lookup(field) == nil {
		return none()
	}
	q := query.NewTermQuery(field)
	q.SetField(fieldFieldNames)
	return q
}

func (c *compiler) exists(body json.RawMessage) (query.Query, *apiError) {
	obj, e := decodeObject(body, "exists")
	if e != nil {
		return nil, e
	}
	p := params(obj)
	field, ok, e := p.str("field")
	if e != nil {
		return nil, e
	}
	if !ok {
		return nil, parsingError("[exists] must be provided with a [field]")
	}
	boost, e := p.float("boost", 1)
	if e != nil {
		return nil, e
	}
	if e := p.rest("exists"); e != nil {
		return nil, e
	}
	return boosted(c.existsField(field), boost), nil
}

// wildcardMatch matches s against a pattern where '*' stands for any run
// of characters (dots included), as OpenSearch field patterns do.
func wildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}
