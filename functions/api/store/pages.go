package store

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/errcode"
)

// Page limits.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Position is where a list stopped. For a plain query, Key is the last key
// read: the table's keys and, on an index, the index's keys (a
// LastEvaluatedKey holds both). For a write-sharded index, Shards holds one
// such position per shard.
type Position struct {
	Key    map[string]string `json:"k,omitempty"`
	Shards []ShardPosition   `json:"s,omitempty"`
}

// ShardPosition is where one shard of a merged list stopped.
type ShardPosition struct {
	// After is the last key consumed from the shard; nil: none yet.
	After map[string]string `json:"a,omitempty"`
	// Done: the shard has nothing after After.
	Done bool `json:"d,omitempty"`
}

// Page is one page of a list; Next is nil on the last page.
type Page[T any] struct {
	Items []T
	Next  *Position
	// Cut, for 0 < n < len(Items), is where a page of the first n items
	// stops: an answer that would not fit the response is cut short and
	// continues from there (short pages are part of the contract).
	Cut func(n int) *Position
}

func keyToAV(k map[string]string) map[string]types.AttributeValue {
	if len(k) == 0 {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(k))
	for name, v := range k {
		out[name] = &types.AttributeValueMemberS{Value: v}
	}
	return out
}

// avToKey keeps the key attributes (all strings in shopstream's tables).
func avToKey(item map[string]types.AttributeValue, names ...string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, n := range names {
		s, ok := item[n].(*types.AttributeValueMemberS)
		if !ok {
			return nil, fmt.Errorf("key attribute %s: missing or not a string", n)
		}
		out[n] = s.Value
	}
	return out, nil
}

func lekToKey(lek map[string]types.AttributeValue) (map[string]string, error) {
	if len(lek) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(lek))
	for n := range lek {
		names = append(names, n)
	}
	return avToKey(lek, names...)
}

// checkKey checks a decoded position against the key attributes the list uses.
func checkKey(k map[string]string, names ...string) error {
	if k == nil {
		return nil
	}
	if len(k) != len(names) {
		return badCursor()
	}
	for _, n := range names {
		if _, ok := k[n]; !ok {
			return badCursor()
		}
	}
	return nil
}

func badCursor() error {
	f := errcode.Fields{}
	f.Add("cursor", "not a cursor of this list")
	return f.Err()
}

// pageOf makes a page of items read with Limit n+1 (ClampLimit's n): a read
// that found more than n items keeps n and continues after the last one kept
// (keyOf gives its key attributes, table and index), so a full last page has
// no Next, where DynamoDB's LastEvaluatedKey at Limit would point at an empty
// page. A read that stopped short of n+1 with a LastEvaluatedKey (DynamoDB's
// 1 MB page, or a filtered read that ran out of reads) continues from it.
func pageOf[T any](items []T, n int, lek map[string]types.AttributeValue, keyOf func(T) map[string]string) (Page[T], error) {
	cut := func(i int) *Position { return &Position{Key: keyOf(items[i-1])} }
	if len(items) > n {
		return Page[T]{Items: items[:n], Next: cut(n), Cut: cut}, nil
	}
	page := Page[T]{Items: items, Cut: cut}
	k, err := lekToKey(lek)
	if err != nil {
		return Page[T]{}, err
	}
	if k != nil {
		page.Next = &Position{Key: k}
	}
	return page, nil
}

// ClampLimit returns the page size for a requested limit (0: the default).
func ClampLimit(limit int) int32 {
	switch {
	case limit <= 0:
		return DefaultLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return int32(limit)
}
