package search

import (
	"encoding/json"
	"strings"
)

// sourceFilter is _source filtering: off entirely, or include and exclude
// patterns over dotted paths ('*' matches any run of characters).
type sourceFilter struct {
	set      bool
	disabled bool
	includes []string
	excludes []string
}

func parseSourceFilter(raw json.RawMessage) (sourceFilter, *apiError) {
	f := sourceFilter{set: true}
	v, ok := decodeValue(raw)
	if !ok {
		return f, parsingError("malformed [_source]")
	}
	list := func(v any) ([]string, bool) {
		switch x := v.(type) {
		case nil:
			return nil, true
		case string:
			return []string{x}, true
		case []any:
			out := make([]string, 0, len(x))
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, false
				}
				out = append(out, s)
			}
			return out, true
		}
		return nil, false
	}
	switch x := v.(type) {
	case bool:
		f.disabled = !x
	case map[string]any:
		for k, sub := range x {
			l, ok := list(sub)
			if !ok {
				return f, parsingError("[_source] [%s] must be a string or an array of strings", k)
			}
			switch k {
			case "includes", "include":
				f.includes = l
			case "excludes", "exclude":
				f.excludes = l
			default:
				return f, parsingError("[_source] unknown key [%s]", k)
			}
		}
	default:
		l, ok := list(v)
		if !ok {
			return f, parsingError("[_source] must be a boolean, a string, an array or an object")
		}
		f.includes = l
	}
	return f, nil
}

// sourceFilterFromParams reads _source, _source_includes and
// _source_excludes from the URL.
func sourceFilterFromParams(q *request) (sourceFilter, *apiError) {
	var f sourceFilter
	split := func(v string) []string {
		var out []string
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	if v, ok := q.param("_source"); ok {
		f.set = true
		switch v {
		case "", "true":
		case "false":
			f.disabled = true
		default:
			f.includes = split(v)
		}
	}
	for _, key := range []string{"_source_includes", "_source_include"} {
		if v, ok := q.param(key); ok {
			f.set, f.disabled, f.includes = true, false, split(v)
		}
	}
	for _, key := range []string{"_source_excludes", "_source_exclude"} {
		if v, ok := q.param(key); ok {
			f.set, f.disabled, f.excludes = true, false, split(v)
		}
	}
	return f, nil
}

// apply filters a stored source; nil means no _source in the answer.
func (f sourceFilter) apply(raw []byte) (json.RawMessage, error) {
	if f.disabled {
		return nil, nil
	}
	if len(f.includes) == 0 && len(f.excludes) == 0 {
		return json.RawMessage(raw), nil
	}
	doc, err := decodeSource(raw)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(f.object(doc, ""))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func matchesAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if wildcardMatch(p, path) {
			return true
		}
	}
	return false
}

// mayMatchBelow says whether some pattern could match a path under prefix.
func mayMatchBelow(patterns []string, prefix string) bool {
	for _, p := range patterns {
		lit, _, _ := strings.Cut(p, "*")
		if strings.HasPrefix(lit, prefix) || (strings.Contains(p, "*") && strings.HasPrefix(prefix, lit)) {
			return true
		}
	}
	return false
}

func (f sourceFilter) object(obj map[string]any, prefix string) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		path := prefix + k
		if matchesAny(f.excludes, path) {
			continue
		}
		included := len(f.includes) == 0 || matchesAny(f.includes, path)
		if included {
			out[k] = sourceFilter{excludes: f.excludes}.value(v, path)
			continue
		}
		if mayMatchBelow(f.includes, path+".") {
			if sub := f.value(v, path); !isEmptyObject(sub) {
				out[k] = sub
			}
		}
	}
	return out
}

func (f sourceFilter) value(v any, path string) any {
	switch x := v.(type) {
	case map[string]any:
		return f.object(x, path+".")
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			fe := f.value(e, path)
			if _, isObj := e.(map[string]any); isObj && isEmptyObject(fe) && len(f.includes) > 0 {
				continue
			}
			out = append(out, fe)
		}
		return out
	}
	return v
}

func isEmptyObject(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}
