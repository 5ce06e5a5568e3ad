package tables_test

import (
	"os"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/shared/tables"
)

// TestDataModelDocumentsEveryTable fails when a table or index defined here
// has no section in docs/data-model.md.
func TestDataModelDocumentsEveryTable(t *testing.T) {
	raw, err := os.ReadFile("../../docs/data-model.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, tb := range tables.All() {
		if !strings.Contains(doc, "### `"+tb.Name+"` table") {
			t.Errorf("docs/data-model.md has no section \"### `%s` table\"", tb.Name)
		}
		for _, ix := range append(append([]tables.Index{}, tb.GlobalIndexes...), tb.LocalIndexes...) {
			kind := "GSI"
			for _, l := range tb.LocalIndexes {
				if l.Name == ix.Name {
					kind = "LSI"
				}
			}
			heading := "### `" + ix.Name + "` " + kind + " (on " + tb.Name + ")"
			if !strings.Contains(doc, heading) {
				t.Errorf("docs/data-model.md has no section %q", heading)
			}
		}
		if tb.TTLAttribute != "" && !strings.Contains(doc, "`"+tb.TTLAttribute+"`") {
			t.Errorf("docs/data-model.md does not name the TTL attribute %s of %s", tb.TTLAttribute, tb.Name)
		}
	}
}
