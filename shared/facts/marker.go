package facts

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Marker attributes: the marker table's key holds the fact's key, and the
// marker keeps the fact's effects, so that the markers say what the counters
// account for.
const (
	KeyAttr     = "eventKey"
	EffectsAttr = "effects"
)

// EncodeEffects is the marker's effects attribute: a map of counter item
// (Item.String) to a map of counter to number.
func EncodeEffects(e Effects) types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(e))
	for it, cs := range e {
		inner := make(map[string]types.AttributeValue, len(cs))
		for c, n := range cs {
			inner[c] = &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
		}
		m[it.String()] = &types.AttributeValueMemberM{Value: inner}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// DecodeMarker reads a marker item: its fact key and effects. A marker
// without effects (written before markers kept them) decodes with nil
// effects.
func DecodeMarker(item map[string]types.AttributeValue) (Fact, error) {
	k, ok := item[KeyAttr].(*types.AttributeValueMemberS)
	if !ok {
		return Fact{}, fmt.Errorf("marker without a string %s", KeyAttr)
	}
	f := Fact{Key: k.Value}
	raw, ok := item[EffectsAttr]
	if !ok {
		return f, nil
	}
	m, ok := raw.(*types.AttributeValueMemberM)
	if !ok {
		return Fact{}, fmt.Errorf("marker %s: %s is not a map", k.Value, EffectsAttr)
	}
	f.Effects = Effects{}
	for name, v := range m.Value {
		it, err := ParseItem(name)
		if err != nil {
			return Fact{}, fmt.Errorf("marker %s: %w", k.Value, err)
		}
		cs, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return Fact{}, fmt.Errorf("marker %s: effects of %s are not a map", k.Value, name)
		}
		for c, nv := range cs.Value {
			n, ok := nv.(*types.AttributeValueMemberN)
			if !ok {
				return Fact{}, fmt.Errorf("marker %s: %s.%s is not a number", k.Value, name, c)
			}
			x, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return Fact{}, fmt.Errorf("marker %s: %s.%s: %w", k.Value, name, c, err)
			}
			f.Effects.Add(it, c, x)
		}
	}
	return f, nil
}
