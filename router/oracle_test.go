package router

import (
	"testing"

	"github.com/kvlens/kvlens/kvevents"
)

func TestOracle(t *testing.T) {
	// Prompts are built from 4-token blocks filled with one value each
	// (toks), so prompt(1, 3) and prompt(1, 5) share their first 3 blocks.
	prompt := func(base, blocks int) []uint32 { return toks(base, blocks) }
	type step struct {
		worker string         // who stores, when ev is set
		ev     kvevents.Event // a KV event, or nil for a request
		req    []uint32       // the request's prompt
		extra  int            // tokens past the last full block
		want   int            // the request's best achievable hit, in tokens
	}
	tests := []struct {
		name  string
		steps []step
		rate  float64 // the run's oracle hit rate
	}{
		{
			name: "a prompt nobody stored has no achievable hit",
			steps: []step{
				{req: prompt(1, 3), extra: 1, want: 0},
			},
			rate: 0,
		},
		{
			name: "blocks stored on different workers add up to one union",
			steps: []step{
				{worker: "a", ev: stored(0, ids(1, 2), prompt(1, 2))},
				{worker: "b", ev: stored(2, ids(3, 2), prompt(3, 2))}, // b's parent 2 is unknown to b: dropped by the index
				{worker: "b", ev: stored(0, ids(11, 4), prompt(1, 4))},
				// 4 blocks + 1 token: all 4 blocks are in the union.
				{req: prompt(1, 4), extra: 1, want: 16},
			},
			rate: 16.0 / 17,
		},
		{
			name: "a removed or cleared block stays in the union",
			steps: []step{
				{worker: "a", ev: stored(0, ids(1, 3), prompt(1, 3))},
				{worker: "a", ev: &kvevents.BlockRemoved{BlockHashes: ids(2, 2)}},
				{worker: "a", ev: &kvevents.AllBlocksCleared{}},
				{req: prompt(1, 3), extra: 2, want: 12},
			},
			rate: 12.0 / 14,
		},
		{
			name: "a whole-block prompt is capped one block short, as the engine computes its last token",
			steps: []step{
				{worker: "a", ev: stored(0, ids(1, 3), prompt(1, 3))},
				{req: prompt(1, 3), want: 8},
			},
			rate: 8.0 / 12,
		},
		{
			name: "the match stops at the first block missing from the union",
			steps: []step{
				{worker: "a", ev: stored(0, ids(1, 2), prompt(1, 2))},
				{worker: "b", ev: stored(0, ids(5, 1), prompt(7, 1))},
				{req: append(prompt(1, 2), prompt(9, 2)...), extra: 3, want: 8},
				{req: prompt(7, 2), extra: 1, want: 4},
			},
			rate: 12.0 / (19 + 9),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRouter(NewPool(fleet(2)), &RoundRobin{}, Config{BlockSize: testB})
			for i, s := range tt.steps {
				if s.ev != nil {
					rt.Index().Apply(s.worker, s.ev)
					continue
				}
				ids := append(append([]uint32{}, s.req...), make([]uint32, s.extra)...)
				b, err := rt.Decide(&Request{TokenIDs: ids}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := b.OracleTokens(); got != s.want {
					t.Fatalf("step %d: oracle = %d tokens, want %d", i, got, s.want)
				}
				b.FirstToken()
				b.Release()
			}
			if got := rt.Counts().Oracle.HitRate; got < tt.rate-1e-9 || got > tt.rate+1e-9 {
				t.Fatalf("oracle hit rate = %.4f, want %.4f", got, tt.rate)
			}
		})
	}
}

func TestOracleBound(t *testing.T) {
	o := NewOracle(3)
	o.Store([]uint64{1, 2, 3, 4, 5})
	s := o.Stats()
	if s.Blocks != 3 || s.Saturated != 2 {
		t.Fatalf("blocks %d, saturated %d; want 3 and 2", s.Blocks, s.Saturated)
	}
	// Blocks 4 and 5 were never learnt: the oracle understates, and says so.
	if got := o.Match([]uint64{1, 2, 3, 4, 5}, 100, 4); got != 12 {
		t.Fatalf("match = %d tokens, want 12", got)
	}
}

func TestOracleSadPath(t *testing.T) {
	o := NewOracle(0)
	o.Store([]uint64{1})
	tests := []struct {
		name              string
		chain             []uint64
		tokens, blockSize int
	}{
		{"an empty prompt matches nothing", []uint64{1}, 0, 4},
		{"a one-token prompt computes its only token", []uint64{1}, 1, 4},
		{"a zero block size matches nothing", []uint64{1}, 8, 0},
		{"a chain shorter than the prompt is matched as far as it goes", nil, 8, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := o.Match(tt.chain, tt.tokens, tt.blockSize); got != 0 {
				t.Fatalf("match = %d, want 0", got)
			}
		})
	}
}
