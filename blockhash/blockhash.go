// Package blockhash names KV-cache blocks the way NVIDIA Dynamo's router does,
// so that kvlens's index, its simulated workers and Dynamo agree on which
// prompt prefixes are equal.
//
// Each full block of B token ids, written as little-endian u32s, gets a local
// hash, XXH3-64 with seed 1337. Blocks are chained: the first block's
// sequence hash is its local hash, and block i's is XXH3-64 (seed 1337) of
// le64(seq[i-1]) ‖ le64(local[i]). Two prompts share a sequence hash at block
// i exactly when their first (i+1)·B tokens are equal.
package blockhash

import (
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Seed is the XXH3 seed Dynamo uses for block hashes.
const Seed = 1337

// Local returns the local hash of one block of token ids.
func Local(tokens []uint32) uint64 {
	buf := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[4*i:], t)
	}
	return xxh3.HashSeed(buf, Seed)
}

// Next returns the sequence hash of a block whose parent has sequence hash
// parent and whose own local hash is local.
func Next(parent, local uint64) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], parent)
	binary.LittleEndian.PutUint64(buf[8:], local)
	return xxh3.HashSeed(buf[:], Seed)
}

// Chain returns the sequence hashes of every full block of size b in tokens.
// A trailing partial block has no hash.
func Chain(tokens []uint32, b int) []uint64 {
	return Extend(nil, tokens, b)
}

// Extend continues chain with the full blocks of tokens, which follow the
// blocks chain already names, and returns the longer chain. It appends to
// chain's backing array, as append does.
func Extend(chain []uint64, tokens []uint32, b int) []uint64 {
	if b <= 0 {
		return chain
	}
	n := len(tokens) / b * b
	if n == 0 {
		return chain
	}
	// On a little-endian machine the token ids already sit in memory as the
	// bytes to hash, so hash them in place: copying them out first stalls
	// on store-to-load forwarding and makes hashing about 4 times slower.
	raw := littleEndianBytes(tokens[:n])
	for off := 0; off < n; off += b {
		local := xxh3.HashSeed(raw[4*off:4*(off+b)], Seed)
		if len(chain) == 0 {
			chain = append(chain, local)
		} else {
			chain = append(chain, Next(chain[len(chain)-1], local))
		}
	}
	return chain
}

// littleEndianBytes returns tokens as little-endian u32 bytes: the memory
// itself on little-endian machines, a copy elsewhere.
func littleEndianBytes(tokens []uint32) []byte {
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens))
	}
	buf := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[4*i:], t)
	}
	return buf
}
