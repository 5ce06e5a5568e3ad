package esm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// pattern is one Lambda event filter pattern.
type pattern map[string]any

func parsePattern(s string) (pattern, error) {
	var p pattern
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("filter pattern %s: %w", s, err)
	}
	if err := validate(p, ""); err != nil {
		return nil, fmt.Errorf("filter pattern %s: %w", s, err)
	}
	return p, nil
}

// validate rejects what Lambda rejects when a mapping is created: a leaf that
// is not a list of values and operators, an unknown operator.
func validate(p map[string]any, path string) error {
	if len(p) == 0 {
		return fmt.Errorf("%sempty object", path)
	}
	for k, cond := range p {
		switch c := cond.(type) {
		case map[string]any:
			if err := validate(c, path+k+"."); err != nil {
				return err
			}
		case []any:
			for _, x := range c {
				op, ok := x.(map[string]any)
				if !ok {
					continue
				}
				if len(op) != 1 {
					return fmt.Errorf("%s%s: one operator per object", path, k)
				}
				for name := range op {
					switch name {
					case "exists", "prefix", "suffix", "equals-ignore-case", "anything-but", "numeric":
					default:
						return fmt.Errorf("%s%s: unknown operator %q", path, k, name)
					}
				}
			}
		default:
			return fmt.Errorf("%s%s: a value must be in a list", path, k)
		}
	}
	return nil
}

// match applies Lambda's filter semantics: every key of the pattern must match;
// a nested object descends; a list matches when any of its conditions does.
func (p pattern) match(event map[string]any) bool { return matchObject(p, event) }

func matchObject(p map[string]any, event map[string]any) bool {
	for k, cond := range p {
		v, present := event[k]
		switch c := cond.(type) {
		case map[string]any:
			// A missing object has only missing fields: {"exists": false}
			// below it matches.
			sub, _ := v.(map[string]any)
			if !matchObject(c, sub) {
				return false
			}
		case []any:
			if !matchAny(c, v, present) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func matchAny(conds []any, v any, present bool) bool {
	for _, c := range conds {
		if matchOne(c, v, present) {
			return true
		}
	}
	return false
}

func matchOne(cond, v any, present bool) bool {
	if op, ok := cond.(map[string]any); ok {
		for name, arg := range op {
			switch name {
			case "exists":
				// Exists tests leaves: an object (a DynamoDB value's type
				// map, when the pattern leaves out the type level) is no
				// value, as AWS delivered {"k":[{"exists":false}]} for an
				// item that has k ("Using the Exists operator", Lambda's
				// DynamoDB filtering guide, with-ddb-filtering).
				want, _ := arg.(bool)
				_, object := v.(map[string]any)
				return (present && !object) == want
			case "prefix", "suffix", "equals-ignore-case":
				return present && matchString(name, arg, v)
			case "anything-but":
				if !present {
					return false
				}
				if inner, ok := arg.(map[string]any); ok {
					// {"anything-but": {"prefix": "x"}}: a string that does not match.
					for op, x := range inner {
						if _, isStr := v.(string); !isStr || matchString(op, x, v) {
							return false
						}
					}
					return true
				}
				list, ok := arg.([]any)
				if !ok {
					list = []any{arg}
				}
				for _, x := range list {
					if equal(x, v) {
						return false
					}
				}
				return true
			case "numeric":
				return present && numeric(arg, v)
			}
		}
		return false
	}
	if !present {
		return false
	}
	return equal(cond, v)
}

// matchString applies a string operator (prefix, suffix, equals-ignore-case);
// an event array matches when any element does.
func matchString(op string, arg, v any) bool {
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if matchString(op, arg, e) {
				return true
			}
		}
		return false
	}
	s, ok := v.(string)
	want, isStr := arg.(string)
	if !ok || !isStr {
		return false
	}
	switch op {
	case "prefix":
		return strings.HasPrefix(s, want)
	case "suffix":
		return strings.HasSuffix(s, want)
	case "equals-ignore-case":
		return strings.EqualFold(s, want)
	}
	return false
}

// equal compares a pattern literal with an event value; an event array
// matches when any element does.
func equal(lit, v any) bool {
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if equal(lit, e) {
				return true
			}
		}
		return false
	}
	return fmt.Sprint(lit) == fmt.Sprint(v) && sameKind(lit, v)
}

func sameKind(a, b any) bool {
	switch a.(type) {
	case string:
		_, ok := b.(string)
		return ok
	case float64:
		_, ok := b.(float64)
		return ok
	case bool:
		_, ok := b.(bool)
		return ok
	case nil:
		return b == nil
	}
	return false
}

func numeric(arg, v any) bool {
	n, ok := v.(float64)
	if !ok {
		if s, isStr := v.(string); isStr {
			if _, err := fmt.Sscan(s, &n); err != nil {
				return false
			}
		} else {
			return false
		}
	}
	ops, ok := arg.([]any)
	if !ok || len(ops)%2 != 0 {
		return false
	}
	for i := 0; i < len(ops); i += 2 {
		op, _ := ops[i].(string)
		x, _ := ops[i+1].(float64)
		var r bool
		switch op {
		case "=":
			r = n == x
		case "<":
			r = n < x
		case "<=":
			r = n <= x
		case ">":
			r = n > x
		case ">=":
			r = n >= x
		}
		if !r {
			return false
		}
	}
	return true
}
