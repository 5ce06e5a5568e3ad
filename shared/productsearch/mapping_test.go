package productsearch

import (
	"encoding/json"
	"testing"
	"time"
)

// TestDeleteMemoryIsTheMappings: the index's gc_deletes is DeleteMemory,
// which the replay reads to say when a reindex is needed.
func TestDeleteMemoryIsTheMappings(t *testing.T) {
	var m struct {
		Settings struct {
			Index struct {
				GCDeletes string `json:"gc_deletes"`
			} `json:"index"`
		} `json:"settings"`
	}
	if err := json.Unmarshal([]byte(Mapping), &m); err != nil {
		t.Fatal(err)
	}
	d, err := time.ParseDuration(m.Settings.Index.GCDeletes)
	if err != nil || d != DeleteMemory {
		t.Fatalf("gc_deletes %q (%v), want %v", m.Settings.Index.GCDeletes, err, DeleteMemory)
	}
}
