package router

import "testing"

func TestBranchesTellASharedPrefixFromAConversationsOwnHistory(t *testing.T) {
	starter := []uint64{1, 2, 3}
	chain := func(tail ...uint64) []uint64 { return append(append([]uint64(nil), starter...), tail...) }
	tests := []struct {
		name   string
		seen   [][]uint64
		chain  []uint64
		shared int
	}{
		{"a first prompt shares nothing", nil, chain(), 0},
		{"one conversation's turns only extend each other", [][]uint64{chain(), chain(10, 11)}, chain(10, 11, 12, 13), 0},
		{"a starter two conversations continue differently is shared", [][]uint64{chain(10, 11), chain(20, 21)}, chain(), 3},
		{"a follow-up shares the starter and owns the rest", [][]uint64{chain(10, 11), chain(20, 21)}, chain(20, 21, 22), 3},
		{"a branch deeper in a conversation counts too", [][]uint64{chain(10, 11), chain(10, 12)}, chain(10, 11, 13), 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b branches
			for _, c := range tt.seen {
				b.observe(c)
			}
			if got := b.observe(tt.chain); got != tt.shared {
				t.Fatalf("shared = %d, want %d", got, tt.shared)
			}
		})
	}
}

func TestBranchesForgetOnlyWhatAGenerationHeldNoLonger(t *testing.T) {
	var b branches
	b.observe([]uint64{1, 2})
	b.observe([]uint64{1, 3}) // block 1 forks
	// Fill a generation with other blocks, seeing the starter again half-way,
	// as a demo does while conversations keep opening with it.
	for i := uint64(0); i < maxBranches; i++ {
		b.observe([]uint64{1000 + 2*i, 1001 + 2*i})
		if i == maxBranches/2 {
			b.observe([]uint64{1, 4})
		}
	}
	if got := b.observe([]uint64{1, 5}); got != 1 {
		t.Fatalf("after a generation, a starter still in use: shared = %d, want 1", got)
	}
	if n := len(b.cur) + len(b.old); n > 2*maxBranches {
		t.Fatalf("%d blocks held; want at most two generations of %d", n, maxBranches)
	}
}
