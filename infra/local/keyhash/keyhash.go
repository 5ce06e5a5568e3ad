// Package keyhash spreads key values over a few places, as DynamoDB's hash
// of a partition key spreads items over partitions: the local front's
// partitions and the local stream mappings' shards and lanes.
package keyhash

import "hash/fnv"

// Mix64 hashes b under a purpose: FNV-1a over the purpose, a zero byte and
// b, then MurmurHash3's finalizer, so that every output bit depends on every
// input bit (FNV alone modulo a small number depends on the last bytes
// only: "p1", "p5" and "p9" would share a place out of four).
func Mix64(purpose string, b []byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	h.Write(b)
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
