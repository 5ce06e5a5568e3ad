// Package capacity holds DynamoDB's capacity-unit rules as AWS documents them
// (item sizes, read and write units, transactions, secondary indexes) and a
// Meter that applies them to the calls a client makes. DynamoDB Local's own
// ConsumedCapacity cannot be the measure: it charges a whole
// TransactWriteItems once per table, whatever the number of its items.
//
// The rules, from AWS's developer guide:
//   - "DynamoDB item sizes and formats": an item's size is the sum of its
//     attribute names and values (ItemSize).
//   - "DynamoDB read and write operations": a write costs 1 unit per KB of the
//     larger of the item before and after it, rounded up; a read 1 unit per
//     4 KB, rounded up, half of it when eventually consistent; a Query sums
//     the items it reads before rounding, a BatchGetItem rounds each item.
//   - "Amazon DynamoDB Transactions: How it works": every item of a
//     transaction costs twice (prepare and commit).
//   - "Using Global Secondary Indexes in DynamoDB" and "Local secondary
//     indexes", provisioned throughput considerations: an index
//     that gains, loses or changes an entry takes one more write of the entry
//     (two when its key changes).
//
// Two points the guide leaves open follow what real DynamoDB has been
// measured to charge: a ConditionCheck costs a transactional write of the
// item it checks, and a transaction doubles the table's part of a write,
// not its indexes' part (an index write inside a transaction costs what it
// costs outside one).
package capacity

import (
	"bytes"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
)

// Unit sizes: a write unit covers 1 KB of item, a read unit 4 KB.
const (
	WriteUnitBytes = 1024
	ReadUnitBytes  = 4096
)

// ItemSize is an item's size in bytes: for each attribute the length of its
// name plus the size of its value (ValueSize).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize is the size of one value: strings and binaries their UTF-8 or raw
// bytes, a number one byte per two significant digits plus one, a Boolean or
// null one byte, a set the sum of its members, a list or map 3 bytes plus,
// per element, one byte and the element (with its name in a map).
func ValueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += NumberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + ValueSize(e)
		}
		return n
	}
	return 0
}

// NumberSize is the size of a number in DynamoDB's text form: one byte per
// two significant digits (leading and trailing zeros trimmed, sign, point
// and exponent left out) plus one.
func NumberSize(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	// The digits without sign or point, then without leading and trailing
	// zeros; counted in place (a GET sizes every number it reads).
	var buf [48]byte
	digits := buf[:0]
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '-' && c != '+' && c != '.' {
			digits = append(digits, c)
		}
	}
	digits = bytes.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}

// WriteUnits is what one write of an item of the given size costs: 1 unit
// per KB, rounded up (an empty or missing item counts as one KB), twice that
// inside a transaction.
func WriteUnits(size int, transactional bool) float64 {
	u := math.Ceil(float64(max(size, 1)) / WriteUnitBytes)
	if transactional {
		u *= 2
	}
	return u
}

// Consistency is how a read reads.
type Consistency int

// Read consistencies.
const (
	Eventual Consistency = iota
	Strong
	Transactional
)

// ReadUnits is what reading the given number of bytes costs: 1 unit per
// 4 KB, rounded up (a read that finds nothing still costs one 4 KB), half of
// it when eventually consistent, twice it in a TransactGetItems.
func ReadUnits(size int, c Consistency) float64 {
	u := math.Ceil(float64(max(size, 1)) / ReadUnitBytes)
	switch c {
	case Eventual:
		return u / 2
	case Transactional:
		return 2 * u
	}
	return u
}

// Write is what one write of one item costs, by part: the item in its table,
// and the entries of the table's secondary indexes.
type Write struct {
	Table, Indexes float64
}

// Total is the whole write.
func (w Write) Total() float64 { return w.Table + w.Indexes }

// WriteOf is what a write that turns the item before (nil: absent) into the
// item after (nil: deleted) costs in table t, a put, an update or a delete
// alike: the larger image, doubled in a transaction, and every index's
// IndexWriteUnits.
func WriteOf(t tables.Table, before, after map[string]types.AttributeValue, transactional bool) Write {
	w := Write{Table: WriteUnits(max(ItemSize(before), ItemSize(after)), transactional)}
	for _, ix := range t.GlobalIndexes {
		w.Indexes += IndexWriteUnits(t, ix, before, after)
	}
	for _, ix := range t.LocalIndexes {
		w.Indexes += IndexWriteUnits(t, ix, before, after)
	}
	return w
}

// CheckUnits is what a ConditionCheck of the item (nil: absent) costs in a
// transaction: a transactional write of the item's size.
func CheckUnits(item map[string]types.AttributeValue) float64 {
	return WriteUnits(ItemSize(item), true)
}

// IndexEntry is the entry of an item in index ix of table t: nil when the
// item lacks one of the index's key attributes (a sparse index leaves it
// out); else the table's and the index's keys and the projected attributes.
func IndexEntry(t tables.Table, ix tables.Index, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil || item[ix.PartitionKey.Name] == nil || (ix.SortKey != nil && item[ix.SortKey.Name] == nil) {
		return nil
	}
	if ix.Projection.Type == tables.ProjectAll {
		return item
	}
	names := []string{t.PartitionKey.Name, ix.PartitionKey.Name}
	for _, k := range []*tables.Key{t.SortKey, ix.SortKey} {
		if k != nil {
			names = append(names, k.Name)
		}
	}
	if ix.Projection.Type == tables.ProjectInclude {
		names = append(names, ix.Projection.NonKey...)
	}
	entry := map[string]types.AttributeValue{}
	for _, n := range names {
		if v, ok := item[n]; ok {
			entry[n] = v
		}
	}
	return entry
}

// IndexWriteUnits is what index ix of table t takes for a write that turns
// before into after: nothing when the item is in the index neither before
// nor after, or its entry stays the same; one write of the entry when it
// appears, disappears, or changes under the same index key; two (delete the
// old, put the new) when its index key changes. Index writes are standard
// writes, also inside a transaction.
func IndexWriteUnits(t tables.Table, ix tables.Index, before, after map[string]types.AttributeValue) float64 {
	old, cur := IndexEntry(t, ix, before), IndexEntry(t, ix, after)
	switch {
	case old == nil && cur == nil:
		return 0
	case old == nil:
		return WriteUnits(ItemSize(cur), false)
	case cur == nil:
		return WriteUnits(ItemSize(old), false)
	case !sameValues(indexKey(ix, old), indexKey(ix, cur)):
		return WriteUnits(ItemSize(old), false) + WriteUnits(ItemSize(cur), false)
	case sameValues(old, cur):
		return 0
	}
	return WriteUnits(max(ItemSize(old), ItemSize(cur)), false)
}

func indexKey(ix tables.Index, entry map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{ix.PartitionKey.Name: entry[ix.PartitionKey.Name]}
	if ix.SortKey != nil {
		k[ix.SortKey.Name] = entry[ix.SortKey.Name]
	}
	return k
}

// sameValues reports whether two items hold the same attributes and values.
func sameValues(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for name, v := range a {
		w, ok := b[name]
		if !ok || !sameValue(v, w) {
			return false
		}
	}
	return true
}

func sameValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		b, ok := b.(*types.AttributeValueMemberNULL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value)
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		as, bs := make([]string, len(a.Value)), make([]string, len(b.Value))
		for i := range a.Value {
			as[i], bs[i] = string(a.Value[i]), string(b.Value[i])
		}
		return sameSet(as, bs)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for i := range a.Value {
			if !sameValue(a.Value[i], b.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && sameValues(a.Value, b.Value)
	}
	return false
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int, len(a))
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}
