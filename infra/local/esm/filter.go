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
	return p, nil
}

// match applies Lambda's filter semantics: every key of the pattern must match;
// a nested object descends; a list matches when any of its conditions does.
func (p pattern) match(event map[string]any) bool { return matchObject(p, event) }

func matchObject(p map[string]any, event map[string]any) bool {
	for k, cond := range p {
		v, present := event[k]
		switch c := cond.(type) {
		case map[string]any:
			sub, ok := v.(map[string]any)
			if !ok || !matchObject(c, sub) {
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
				want, _ := arg.(bool)
				return present == want
			case "prefix":
				s, ok := v.(string)
				pre, _ := arg.(string)
				return present && ok && strings.HasPrefix(s, pre)
			case "anything-but":
				if !present {
					return false
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
