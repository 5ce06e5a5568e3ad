package keyhash

import (
	"fmt"
	"testing"
)

// TestMix64SpreadsKeysThatDifferInOneCharacter: keys alike but for one
// character land in every one of four places, and a purpose hashes apart
// from the bytes it is written before.
func TestMix64SpreadsKeysThatDifferInOneCharacter(t *testing.T) {
	seen := map[uint64]int{}
	for i := range 16 {
		seen[Mix64("partition", []byte(fmt.Sprintf("p%d", i)))%4]++
	}
	if len(seen) != 4 {
		t.Errorf("16 keys p0..p15 over 4 places: got %v, want every place used", seen)
	}
	for place, n := range seen {
		if n > 8 {
			t.Errorf("place %d holds %d of 16 keys", place, n)
		}
	}
	// Keys of one length whose last characters are equal modulo 4: FNV-1a
	// alone, modulo 4, puts them all in one place.
	quad := map[uint64]bool{}
	for _, k := range []string{"p1", "p5", "p9", "pA", "pE", "pI", "pM", "pQ"} {
		quad[Mix64("partition", []byte(k))%4] = true
	}
	if len(quad) == 1 {
		t.Errorf("p1, p5, p9, pA, pE, pI, pM and pQ all in one place of four")
	}
	if Mix64("ab", []byte("c")) == Mix64("a", []byte("bc")) {
		t.Error("the purpose and the bytes run together")
	}
	if Mix64("lane", []byte("k")) != Mix64("lane", []byte("k")) {
		t.Error("not deterministic")
	}
}
