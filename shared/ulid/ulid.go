// Package ulid generates ULIDs (https://github.com/ulid/spec): 26-character,
// Crockford base32, time-ordered identifiers. A Generator is monotonic: ids it
// returns sort in the order it returned them, even within one millisecond.
package ulid

import (
	"crypto/rand"
	"sync"
	"time"
)

const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// Generator returns monotonic ULIDs. The zero value is not usable; use New.
type Generator struct {
	mu   sync.Mutex
	now  func() time.Time
	last [16]byte
	ms   uint64
}

// New returns a Generator reading the time from now (time.Now when nil).
func New(now func() time.Time) *Generator {
	if now == nil {
		now = time.Now
	}
	return &Generator{now: now}
}

// Make returns a new ULID.
func (g *Generator) Make() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := uint64(g.now().UnixMilli())
	var id [16]byte
	if ms <= g.ms {
		// Same (or earlier) millisecond: increment the last id's random part so
		// the order holds.
		id = g.last
		for i := 15; i >= 6; i-- {
			id[i]++
			if id[i] != 0 {
				break
			}
		}
	} else {
		g.ms = ms
		for i := 0; i < 6; i++ {
			id[i] = byte(ms >> (40 - 8*i))
		}
		_, _ = rand.Read(id[6:])
		id[6] &= 0x7f // leave room to increment without overflowing the time part
	}
	g.last = id
	return encode(id)
}

func encode(id [16]byte) string {
	// 128 bits in 26 base32 digits: the first digit carries the top 3 bits.
	var out [26]byte
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(id[i])
		lo = lo<<8 | uint64(id[8+i])
	}
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Valid reports whether s looks like a ULID.
func Valid(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !contains(s[i]) {
			return false
		}
	}
	return true
}

func contains(c byte) bool {
	for i := 0; i < len(alphabet); i++ {
		if alphabet[i] == c {
			return true
		}
	}
	return false
}
