package ddbfront

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An update is charged the larger of its item before and after
// ("DynamoDB read and write operations"), and the front must know the
// after before DynamoDB Local writes it, to refuse what a partition cannot
// pay. applyUpdate computes it: the UpdateExpression grammar of "Update
// expressions" (SET with +, -, if_not_exists and list_append; REMOVE; ADD;
// DELETE) applied to a copy of the item before. An expression it cannot
// read is an error, and the caller charges the item as it reads it after
// the write instead.

// pathStep is one step of a document path: an attribute name, or a list
// index when name is "".
type pathStep struct {
	name  string
	index int
}

type docPath []pathStep

// updateAction is one action of an update expression.
type updateAction struct {
	kind  string // SET, REMOVE, ADD, DELETE
	path  docPath
	value operand // SET's value, ADD's and DELETE's operand
}

// operand is a value an update computes from the item before.
type operand func(item map[string]types.AttributeValue) (types.AttributeValue, error)

// updateParser reads an update expression.
type updateParser struct {
	toks   []string
	pos    int
	names  map[string]string
	values map[string]types.AttributeValue
}

func tokenize(expr string) ([]string, error) {
	var toks []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.IndexByte("=,+-()[].", c) >= 0:
			toks = append(toks, string(c))
			i++
		case c == '#' || c == ':' || c == '_' || isAlnum(c):
			j := i + 1
			for j < len(expr) && (expr[j] == '_' || isAlnum(expr[j])) {
				j++
			}
			toks = append(toks, expr[i:j])
			i = j
		default:
			return nil, fmt.Errorf("update expression: unexpected %q", c)
		}
	}
	return toks, nil
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// parseUpdate reads an UpdateExpression with its placeholders.
func parseUpdate(expr string, names map[string]string, values map[string]types.AttributeValue) ([]updateAction, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	p := &updateParser{toks: toks, names: names, values: values}
	var out []updateAction
	for p.pos < len(p.toks) {
		kind := strings.ToUpper(p.next())
		switch kind {
		case "SET", "REMOVE", "ADD", "DELETE":
		default:
			return nil, fmt.Errorf("update expression: %q where a clause starts", kind)
		}
		for {
			a := updateAction{kind: kind}
			if a.path, err = p.path(); err != nil {
				return nil, err
			}
			switch kind {
			case "SET":
				if p.next() != "=" {
					return nil, fmt.Errorf("update expression: SET without =")
				}
				if a.value, err = p.setValue(); err != nil {
					return nil, err
				}
			case "ADD", "DELETE":
				if a.value, err = p.operand(); err != nil {
					return nil, err
				}
			}
			out = append(out, a)
			if p.peek() != "," {
				break
			}
			p.next()
		}
	}
	return out, nil
}

func (p *updateParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *updateParser) next() string {
	t := p.peek()
	p.pos++
	return t
}

func (p *updateParser) name(tok string) (string, error) {
	if strings.HasPrefix(tok, "#") {
		n, ok := p.names[tok]
		if !ok {
			return "", fmt.Errorf("update expression: no name for %s", tok)
		}
		return n, nil
	}
	if tok == "" || strings.HasPrefix(tok, ":") || strings.IndexByte("=,+-()[].", tok[0]) >= 0 {
		return "", fmt.Errorf("update expression: %q where a name belongs", tok)
	}
	return tok, nil
}

func (p *updateParser) path() (docPath, error) {
	first, err := p.name(p.next())
	if err != nil {
		return nil, err
	}
	path := docPath{{name: first}}
	for {
		switch p.peek() {
		case ".":
			p.next()
			n, err := p.name(p.next())
			if err != nil {
				return nil, err
			}
			path = append(path, pathStep{name: n})
		case "[":
			p.next()
			i, err := strconv.Atoi(p.next())
			if err != nil || i < 0 || p.next() != "]" {
				return nil, fmt.Errorf("update expression: bad list index")
			}
			path = append(path, pathStep{index: i})
		default:
			return path, nil
		}
	}
}

// setValue is operand, or operand + operand, or operand - operand.
func (p *updateParser) setValue() (operand, error) {
	left, err := p.operand()
	if err != nil {
		return nil, err
	}
	op := p.peek()
	if op != "+" && op != "-" {
		return left, nil
	}
	p.next()
	right, err := p.operand()
	if err != nil {
		return nil, err
	}
	return func(item map[string]types.AttributeValue) (types.AttributeValue, error) {
		a, err := left(item)
		if err != nil {
			return nil, err
		}
		b, err := right(item)
		if err != nil {
			return nil, err
		}
		if op == "-" {
			return arith(a, b, -1)
		}
		return arith(a, b, 1)
	}, nil
}

func (p *updateParser) operand() (operand, error) {
	tok := p.peek()
	if strings.HasPrefix(tok, ":") {
		p.next()
		v, ok := p.values[tok]
		if !ok {
			return nil, fmt.Errorf("update expression: no value for %s", tok)
		}
		return func(map[string]types.AttributeValue) (types.AttributeValue, error) { return v, nil }, nil
	}
	if p.pos+1 < len(p.toks) && p.toks[p.pos+1] == "(" {
		fn := p.next()
		p.next()
		switch fn {
		case "if_not_exists":
			path, err := p.path()
			if err != nil {
				return nil, err
			}
			if p.next() != "," {
				return nil, fmt.Errorf("update expression: if_not_exists without its value")
			}
			dflt, err := p.setValue()
			if err != nil {
				return nil, err
			}
			if p.next() != ")" {
				return nil, fmt.Errorf("update expression: if_not_exists not closed")
			}
			return func(item map[string]types.AttributeValue) (types.AttributeValue, error) {
				if v := path.get(item); v != nil {
					return v, nil
				}
				return dflt(item)
			}, nil
		case "list_append":
			a, err := p.operand()
			if err != nil {
				return nil, err
			}
			if p.next() != "," {
				return nil, fmt.Errorf("update expression: list_append takes two lists")
			}
			b, err := p.operand()
			if err != nil {
				return nil, err
			}
			if p.next() != ")" {
				return nil, fmt.Errorf("update expression: list_append not closed")
			}
			return func(item map[string]types.AttributeValue) (types.AttributeValue, error) {
				x, err := a(item)
				if err != nil {
					return nil, err
				}
				y, err := b(item)
				if err != nil {
					return nil, err
				}
				l1, ok1 := x.(*types.AttributeValueMemberL)
				l2, ok2 := y.(*types.AttributeValueMemberL)
				if !ok1 || !ok2 {
					return nil, fmt.Errorf("list_append of a non-list")
				}
				return &types.AttributeValueMemberL{Value: append(append([]types.AttributeValue{}, l1.Value...), l2.Value...)}, nil
			}, nil
		}
		return nil, fmt.Errorf("update expression: unknown function %s", fn)
	}
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	return func(item map[string]types.AttributeValue) (types.AttributeValue, error) {
		v := path.get(item)
		if v == nil {
			return nil, fmt.Errorf("update expression: %v is absent", path)
		}
		return v, nil
	}, nil
}

// arith adds (sign 1) or subtracts (sign -1) two numbers exactly.
func arith(a, b types.AttributeValue, sign int) (types.AttributeValue, error) {
	x, ok1 := a.(*types.AttributeValueMemberN)
	y, ok2 := b.(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("arithmetic on a non-number")
	}
	r1, ok1 := new(big.Rat).SetString(x.Value)
	r2, ok2 := new(big.Rat).SetString(y.Value)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("arithmetic on %q and %q", x.Value, y.Value)
	}
	if sign < 0 {
		r2.Neg(r2)
	}
	return &types.AttributeValueMemberN{Value: ratText(r1.Add(r1, r2))}, nil
}

// ratText writes a decimal number with no trailing zeros after its point.
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	s := r.FloatString(40)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}

// get returns the value at the path, nil when absent.
func (p docPath) get(item map[string]types.AttributeValue) types.AttributeValue {
	var cur types.AttributeValue = &types.AttributeValueMemberM{Value: item}
	for _, s := range p {
		switch c := cur.(type) {
		case *types.AttributeValueMemberM:
			if s.name == "" {
				return nil
			}
			cur = c.Value[s.name]
		case *types.AttributeValueMemberL:
			if s.name != "" || s.index >= len(c.Value) {
				return nil
			}
			cur = c.Value[s.index]
		default:
			return nil
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

// applyUpdate returns the item after the actions, computed from before
// (nil: absent, an upsert) and key (the attributes an upsert starts with).
// Values are computed from the item before, as DynamoDB computes them.
func applyUpdate(before, key map[string]types.AttributeValue, actions []updateAction) (map[string]types.AttributeValue, error) {
	after := map[string]types.AttributeValue{}
	if before == nil {
		before = key
	}
	for k, v := range before {
		after[k] = v
	}
	root := &types.AttributeValueMemberM{Value: after}
	for _, a := range actions {
		var v types.AttributeValue
		if a.value != nil {
			var err error
			if v, err = a.value(before); err != nil {
				return nil, err
			}
		}
		if err := apply(root, a, v); err != nil {
			return nil, err
		}
	}
	return after, nil
}

// apply does one action at its path inside root, copying every map and
// list on the way so that the item before is left as it was.
func apply(root *types.AttributeValueMemberM, a updateAction, v types.AttributeValue) error {
	var parent types.AttributeValue = root
	for i, s := range a.path {
		last := i == len(a.path)-1
		switch c := parent.(type) {
		case *types.AttributeValueMemberM:
			if s.name == "" {
				return fmt.Errorf("list index into a map")
			}
			if last {
				return applyAt(a, v, c.Value[s.name], func(nv types.AttributeValue) {
					if nv == nil {
						delete(c.Value, s.name)
					} else {
						c.Value[s.name] = nv
					}
				})
			}
			child, err := copied(c.Value[s.name])
			if err != nil {
				return err
			}
			c.Value[s.name] = child
			parent = child
		case *types.AttributeValueMemberL:
			if s.name != "" {
				return fmt.Errorf("name into a list")
			}
			if last {
				cur := types.AttributeValue(nil)
				if s.index < len(c.Value) {
					cur = c.Value[s.index]
				}
				return applyAt(a, v, cur, func(nv types.AttributeValue) {
					switch {
					case nv == nil && s.index < len(c.Value):
						c.Value = append(c.Value[:s.index:s.index], c.Value[s.index+1:]...)
					case nv == nil:
					case s.index < len(c.Value):
						c.Value[s.index] = nv
					default:
						c.Value = append(c.Value, nv)
					}
				})
			}
			if s.index >= len(c.Value) {
				return fmt.Errorf("path past the end of a list")
			}
			child, err := copied(c.Value[s.index])
			if err != nil {
				return err
			}
			c.Value[s.index] = child
			parent = child
		default:
			return fmt.Errorf("path through a scalar")
		}
	}
	return nil
}

// copied returns a shallow copy of a map or list value.
func copied(v types.AttributeValue) (types.AttributeValue, error) {
	switch c := v.(type) {
	case *types.AttributeValueMemberM:
		m := make(map[string]types.AttributeValue, len(c.Value))
		for k, e := range c.Value {
			m[k] = e
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case *types.AttributeValueMemberL:
		return &types.AttributeValueMemberL{Value: append([]types.AttributeValue{}, c.Value...)}, nil
	}
	return nil, fmt.Errorf("path through an absent or scalar value")
}

// applyAt does the action on the value cur at the path's end, storing the
// result with set (nil removes).
func applyAt(a updateAction, v, cur types.AttributeValue, set func(types.AttributeValue)) error {
	switch a.kind {
	case "SET":
		set(v)
	case "REMOVE":
		set(nil)
	case "ADD":
		if cur == nil {
			set(v)
			return nil
		}
		if _, ok := v.(*types.AttributeValueMemberN); ok {
			sum, err := arith(cur, v, 1)
			if err != nil {
				return err
			}
			set(sum)
			return nil
		}
		u, err := setOp(cur, v, true)
		if err != nil {
			return err
		}
		set(u)
	case "DELETE":
		if cur == nil {
			return nil
		}
		d, err := setOp(cur, v, false)
		if err != nil {
			return err
		}
		set(d)
	}
	return nil
}

// setOp is the union (add) or difference of two sets of one type; an empty
// difference removes the attribute.
func setOp(a, b types.AttributeValue, add bool) (types.AttributeValue, error) {
	members := func(v types.AttributeValue) (string, []string, bool) {
		switch s := v.(type) {
		case *types.AttributeValueMemberSS:
			return "SS", s.Value, true
		case *types.AttributeValueMemberNS:
			return "NS", s.Value, true
		case *types.AttributeValueMemberBS:
			out := make([]string, len(s.Value))
			for i, m := range s.Value {
				out[i] = string(m)
			}
			return "BS", out, true
		}
		return "", nil, false
	}
	ta, ma, ok1 := members(a)
	tb, mb, ok2 := members(b)
	if !ok1 || !ok2 || ta != tb {
		return nil, fmt.Errorf("set operation on values of different types")
	}
	in := map[string]bool{}
	for _, m := range mb {
		in[m] = true
	}
	var out []string
	if add {
		out = append(out, ma...)
		seen := map[string]bool{}
		for _, m := range ma {
			seen[m] = true
		}
		for _, m := range mb {
			if !seen[m] {
				out = append(out, m)
				seen[m] = true
			}
		}
	} else {
		for _, m := range ma {
			if !in[m] {
				out = append(out, m)
			}
		}
		if len(out) == 0 {
			return nil, nil
		}
	}
	switch ta {
	case "SS":
		return &types.AttributeValueMemberSS{Value: out}, nil
	case "NS":
		return &types.AttributeValueMemberNS{Value: out}, nil
	}
	bs := make([][]byte, len(out))
	for i, m := range out {
		bs[i] = []byte(m)
	}
	return &types.AttributeValueMemberBS{Value: bs}, nil
}
