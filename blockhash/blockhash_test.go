package blockhash

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"
)

func seq(n int, from uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

func TestChain(t *testing.T) {
	a := seq(100, 1)                          // 3 full blocks of 32, 4 left over
	b := append(seq(64, 1), seq(36, 1000)...) // same first 2 blocks, then different
	ca, cb := Chain(a, 32), Chain(b, 32)
	tests := []struct {
		name string
		ok   bool
	}{
		{"a partial block has no hash: 100 tokens give 3 blocks", len(ca) == 3},
		{"equal prefixes give equal hashes", ca[0] == cb[0] && ca[1] == cb[1]},
		{"a different block changes its hash", ca[2] != cb[2]},
		{"the first block's sequence hash is its local hash", ca[0] == Local(a[:32])},
		{"later blocks chain parent and local hash", ca[1] == Next(ca[0], Local(a[32:64]))},
		{"the same block at another position hashes differently", Chain(append(seq(32, 5000), a[:32]...), 32)[1] != ca[0]},
		{"extending a chain equals hashing the whole", slices.Equal(Extend(Chain(a[:64], 32), a[64:], 32), ca)},
		{"a block size of 0 yields no blocks", len(Chain(a, 0)) == 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Errorf("does not hold: chain of a %x, of b %x", ca, cb)
			}
		})
	}
}

func TestLocalIsXXH3OfLittleEndianU32s(t *testing.T) {
	// Written out by hand, independent of the package's loop.
	raw := []byte{1, 0, 0, 0, 0x02, 0x01, 0, 0, 0xff, 0xff, 0xff, 0xff}
	want := xxh3.HashSeed(raw, 1337)
	if got := Local([]uint32{1, 0x0102, 0xffffffff}); got != want {
		t.Fatalf("Local = %#x, want %#x", got, want)
	}
	var pair [16]byte
	binary.LittleEndian.PutUint64(pair[:], 7)
	binary.LittleEndian.PutUint64(pair[8:], 9)
	if got, want := Next(7, 9), xxh3.HashSeed(pair[:], 1337); got != want {
		t.Fatalf("Next = %#x, want %#x", got, want)
	}
}

func BenchmarkChain400Blocks(b *testing.B) {
	tokens := seq(400*32, 1) // 12,800 tokens at B=32
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(tokens)))
	for b.Loop() {
		Chain(tokens, 32)
	}
}

func TestExtendHashesInPlaceAsLocalAndNextDo(t *testing.T) {
	tokens := make([]uint32, 32*9+5)
	for i := range tokens {
		tokens[i] = uint32(i*2654435761) ^ 0xdeadbeef
	}
	for _, b := range []int{1, 16, 32, 64} {
		var want []uint64
		for off := 0; off+b <= len(tokens); off += b {
			local := Local(tokens[off : off+b])
			if len(want) == 0 {
				want = append(want, local)
			} else {
				want = append(want, Next(want[len(want)-1], local))
			}
		}
		got := Chain(tokens, b)
		if len(got) != len(want) {
			t.Fatalf("b=%d: %d hashes, want %d", b, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("b=%d: block %d hash %#x, want %#x", b, i, got[i], want[i])
			}
		}
	}
}
