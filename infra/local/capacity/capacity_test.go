package capacity_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/capacity"
	"github.com/shopstream/shopstream/shared/tables"
)

type item = map[string]types.AttributeValue

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		item item
		want int
	}{
		{"empty", item{}, 0},
		{"string: name and UTF-8 bytes", item{"name": s("abc")}, 4 + 3},
		{"string of 4-byte characters", item{"n": s("𝄞𝄞")}, 1 + 8},
		{"zero", item{"n": n("0")}, 1 + 1},
		{"one digit", item{"n": n("7")}, 1 + 2},
		{"two digits", item{"n": n("12")}, 1 + 2},
		{"three digits", item{"n": n("123")}, 1 + 3},
		{"trailing zeros trimmed", item{"n": n("1000")}, 1 + 2},
		{"sign and point left out", item{"n": n("-001.2500")}, 1 + 3},
		{"exponent left out", item{"n": n("1.5E+10")}, 1 + 2},
		{"binary: raw bytes", item{"b": &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 3}}}, 1 + 4},
		{"Boolean", item{"ok": &types.AttributeValueMemberBOOL{Value: true}}, 2 + 1},
		{"null", item{"no": &types.AttributeValueMemberNULL{Value: true}}, 2 + 1},
		{"empty list", item{"l": &types.AttributeValueMemberL{}}, 1 + 3},
		{"list: 3 bytes and one per element", item{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), n("5")}}}, 1 + 3 + (1 + 2) + (1 + 2)},
		{"map: element names count", item{"m": &types.AttributeValueMemberM{Value: item{"qty": n("12")}}}, 1 + 3 + 1 + 3 + 2},
		{"nested map", item{"m": &types.AttributeValueMemberM{Value: item{"x": &types.AttributeValueMemberM{Value: item{}}}}}, 1 + 3 + 1 + 1 + 3},
		{"string set", item{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
		{"number set", item{"ns": &types.AttributeValueMemberNS{Value: []string{"1", "123"}}}, 2 + 2 + 3},
		{"binary set", item{"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}}, 2 + 3},
		{"attributes add up", item{"userId": s("u1"), "version": n("3")}, 6 + 2 + 7 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capacity.ItemSize(tc.item); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWriteUnits(t *testing.T) {
	for _, tc := range []struct {
		size          int
		transactional bool
		want          float64
	}{
		{0, false, 1}, {1, false, 1}, {500, false, 1}, {1024, false, 1}, {1025, false, 2},
		{1600, false, 2}, {2048, false, 2}, {2049, false, 3},
		{0, true, 2}, {500, true, 2}, {1024, true, 2}, {1025, true, 4}, {2048, true, 4},
	} {
		if got := capacity.WriteUnits(tc.size, tc.transactional); got != tc.want {
			t.Errorf("WriteUnits(%d, %v): got %g, want %g", tc.size, tc.transactional, got, tc.want)
		}
	}
}

// TestReadUnits follows the guide's examples: an 8 KB item is 2 units
// strongly consistent, 1 eventually consistent, 4 in a transaction; 3.5 KB
// rounds to 4 KB, 10 KB to 12 KB; a read that finds nothing still costs.
func TestReadUnits(t *testing.T) {
	for _, tc := range []struct {
		size int
		c    capacity.Consistency
		want float64
	}{
		{8192, capacity.Strong, 2}, {8192, capacity.Eventual, 1}, {8192, capacity.Transactional, 4},
		{3584, capacity.Strong, 1}, {10240, capacity.Strong, 3}, {10240, capacity.Eventual, 1.5},
		{0, capacity.Strong, 1}, {0, capacity.Eventual, 0.5}, {0, capacity.Transactional, 2},
		{4096, capacity.Eventual, 0.5}, {4097, capacity.Eventual, 1},
	} {
		if got := capacity.ReadUnits(tc.size, tc.c); got != tc.want {
			t.Errorf("ReadUnits(%d, %v): got %g, want %g", tc.size, tc.c, got, tc.want)
		}
	}
}

// indexed is a table with one index of each projection, the ALL one sparse.
var indexed = tables.Table{
	Name: "things", PartitionKey: tables.Key{Name: "id", Type: tables.String},
	GlobalIndexes: []tables.Index{
		{Name: "open", PartitionKey: tables.Key{Name: "openKey", Type: tables.String}, SortKey: &tables.Key{Name: "id", Type: tables.String}, Projection: tables.Projection{Type: tables.ProjectAll}},
		{Name: "byOwner", PartitionKey: tables.Key{Name: "owner", Type: tables.String}, Projection: tables.Projection{Type: tables.ProjectKeysOnly}},
		{Name: "byKind", PartitionKey: tables.Key{Name: "kind", Type: tables.String}, Projection: tables.Projection{Type: tables.ProjectInclude, NonKey: []string{"title"}}},
	},
}

func index(name string) tables.Index {
	for _, ix := range indexed.GlobalIndexes {
		if ix.Name == name {
			return ix
		}
	}
	panic(name)
}

// big is a string attribute that makes an item over 1 KB.
var big = s(strings.Repeat("x", 1500))

func TestIndexEntry(t *testing.T) {
	it := item{"id": s("a"), "owner": s("o"), "kind": s("k"), "title": s("t"), "body": big}
	for _, tc := range []struct {
		index string
		item  item
		want  []string
	}{
		{"open", it, nil},
		{"open", item{"id": s("a"), "openKey": s("P#1"), "body": big}, []string{"body", "id", "openKey"}},
		{"byOwner", it, []string{"id", "owner"}},
		{"byKind", it, []string{"id", "kind", "title"}},
		{"byKind", item{"id": s("a"), "kind": s("k")}, []string{"id", "kind"}},
	} {
		entry := capacity.IndexEntry(indexed, index(tc.index), tc.item)
		var got []string
		for _, name := range []string{"body", "id", "kind", "openKey", "owner", "title"} {
			if _, ok := entry[name]; ok {
				got = append(got, name)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s entry of %v: got %v, want %v", tc.index, tc.item, got, tc.want)
		}
	}
}

func TestIndexWriteUnits(t *testing.T) {
	placed := item{"id": s("a"), "openKey": s("PLACED#3"), "status": s("PLACED"), "version": n("1")}
	for _, tc := range []struct {
		name          string
		index         string
		before, after item
		want          float64
	}{
		{"a new item with the index key: one put", "open", nil, placed, 1},
		{"a large new entry: one put of its KBs", "open", nil, item{"id": s("a"), "openKey": s("P"), "body": big}, 2},
		{"an update that defines the index key: one put", "open", item{"id": s("a")}, placed, 1},
		{"the index key changes: delete and put", "open", placed, item{"id": s("a"), "openKey": s("SHIPPED#3"), "status": s("SHIPPED"), "version": n("2")}, 2},
		{"the index key removed: one delete", "open", placed, item{"id": s("a"), "status": s("DELIVERED"), "version": n("3")}, 1},
		{"a deleted item: one delete", "open", placed, nil, 1},
		{"in the index neither before nor after: nothing", "open", item{"id": s("a"), "v": n("1")}, item{"id": s("a"), "v": n("2")}, 0},
		{"a projected attribute changes: one write", "open", placed, item{"id": s("a"), "openKey": s("PLACED#3"), "status": s("PLACED"), "version": n("2")}, 1},
		{"keys only, a non-key attribute changes: nothing", "byOwner", item{"id": s("a"), "owner": s("o"), "v": n("1")}, item{"id": s("a"), "owner": s("o"), "v": n("2")}, 0},
		{"include, an attribute not projected changes: nothing", "byKind", item{"id": s("a"), "kind": s("k"), "title": s("t"), "v": n("1")}, item{"id": s("a"), "kind": s("k"), "title": s("t"), "v": n("2")}, 0},
		{"include, a projected attribute changes: one write", "byKind", item{"id": s("a"), "kind": s("k"), "title": s("t")}, item{"id": s("a"), "kind": s("k"), "title": s("u")}, 1},
		{"keys only, a large item: the entry's size counts", "byOwner", nil, item{"id": s("a"), "owner": s("o"), "body": big}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capacity.IndexWriteUnits(indexed, index(tc.index), tc.before, tc.after); got != tc.want {
				t.Errorf("got %g, want %g", got, tc.want)
			}
		})
	}
}

func TestWriteOf(t *testing.T) {
	small := item{"id": s("a"), "v": n("1")}
	large := item{"id": s("a"), "body": big}
	open := item{"id": s("a"), "openKey": s("P"), "owner": s("o")}
	for _, tc := range []struct {
		name          string
		before, after item
		transactional bool
		want          capacity.Write
	}{
		{"a put of a small new item", nil, small, false, capacity.Write{Table: 1}},
		{"an update from small to large: the larger image", small, large, false, capacity.Write{Table: 2}},
		{"an update from large to small: the larger image", large, small, false, capacity.Write{Table: 2}},
		{"a delete: the deleted item", large, nil, false, capacity.Write{Table: 2}},
		{"a delete of nothing", nil, nil, false, capacity.Write{Table: 1}},
		{"in a transaction: the table's part twice", nil, large, true, capacity.Write{Table: 4}},
		{"indexes: standard writes, also in a transaction", nil, open, true, capacity.Write{Table: 2, Indexes: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capacity.WriteOf(indexed, tc.before, tc.after, tc.transactional); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// The transactions guide's example: three 500-byte items in one
	// transaction take six write units.
	five := item{"id": s("a"), "body": s(strings.Repeat("x", 500-len("id")-1-len("body")))}
	if got := capacity.ItemSize(five); got != 500 {
		t.Fatalf("example item: %d bytes, want 500", got)
	}
	total := 0.0
	for range 3 {
		total += capacity.WriteOf(indexed, nil, five, true).Total()
	}
	if total != 6 {
		t.Errorf("three 500-byte items in a transaction: got %g WRU, want 6", total)
	}
}

func TestCheckUnits(t *testing.T) {
	if got := capacity.CheckUnits(nil); got != 2 {
		t.Errorf("a check of a missing item: got %g, want 2", got)
	}
	if got := capacity.CheckUnits(item{"id": s("a"), "body": big}); got != 4 {
		t.Errorf("a check of a 1.5 KB item: got %g, want 4", got)
	}
}

// TestNumberSize: one byte per two significant digits, plus one; sign,
// point, exponent and leading and trailing zeros do not count.
func TestNumberSize(t *testing.T) {
	for s, want := range map[string]int{
		"0":                                      1,
		"7":                                      2,
		"12":                                     2,
		"123":                                    3,
		"-1.50":                                  2,
		"+100":                                   2,
		"0.001":                                  2,
		"1E+10":                                  2,
		"2.5e-3":                                 2,
		"12345678901234567890123456789012345678": 20,
		"-1234567890123456789012345678901234567.8": 20,
	} {
		t.Run(s, func(t *testing.T) {
			if got := capacity.NumberSize(s); got != want {
				t.Errorf("got %d, want %d", got, want)
			}
		})
	}
}
