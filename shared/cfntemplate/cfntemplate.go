// Package cfntemplate reads a CloudFormation template (SAM's template.yaml
// among them), YAML or JSON, into plain data: maps, lists and scalars, with
// the short intrinsic tags (!Ref, !Sub, !GetAtt, …) turned into the long
// forms a JSON template spells ({"Ref": …}, {"Fn::Sub": …}). The local
// invoke reads functions from it and the CDK tests hold the CDK stack
// against it.
package cfntemplate

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Decode reads a template into plain data.
func Decode(raw []byte) (map[string]any, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(raw, &n); err != nil {
		return nil, err
	}
	if len(n.Content) == 0 {
		return nil, errors.New("empty document")
	}
	v, err := decodeNode(n.Content[0])
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a mapping")
	}
	return doc, nil
}

func decodeNode(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.AliasNode:
		return decodeNode(n.Alias)
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			e, err := decodeNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = e
		}
		v = m
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			e, err := decodeNode(c)
			if err != nil {
				return nil, err
			}
			l = append(l, e)
		}
		v = l
	case yaml.ScalarNode:
		plain := *n
		if isShortTag(n.Tag) {
			plain.Tag = "!!str"
		}
		if err := plain.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
	}
	if !isShortTag(n.Tag) {
		return v, nil
	}
	fn := strings.TrimPrefix(n.Tag, "!")
	switch fn {
	case "Ref", "Condition":
		return map[string]any{fn: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			v = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + fn: v}, nil
}

// isShortTag reports whether tag is an intrinsic's short form (!Ref), not
// one of YAML's own (!!str).
func isShortTag(tag string) bool { return strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") }
