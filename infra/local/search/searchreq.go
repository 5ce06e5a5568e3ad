package search

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/numeric"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

const defaultTrackTotalHits = 10000

// sortKey is one entry of a search's sort.
type sortKey struct {
	field        string // a field, "_score" or "_id"
	desc         bool
	missingFirst bool
	mode         string
	unmappedType string
}

// searchParams is a parsed search or count request.
type searchParams struct {
	query       json.RawMessage
	postFilter  json.RawMessage
	from, size  int
	sort        []sortKey
	totalLimit  int // -1: exact; 0: not tracked
	source      sourceFilter
	trackScores bool
	version     bool
	seqNo       bool
	totalAsInt  bool
	// after is search_after: the sort values of the last hit a client was
	// given; the hits that sort strictly after them are served.
	after []any
}

// searchBodyKey says how a top-level key of a search body is handled:
// "ok", "ignored" or "unsupported"; "" is an unknown key.
func searchBodyKey(key string) string {
	switch key {
	case "query", "post_filter", "from", "size", "sort", "track_total_hits", "_source",
		"track_scores", "version", "seq_no_primary_term", "explain", "search_after":
		return "ok"
	case "timeout", "profile", "stored_fields", "ext", "search_type":
		return "ignored"
	case "aggs", "aggregations", "highlight", "suggest", "collapse", "rescore",
		"script_fields", "docvalue_fields", "fields", "indices_boost", "pit", "slice", "min_score",
		"terminate_after", "knn", "stats", "runtime_mappings", "derived", "verbose_pipeline", "search_pipeline":
		return "unsupported"
	}
	return ""
}

func parseSearch(q *request, raw []byte, count bool) (*searchParams, *apiError) {
	sp := &searchParams{size: 10, totalLimit: defaultTrackTotalHits}
	var body map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := strictUnmarshal(raw, &body); err != nil {
			return nil, jsonParseError(err)
		}
		if body == nil {
			return nil, parsingError("the request body must be a JSON object")
		}
	}
	for _, key := range slices.Sorted(maps.Keys(body)) {
		if count {
			if key != "query" {
				return nil, parsingError("request does not support [%s]", key)
			}
			continue
		}
		switch searchBodyKey(key) {
		case "":
			return nil, parsingError("Unknown key for a START_OBJECT in [%s].", key)
		case "unsupported":
			return nil, unsupported("search option [%s]", key)
		}
	}
	sp.query = body["query"]
	sp.postFilter = body["post_filter"]
	intField := func(key string, dst *int) *apiError {
		raw, ok := body[key]
		if !ok {
			return nil
		}
		v, _ := decodeValue(raw)
		f, ok := toNumber(v, true)
		if !ok {
			return parsingError("[%s] must be an integer", key)
		}
		*dst = int(f)
		return nil
	}
	if e := intField("from", &sp.from); e != nil {
		return nil, e
	}
	if e := intField("size", &sp.size); e != nil {
		return nil, e
	}
	if raw, ok := body["sort"]; ok {
		keys, e := parseSort(raw)
		if e != nil {
			return nil, e
		}
		sp.sort = keys
	}
	if raw, ok := body["search_after"]; ok {
		v, _ := decodeValue(raw)
		list, isList := v.([]any)
		if !isList {
			return nil, parsingError("[search_after] must be an array of the sort values of a hit")
		}
		if len(list) == 0 {
			return nil, illegalArgument("Values must contains at least one value.")
		}
		sp.after = list
	}
	if raw, ok := body["track_total_hits"]; ok {
		v, _ := decodeValue(raw)
		if e := sp.setTrackTotal(v); e != nil {
			return nil, e
		}
	}
	if raw, ok := body["_source"]; ok {
		f, e := parseSourceFilter(raw)
		if e != nil {
			return nil, e
		}
		sp.source = f
	}
	flags := []struct {
		key string
		dst *bool
	}{{"track_scores", &sp.trackScores}, {"version", &sp.version}, {"seq_no_primary_term", &sp.seqNo}}
	for _, fl := range flags {
		if raw, ok := body[fl.key]; ok {
			v, _ := decodeValue(raw)
			b, ok := toBool(v)
			if !ok {
				return nil, parsingError("[%s] must be a boolean", fl.key)
			}
			*fl.dst = b
		}
	}
	if raw, ok := body["explain"]; ok {
		if v, _ := decodeValue(raw); v == true {
			return nil, unsupported("search option [explain]")
		}
	}
	if e := sp.applyParams(q, count); e != nil {
		return nil, e
	}
	if sp.from < 0 {
		return nil, illegalArgument("[from] parameter cannot be negative but was [%d]", sp.from)
	}
	if sp.size < 0 {
		return nil, illegalArgument("[size] parameter cannot be negative, found [%d]", sp.size)
	}
	if len(sp.after) > 0 {
		switch {
		case sp.from > 0:
			return nil, illegalArgument("`from` parameter must be set to 0 when `search_after` is used.")
		case len(sp.sort) == 0:
			return nil, illegalArgument("Sort must contain at least one field.")
		case len(sp.after) != len(sp.sort):
			return nil, illegalArgument("search_after has %d value(s) but sort has %d.", len(sp.after), len(sp.sort))
		}
	}
	return sp, nil
}

func (sp *searchParams) setTrackTotal(v any) *apiError {
	switch x := v.(type) {
	case bool:
		if x {
			sp.totalLimit = -1
		} else {
			sp.totalLimit = 0
		}
		return nil
	case string:
		if b, ok := toBool(x); ok && x != "" {
			return sp.setTrackTotal(b)
		}
	}
	n, ok := toNumber(v, true)
	if !ok || n < 0 {
		return illegalArgument("[track_total_hits] must be true, false or a non-negative number")
	}
	sp.totalLimit = int(n)
	if sp.totalLimit == math.MaxInt32 {
		sp.totalLimit = -1
	}
	return nil
}

// applyParams applies the URL parameters, which win over the body.
func (sp *searchParams) applyParams(q *request, count bool) *apiError {
	if _, ok := q.param("q"); ok {
		return unsupported("URI search [q]")
	}
	if _, ok := q.param("scroll"); ok {
		return unsupported("scroll searches")
	}
	if count {
		return nil
	}
	for _, p := range []struct {
		key string
		dst *int
	}{{"from", &sp.from}, {"size", &sp.size}} {
		if v, ok := q.param(p.key); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return illegalArgument("failed to parse [%s] value [%s]", p.key, v)
			}
			*p.dst = n
		}
	}
	if v, ok := q.param("sort"); ok && v != "" {
		sp.sort = nil
		for _, part := range strings.Split(v, ",") {
			field, order, _ := strings.Cut(part, ":")
			k := sortKey{field: field, desc: field == "_score"}
			switch order {
			case "":
			case "asc":
				k.desc = false
			case "desc":
				k.desc = true
			default:
				return illegalArgument("unknown sort order [%s]", order)
			}
			sp.sort = append(sp.sort, k)
		}
	}
	if v, ok := q.param("track_total_hits"); ok {
		var val any = json.Number(v)
		if b, err := strconv.ParseBool(v); err == nil {
			val = b
		}
		if e := sp.setTrackTotal(val); e != nil {
			return e
		}
	}
	if q.flag("rest_total_hits_as_int") {
		sp.totalAsInt = true
		if sp.totalLimit >= 0 {
			sp.totalLimit = -1
		}
	}
	for _, fl := range []struct {
		key string
		dst *bool
	}{{"track_scores", &sp.trackScores}, {"version", &sp.version}, {"seq_no_primary_term", &sp.seqNo}} {
		if _, ok := q.param(fl.key); ok {
			*fl.dst = q.flag(fl.key)
		}
	}
	f, e := sourceFilterFromParams(q)
	if e != nil {
		return e
	}
	if f.set {
		sp.source = f
	}
	return nil
}

// parseSort reads the sort of a search body, keeping the order of keys.
func parseSort(raw json.RawMessage) ([]sortKey, *apiError) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		list = []json.RawMessage{raw}
	}
	var keys []sortKey
	for _, item := range list {
		var name string
		if json.Unmarshal(item, &name) == nil {
			keys = append(keys, sortKey{field: name, desc: name == "_score"})
			continue
		}
		entries, err := orderedObject(item)
		if err != nil {
			return nil, parsingError("malformed [sort]: %v", err)
		}
		for _, ent := range entries {
			k := sortKey{field: ent.key, desc: ent.key == "_score"}
			var order string
			if json.Unmarshal(ent.value, &order) != nil {
				var opts map[string]json.RawMessage
				if err := json.Unmarshal(ent.value, &opts); err != nil {
					return nil, parsingError("malformed sort options for [%s]", ent.key)
				}
				for _, opt := range slices.Sorted(maps.Keys(opts)) {
					var sv string
					_ = json.Unmarshal(opts[opt], &sv)
					switch opt {
					case "order":
						order = sv
					case "missing":
						switch sv {
						case "_first":
							k.missingFirst = true
						case "_last":
						default:
							return nil, unsupported("[sort] missing value [%s]", string(opts[opt]))
						}
					case "mode":
						if slices.Contains(unsupportedModes, sv) {
							return nil, unsupported("[sort] mode [%s]", sv)
						}
						if !slices.Contains(sortModes, sv) {
							return nil, illegalArgument("Illegal sort mode: %s", sv)
						}
						k.mode = sv
					case "unmapped_type":
						k.unmappedType = sv
					case "numeric_type", "format":
					default:
						return nil, unsupported("[sort] option [%s]", opt)
					}
				}
			}
			switch order {
			case "":
			case "asc":
				k.desc = false
			case "desc":
				k.desc = true
			default:
				return nil, parsingError("[sort] unknown order [%s] for [%s]", order, ent.key)
			}
			keys = append(keys, k)
		}
	}
	return keys, nil
}

type objectEntry struct {
	key   string
	value json.RawMessage
}

// orderedObject decodes a JSON object keeping its keys in order.
func orderedObject(raw json.RawMessage) ([]objectEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected an object or a field name")
	}
	var out []objectEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, objectEntry{key: key, value: v})
	}
	return out, nil
}

// sortSpec ties a sort key to its place in bleve's sort values.
type sortSpec struct {
	key  sortKey
	kind kind
	pos  int // index in the bleve sort order, -1 for an unmapped field
}

func (c *compiler) sortOrder(keys []sortKey) (search.SortOrder, []sortSpec, *apiError) {
	var order search.SortOrder
	var specs []sortSpec
	hasID := false
	for _, k := range keys {
		spec := sortSpec{key: k, pos: len(order)}
		switch k.field {
		case "_score":
			order = append(order, &search.SortScore{Desc: k.desc})
		case "_id", "_doc":
			order = append(order, &search.SortDocID{Desc: k.desc})
			hasID = true
		default:
			d := c.m.lookup(k.field)
			if d == nil {
				if k.unmappedType == "" {
					return nil, nil, badRequest("query_shard_exception", "No mapping found for [%s] in order to sort on", k.field)
				}
				spec.pos = -1
				specs = append(specs, spec)
				continue
			}
			spec.kind = d.kind()
			sf := &search.SortField{Field: k.field, Desc: k.desc, Missing: search.SortFieldMissingLast}
			if k.missingFirst {
				sf.Missing = search.SortFieldMissingFirst
			}
			switch spec.kind {
			case kindLong, kindDouble, kindDate:
				sf.Type = search.SortFieldAsNumber
			case kindKeyword, kindBool:
				sf.Type = search.SortFieldAsString
			case kindText:
				return nil, nil, illegalArgument("Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [%s] in order to load field data by uninverting the inverted index. Note that this can use significant memory.", k.field)
			default:
				return nil, nil, illegalArgument("can't sort on field [%s] of type [%s]", k.field, d.Type)
			}
			if !d.indexed() {
				return nil, nil, illegalArgument("can't sort on field [%s]: it is not indexed", k.field)
			}
			sf.Mode = search.SortFieldMin
			if k.desc {
				sf.Mode = search.SortFieldMax
			}
			switch k.mode {
			case "min":
				sf.Mode = search.SortFieldMin
			case "max":
				sf.Mode = search.SortFieldMax
			}
			order = append(order, sf)
		}
		specs = append(specs, spec)
	}
	if len(keys) == 0 {
		order = append(order, &search.SortScore{Desc: true})
	}
	if !hasID {
		// Ties keep a stable order, by id.
		order = append(order, &search.SortDocID{})
	}
	return order, specs, nil
}

// sortValue decodes one of bleve's sort values for the hit's "sort" array.
func sortValue(spec sortSpec, hit *search.DocumentMatch) any {
	if spec.pos < 0 || spec.pos >= len(hit.Sort) {
		return nil
	}
	switch spec.key.field {
	case "_score":
		return hit.Score
	case "_id", "_doc":
		return hit.ID
	}
	v := hit.Sort[spec.pos]
	if v == search.HighTerm || v == search.LowTerm {
		return nil
	}
	switch spec.kind {
	case kindLong, kindDouble:
		if v, ok := sourceSortValue(spec, hitSource(hit)); ok {
			return v
		}
		return nil
	case kindDate:
		i, err := numeric.PrefixCoded(v).Int64()
		if err != nil {
			return nil
		}
		f := numeric.Int64ToFloat64(i)
		if spec.kind == kindDouble {
			return f
		}
		return int64(f)
	case kindBool:
		if v == "T" {
			return 1
		}
		return 0
	}
	return v
}

type searchHit struct {
	Index       string          `json:"_index"`
	ID          string          `json:"_id"`
	Version     *int64          `json:"_version,omitempty"`
	SeqNo       *int64          `json:"_seq_no,omitempty"`
	PrimaryTerm *int64          `json:"_primary_term,omitempty"`
	Score       *float64        `json:"_score"`
	Source      json.RawMessage `json:"_source,omitempty"`
	Sort        []any           `json:"sort,omitempty"`
}

func (s *Server) handleSearch(w http.ResponseWriter, q *request, name string, count bool) (int, any) {
	raw, e := q.body(w)
	if e != nil {
		return 0, e
	}
	sp, e := parseSearch(q, raw, count)
	if e != nil {
		return 0, e
	}
	return s.withIndex(name, func(ix *index) (int, any) {
		return ix.search(q, sp, count)
	})
}

func (ix *index) search(q *request, sp *searchParams, count bool) (int, any) {
	c := &compiler{ix: ix, m: ix.mapping.Load()}
	bq, e := c.topQuery(sp)
	if e != nil {
		return 0, e
	}
	if !count && sp.from+sp.size > ix.maxResultWindow {
		return 0, illegalArgument("Result window is too large, from + size must be less than or equal to: [%d] but was [%d]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting.", ix.maxResultWindow, sp.from+sp.size)
	}
	size := sp.size
	if count {
		size = 0
	}
	order, specs, e := c.sortOrder(sp.sort)
	if e != nil {
		return 0, e
	}
	var after []any
	if len(sp.after) > 0 && !count {
		if after, e = afterValues(specs, sp.after); e != nil {
			return 0, e
		}
	}
	from := sp.from
	if after != nil {
		// Every hit, in order, in one search (a refresh between two would
		// change the hits under it), then those after the client's last:
		// the view is small, and one sort order decides both.
		size, from = searchAfterAll, 0
	}
	req := bleve.NewSearchRequestOptions(bq, size, from, false)
	req.SortByCustom(order)
	req.Fields = []string{fieldSource}
	if sp.version || sp.seqNo {
		req.Fields = append(req.Fields, fieldMeta)
	}
	res, err := ix.view.SearchInContext(q.r.Context(), req) // as of the last refresh
	if err != nil {
		return 0, fmt.Errorf("index %s: search: %w", ix.name, err)
	}
	if after != nil {
		i := 0
		for i < len(res.Hits) && compareSortValues(specs, res.Hits[i], after) <= 0 {
			i++
		}
		res.Hits = res.Hits[i:min(len(res.Hits), i+sp.size)]
	}
	shards := shardsInfo{Total: 1, Successful: 1, Skipped: new(0)}
	if count {
		return http.StatusOK, map[string]any{"count": res.Total, "_shards": shards}
	}
	scored := len(sp.sort) == 0 || sp.trackScores || slices.ContainsFunc(sp.sort, func(k sortKey) bool { return k.field == "_score" })
	hits := make([]searchHit, 0, len(res.Hits))
	var maxScore *float64
	if scored && len(res.Hits) > 0 {
		maxScore = new(res.MaxScore)
	}
	for _, h := range res.Hits {
		out := searchHit{Index: ix.name, ID: h.ID}
		if scored {
			out.Score = new(h.Score)
		}
		if src, ok := h.Fields[fieldSource].(string); ok {
			filtered, err := sp.source.apply([]byte(src))
			if err != nil {
				return 0, fmt.Errorf("index %s: filter source of %q: %w", ix.name, h.ID, err)
			}
			out.Source = filtered
		}
		if sp.version || sp.seqNo {
			meta, _ := h.Fields[fieldMeta].(string)
			if st, ok := decodeDocMeta([]byte(meta)); ok {
				if sp.version {
					out.Version = new(st.version)
				}
				if sp.seqNo {
					out.SeqNo, out.PrimaryTerm = new(st.seqNo), new(int64(1))
				}
			}
		}
		if len(sp.sort) > 0 {
			out.Sort = make([]any, len(specs))
			for i, spec := range specs {
				out.Sort[i] = sortValue(spec, h)
			}
		}
		hits = append(hits, out)
	}
	hitsObj := map[string]any{"max_score": maxScore, "hits": hits}
	total, relation := int64(res.Total), "eq"
	if sp.totalLimit >= 0 && total > int64(sp.totalLimit) {
		total, relation = int64(sp.totalLimit), "gte"
	}
	switch {
	case sp.totalAsInt:
		hitsObj["total"] = total
	case sp.totalLimit != 0:
		hitsObj["total"] = map[string]any{"value": total, "relation": relation}
	}
	return http.StatusOK, map[string]any{
		"took":      q.tookMS(),
		"timed_out": false,
		"_shards":   shards,
		"hits":      hitsObj,
	}
}

// topQuery compiles the query and post_filter of a search.
func (c *compiler) topQuery(sp *searchParams) (query.Query, *apiError) {
	var q query.Query = query.NewMatchAllQuery()
	if len(sp.query) > 0 && string(sp.query) != "null" {
		var e *apiError
		if q, e = c.compile(sp.query); e != nil {
			return nil, e
		}
	}
	if len(sp.postFilter) > 0 && string(sp.postFilter) != "null" {
		pf, e := c.compile(sp.postFilter)
		if e != nil {
			return nil, e
		}
		switch {
		case isNone(pf) || isNone(q):
			return none(), nil
		case !isAll(pf):
			bq := query.NewBooleanQuery([]query.Query{q}, nil, nil)
			bq.AddFilter(pf)
			q = bq
		}
	}
	if e := validateRegexps(q); e != nil {
		return nil, e
	}
	return q, nil
}

// validateRegexps rejects a malformed regexp before bleve sees it.
func validateRegexps(q query.Query) *apiError {
	switch x := q.(type) {
	case *query.RegexpQuery:
		if _, err := regexp.Compile(x.Regexp); err != nil {
			return badRequest("query_shard_exception", "failed to create query: invalid regular expression [%s]: %v", x.Regexp, err)
		}
	case *query.BooleanQuery:
		for _, sub := range []query.Query{x.Must, x.Should, x.MustNot, x.Filter} {
			if sub != nil {
				if e := validateRegexps(sub); e != nil {
					return e
				}
			}
		}
	case *query.ConjunctionQuery:
		for _, sub := range x.Conjuncts {
			if e := validateRegexps(sub); e != nil {
				return e
			}
		}
	case *query.DisjunctionQuery:
		for _, sub := range x.Disjuncts {
			if e := validateRegexps(sub); e != nil {
				return e
			}
		}
	}
	return nil
}

// searchAfterAll is how many hits a search_after search collects before it
// takes those after the client's values: all of them, for any index this
// service holds (bleve preallocates for at most 1,000).
const searchAfterAll = 1 << 30

// afterValues reads search_after against the sort: a number for _score and
// numeric fields, a string for _id and keyword fields (a number given for
// one is read as its text, as OpenSearch does), a boolean or 0/1 for a
// boolean field, null for a hit that had no value.
func afterValues(specs []sortSpec, raw []any) ([]any, *apiError) {
	out := make([]any, len(raw))
	for i, spec := range specs {
		v := raw[i]
		if v == nil {
			continue
		}
		bad := illegalArgument("Failed to parse search_after value for field [%s].", spec.key.field)
		switch {
		case spec.key.field == "_score" || spec.kind == kindLong || spec.kind == kindDouble || spec.kind == kindDate:
			n := comparable(v)
			if _, isString := n.(string); isString || n == nil {
				if f, ok := toNumber(v, false); ok {
					n = f
				} else {
					return nil, bad
				}
			}
			out[i] = n
		case spec.key.field == "_id" || spec.key.field == "_doc" || spec.kind == kindKeyword:
			switch x := v.(type) {
			case string:
				out[i] = x
			case json.Number:
				out[i] = string(x)
			case float64:
				out[i] = strconv.FormatFloat(x, 'f', -1, 64)
			case bool:
				out[i] = strconv.FormatBool(x)
			default:
				return nil, bad
			}
		case spec.kind == kindBool:
			if b, ok := toBool(v); ok {
				out[i] = float64(btoi(b))
			} else if f, ok := toNumber(v, true); ok {
				out[i] = f
			} else {
				return nil, bad
			}
		default:
			out[i] = v
		}
	}
	return out, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareSortValues says whether hit sorts before (< 0), with (0) or after
// (> 0) the values after (afterValues) in the search's order: each key in
// its direction, a missing value last unless the key asks for it first.
func compareSortValues(specs []sortSpec, hit *search.DocumentMatch, after []any) int {
	for i, spec := range specs {
		a, b := comparable(sortValue(spec, hit)), after[i]
		var c int
		switch {
		case a == nil && b == nil:
		case a == nil || b == nil:
			c = 1
			if (a == nil) == spec.key.missingFirst {
				c = -1
			}
		default:
			c = compareValues(a, b)
			if spec.key.desc {
				c = -c
			}
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// comparable is a sort value, a hit's or a client's, as compareValues takes
// it: a number as float64, which is how the local search orders longs too
// (docs/local-stack.md, "Approximations"): search_after must agree with the
// order the pages come in. A string is kept as it is.
func comparable(v any) any {
	switch x := v.(type) {
	case nil, string, float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case json.Number:
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return f
		}
		return string(x)
	}
	return fmt.Sprint(v)
}

func compareValues(a, b any) int {
	fa, aNum := a.(float64)
	fb, bNum := b.(float64)
	switch {
	case aNum && bNum:
		return cmp.Compare(fa, fb)
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}
