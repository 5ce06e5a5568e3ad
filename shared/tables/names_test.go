package tables_test

import (
	"testing"

	"github.com/shopstream/shopstream/shared/tables"
)

// TestNamesHoldEveryTable fails when a table has no field in Names.
func TestNamesHoldEveryTable(t *testing.T) {
	n := tables.WithPrefix("p-")
	for _, tb := range tables.All() {
		if got, want := n.Of(tb.Name), "p-"+tb.Name; got != want {
			t.Errorf("%s: got %q, want %q", tb.Name, got, want)
		}
		if got, ok := n.Logical("p-" + tb.Name); !ok || got != tb.Name {
			t.Errorf("Logical(p-%s): got %q %v, want %s", tb.Name, got, ok, tb.Name)
		}
	}
	if got, want := len(n.Map()), len(tables.All()); got != want {
		t.Errorf("Map: got %d tables, want %d", got, want)
	}
	var empty tables.Names
	if err := empty.Set("nope", "x"); err == nil {
		t.Error("Set of an unknown table: got nil, want an error")
	}
	if _, ok := empty.Logical(""); ok {
		t.Error(`Logical(""): got a table, want none`)
	}
}
