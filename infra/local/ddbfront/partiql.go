package ddbfront

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A PartiQL statement is charged and checked as the operation it stands for
// ("PartiQL select statements for DynamoDB": a SELECT whose WHERE fixes the
// partition key by equality reads that partition, any other reads the whole
// table; INSERT, UPDATE and DELETE write one item named by its key). The
// parser reads the subset of PartiQL for DynamoDB it needs for that: the
// table (and index), the key's equalities in the WHERE clause, an INSERT's
// item and an UPDATE's SET and REMOVE clauses; a statement it cannot read
// is passed on unchecked, for DynamoDB Local to judge.

// statement is what the limits need of one PartiQL statement.
type statement struct {
	kind         string // SELECT, INSERT, UPDATE, DELETE
	table, index string
	// equal holds the attributes the WHERE clause sets equal to one value
	// in a top-level conjunction; none when it has a top-level OR.
	equal map[string]types.AttributeValue
	// item is an INSERT's.
	item map[string]types.AttributeValue
	// actions are an UPDATE's, actionsErr why they could not be read.
	actions    []updateAction
	actionsErr error
}

type pqToken struct {
	kind string // word, ident (quoted), str, num, param, punct
	text string
	// param is the position of a ? among the statement's parameters.
	param int
}

func pqTokenize(s string) ([]pqToken, error) {
	var out []pqToken
	params := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(s) {
					return nil, fmt.Errorf("partiql: unterminated quote")
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			kind := "ident"
			if c == '\'' {
				kind = "str"
			}
			out = append(out, pqToken{kind: kind, text: b.String()})
			i = j + 1
		case c == '?':
			out = append(out, pqToken{kind: "param", text: "?", param: params})
			params++
			i++
		case c >= '0' && c <= '9' || (c == '-' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' && (len(out) == 0 || out[len(out)-1].kind == "punct")):
			j := i + 1
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' || ((s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E'))) {
				j++
			}
			out = append(out, pqToken{kind: "num", text: s[i:j]})
			i = j
		case c == '<' && strings.HasPrefix(s[i:], "<<"), c == '>' && strings.HasPrefix(s[i:], ">>"),
			c == '<' && strings.HasPrefix(s[i:], "<="), c == '>' && strings.HasPrefix(s[i:], ">="),
			c == '<' && strings.HasPrefix(s[i:], "<>"), c == '!' && strings.HasPrefix(s[i:], "!="):
			out = append(out, pqToken{kind: "punct", text: s[i : i+2]})
			i += 2
		case strings.IndexByte("=,+-*/()[]{}.:<>", c) >= 0:
			out = append(out, pqToken{kind: "punct", text: string(c)})
			i++
		case c == '_' || isAlnum(c):
			j := i + 1
			for j < len(s) && (s[j] == '_' || isAlnum(s[j])) {
				j++
			}
			out = append(out, pqToken{kind: "word", text: s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("partiql: unexpected %q", c)
		}
	}
	return out, nil
}

type pqParser struct {
	toks   []pqToken
	pos    int
	params []types.AttributeValue
}

func (p *pqParser) peek() pqToken {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return pqToken{}
}

func (p *pqParser) next() pqToken {
	t := p.peek()
	p.pos++
	return t
}

func (p *pqParser) isWord(w string) bool {
	t := p.peek()
	return t.kind == "word" && strings.EqualFold(t.text, w)
}

func (p *pqParser) isPunct(s string) bool {
	t := p.peek()
	return t.kind == "punct" && t.text == s
}

// parseStatement reads a statement with its parameters.
func parseStatement(stmt string, params []types.AttributeValue) (*statement, error) {
	toks, err := pqTokenize(stmt)
	if err != nil {
		return nil, err
	}
	p := &pqParser{toks: toks, params: params}
	st := &statement{kind: strings.ToUpper(p.next().text)}
	switch st.kind {
	case "SELECT":
		for p.pos < len(p.toks) && !p.isWord("FROM") {
			p.next()
		}
		p.next()
		if err := p.tableName(st); err != nil {
			return nil, err
		}
	case "INSERT":
		if !strings.EqualFold(p.next().text, "INTO") {
			return nil, fmt.Errorf("partiql: INSERT without INTO")
		}
		if err := p.tableName(st); err != nil {
			return nil, err
		}
		if !strings.EqualFold(p.next().text, "VALUE") {
			return nil, fmt.Errorf("partiql: INSERT without VALUE")
		}
		v, err := p.literal()
		if err != nil {
			return nil, err
		}
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return nil, fmt.Errorf("partiql: INSERT of a non-map")
		}
		st.item = m.Value
		return st, nil
	case "UPDATE":
		if err := p.tableName(st); err != nil {
			return nil, err
		}
		st.actions, st.actionsErr = p.updateClauses()
		for p.pos < len(p.toks) && !p.isWord("WHERE") {
			p.next()
		}
	case "DELETE":
		if !strings.EqualFold(p.next().text, "FROM") {
			return nil, fmt.Errorf("partiql: DELETE without FROM")
		}
		if err := p.tableName(st); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("partiql: %s statement", st.kind)
	}
	st.equal = map[string]types.AttributeValue{}
	if !p.isWord("WHERE") {
		return st, nil
	}
	p.next()
	depth := 0
	start := p.pos
	conj := func(end int) {
		// name = value, or value = name
		part := p.toks[start:end]
		if len(part) != 3 || part[1].kind != "punct" || part[1].text != "=" {
			return
		}
		name, val := part[0], part[2]
		if name.kind != "ident" && name.kind != "word" {
			name, val = val, name
		}
		if name.kind != "ident" && name.kind != "word" {
			return
		}
		sub := &pqParser{toks: []pqToken{val}, params: p.params}
		if v, err := sub.literal(); err == nil {
			st.equal[name.text] = v
		}
	}
	for ; p.pos < len(p.toks); p.pos++ {
		t := p.toks[p.pos]
		switch {
		case t.kind == "punct" && (t.text == "(" || t.text == "[" || t.text == "{" || t.text == "<<"):
			depth++
		case t.kind == "punct" && (t.text == ")" || t.text == "]" || t.text == "}" || t.text == ">>"):
			depth--
		case depth == 0 && t.kind == "word" && strings.EqualFold(t.text, "OR"):
			st.equal = map[string]types.AttributeValue{}
			return st, nil
		case depth == 0 && t.kind == "word" && (strings.EqualFold(t.text, "AND") || strings.EqualFold(t.text, "RETURNING") || strings.EqualFold(t.text, "ORDER")):
			conj(p.pos)
			if !strings.EqualFold(t.text, "AND") {
				return st, nil
			}
			start = p.pos + 1
		}
	}
	conj(p.pos)
	return st, nil
}

func (p *pqParser) tableName(st *statement) error {
	t := p.next()
	if t.kind != "ident" && t.kind != "word" {
		return fmt.Errorf("partiql: no table name")
	}
	st.table = t.text
	if p.isPunct(".") {
		p.next()
		ix := p.next()
		if ix.kind != "ident" && ix.kind != "word" {
			return fmt.Errorf("partiql: no index name")
		}
		st.index = ix.text
	}
	return nil
}

// literal reads a value: a parameter, a string, a number, a Boolean, null,
// a list [..], a map {..} or a set <<..>>.
func (p *pqParser) literal() (types.AttributeValue, error) {
	t := p.next()
	switch t.kind {
	case "param":
		if t.param >= len(p.params) {
			return nil, fmt.Errorf("partiql: parameter %d missing", t.param+1)
		}
		return p.params[t.param], nil
	case "str":
		return &types.AttributeValueMemberS{Value: t.text}, nil
	case "num":
		return &types.AttributeValueMemberN{Value: t.text}, nil
	case "word":
		switch strings.ToLower(t.text) {
		case "true", "false":
			return &types.AttributeValueMemberBOOL{Value: strings.EqualFold(t.text, "true")}, nil
		case "null":
			return &types.AttributeValueMemberNULL{Value: true}, nil
		}
	case "punct":
		switch t.text {
		case "[":
			l := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
			for !p.isPunct("]") {
				v, err := p.literal()
				if err != nil {
					return nil, err
				}
				l.Value = append(l.Value, v)
				if p.isPunct(",") {
					p.next()
				} else if !p.isPunct("]") {
					return nil, fmt.Errorf("partiql: list not closed")
				}
			}
			p.next()
			return l, nil
		case "{":
			m := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
			for !p.isPunct("}") {
				k := p.next()
				if k.kind != "str" && k.kind != "ident" {
					return nil, fmt.Errorf("partiql: map key %q", k.text)
				}
				if p.next().text != ":" {
					return nil, fmt.Errorf("partiql: map key without :")
				}
				v, err := p.literal()
				if err != nil {
					return nil, err
				}
				m.Value[k.text] = v
				if p.isPunct(",") {
					p.next()
				} else if !p.isPunct("}") {
					return nil, fmt.Errorf("partiql: map not closed")
				}
			}
			p.next()
			return m, nil
		case "<<":
			var ss, ns []string
			for !p.isPunct(">>") {
				v, err := p.literal()
				if err != nil {
					return nil, err
				}
				switch v := v.(type) {
				case *types.AttributeValueMemberS:
					ss = append(ss, v.Value)
				case *types.AttributeValueMemberN:
					ns = append(ns, v.Value)
				default:
					return nil, fmt.Errorf("partiql: set of %T", v)
				}
				if p.isPunct(",") {
					p.next()
				} else if !p.isPunct(">>") {
					return nil, fmt.Errorf("partiql: set not closed")
				}
			}
			p.next()
			if len(ns) > 0 {
				return &types.AttributeValueMemberNS{Value: ns}, nil
			}
			return &types.AttributeValueMemberSS{Value: ss}, nil
		}
	}
	return nil, fmt.Errorf("partiql: %q where a value belongs", t.text)
}

// updateClauses reads SET path = value and REMOVE path clauses up to WHERE:
// values are literals, parameters, paths, one + or - of two of them, and
// list_append, set_add and set_delete of two of them.
func (p *pqParser) updateClauses() ([]updateAction, error) {
	var out []updateAction
	for p.pos < len(p.toks) && !p.isWord("WHERE") {
		kind := strings.ToUpper(p.next().text)
		for {
			path, err := p.path()
			if err != nil {
				return nil, err
			}
			a := updateAction{kind: kind, path: path}
			switch kind {
			case "SET":
				if p.next().text != "=" {
					return nil, fmt.Errorf("partiql: SET without =")
				}
				if a.value, err = p.setValue(); err != nil {
					return nil, err
				}
			case "REMOVE":
			default:
				return nil, fmt.Errorf("partiql: %s clause", kind)
			}
			out = append(out, a)
			if !p.isPunct(",") {
				break
			}
			p.next()
		}
	}
	return out, nil
}

func (p *pqParser) path() (docPath, error) {
	t := p.next()
	if t.kind != "ident" && t.kind != "word" {
		return nil, fmt.Errorf("partiql: %q where a path belongs", t.text)
	}
	path := docPath{{name: t.text}}
	for {
		switch {
		case p.isPunct("."):
			p.next()
			n := p.next()
			if n.kind != "ident" && n.kind != "word" {
				return nil, fmt.Errorf("partiql: bad path")
			}
			path = append(path, pathStep{name: n.text})
		case p.isPunct("["):
			p.next()
			i, err := strconv.Atoi(p.next().text)
			if err != nil || i < 0 || p.next().text != "]" {
				return nil, fmt.Errorf("partiql: bad list index")
			}
			path = append(path, pathStep{index: i})
		default:
			return path, nil
		}
	}
}

func (p *pqParser) setValue() (operand, error) {
	left, err := p.operand()
	if err != nil {
		return nil, err
	}
	if !p.isPunct("+") && !p.isPunct("-") {
		return left, nil
	}
	sign := 1
	if p.next().text == "-" {
		sign = -1
	}
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
		return arith(a, b, sign)
	}, nil
}

func (p *pqParser) operand() (operand, error) {
	t := p.peek()
	if t.kind == "word" && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "(" {
		fn := strings.ToLower(p.next().text)
		p.next()
		a, err := p.operand()
		if err != nil {
			return nil, err
		}
		if p.next().text != "," {
			return nil, fmt.Errorf("partiql: %s takes two arguments", fn)
		}
		b, err := p.operand()
		if err != nil {
			return nil, err
		}
		if p.next().text != ")" {
			return nil, fmt.Errorf("partiql: %s not closed", fn)
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
			switch fn {
			case "list_append":
				l1, ok1 := x.(*types.AttributeValueMemberL)
				l2, ok2 := y.(*types.AttributeValueMemberL)
				if !ok1 || !ok2 {
					return nil, fmt.Errorf("list_append of a non-list")
				}
				return &types.AttributeValueMemberL{Value: append(append([]types.AttributeValue{}, l1.Value...), l2.Value...)}, nil
			case "set_add":
				return setOp(x, y, true)
			case "set_delete":
				return setOp(x, y, false)
			}
			return nil, fmt.Errorf("partiql: function %s", fn)
		}, nil
	}
	if t.kind == "ident" || (t.kind == "word" && !isLiteralWord(t.text)) {
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		return func(item map[string]types.AttributeValue) (types.AttributeValue, error) {
			if v := path.get(item); v != nil {
				return v, nil
			}
			return nil, fmt.Errorf("partiql: %v is absent", path)
		}, nil
	}
	v, err := p.literal()
	if err != nil {
		return nil, err
	}
	return func(map[string]types.AttributeValue) (types.AttributeValue, error) { return v, nil }, nil
}

func isLiteralWord(w string) bool {
	switch strings.ToLower(w) {
	case "true", "false", "null":
		return true
	}
	return false
}
