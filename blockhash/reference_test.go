package blockhash

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// referenceChain hashes the token blocks with the xxHash project's own C
// implementation, through Debian's python3-xxhash, as Dynamo's router does
// it (docs: XXH3-64, seed 1337, tokens as little-endian u32; a block's
// sequence hash is XXH3 of its parent's and its own local hash as
// little-endian u64s). It skips the test when that module is missing and
// KVLENS_REQUIRE_PYXXHASH is unset; make test sets it.
func referenceChain(t *testing.T, blocks [][]uint32) []uint64 {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import xxhash").Run(); err != nil {
		if os.Getenv("KVLENS_REQUIRE_PYXXHASH") != "" {
			t.Fatalf("%s cannot import xxhash (apt-get install python3-xxhash): %v", python, err)
		}
		t.Skipf("no xxhash module in %s: %v", python, err)
	}
	// One block a line, its tokens' little-endian bytes in hex.
	var in strings.Builder
	for _, b := range blocks {
		raw := make([]byte, 0, 4*len(b))
		for _, tok := range b {
			raw = binary.LittleEndian.AppendUint32(raw, tok)
		}
		fmt.Fprintln(&in, hex.EncodeToString(raw))
	}
	const script = `
import sys, struct, xxhash
parent = None
for line in sys.stdin:
    local = xxhash.xxh3_64_intdigest(bytes.fromhex(line.strip()), seed=1337)
    parent = local if parent is None else xxhash.xxh3_64_intdigest(struct.pack("<QQ", parent, local), seed=1337)
    print(parent)
`
	cmd := exec.Command(python, "-c", script)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 xxhash: %v", err)
	}
	var hashes []uint64
	for _, f := range strings.Fields(string(out)) {
		h, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	return hashes
}

// TestChainMatchesTheReferenceXXH3 holds Chain to hashes kvlens did not
// compute: the C reference's, for blocks of 1, 16 and 32 tokens of ids
// across the whole u32 range.
func TestChainMatchesTheReferenceXXH3(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 16, 32} {
		t.Run(fmt.Sprintf("blocks of %d tokens", size), func(t *testing.T) {
			tokens := make([]uint32, 12*size)
			for i := range tokens {
				tokens[i] = rng.Uint32()
			}
			tokens[0], tokens[1%len(tokens)] = 0, 0xffffffff
			var blocks [][]uint32
			for off := 0; off < len(tokens); off += size {
				blocks = append(blocks, tokens[off:off+size])
			}
			want := referenceChain(t, blocks)
			got := Chain(tokens, size)
			if len(got) != len(want) {
				t.Fatalf("%d hashes, the reference gives %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("block %d: %#x, the reference gives %#x", i, got[i], want[i])
				}
			}
		})
	}
}
