package router

import (
	"math/rand/v2"
	"testing"
)

// TestTableMatchesANaiveModel applies random stores, links and removals and
// checks every match against a plain map of sets, so stale hints, reused
// nodes, prompts stored piecemeal and the extra words past slot 63 are all
// exercised.
func TestTableMatchesANaiveModel(t *testing.T) {
	tests := []struct {
		name          string
		slots, blocks int // worker slots; blocks per chain
		hashes        int // distinct block hashes: fewer than blocks × chains makes chains share blocks
		steps         int
	}{
		{"130 slots use the words past slot 63", 130, 12, 300, 20000},
		{"64 slots with chains long enough for every window and lane", 64, 700, 6000, 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkTableModel(t, tt.slots, tt.blocks, tt.hashes, tt.steps) })
	}
}

func checkTableModel(t *testing.T, slots, blocks, hashes, steps int) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table
	model := map[uint64]map[int]bool{}
	chains := make([][]uint64, 40)
	for c := range chains {
		for range blocks {
			chains[c] = append(chains[c], uint64(rng.IntN(hashes)+1))
		}
	}
	for step := range steps {
		c := chains[rng.IntN(len(chains))]
		slot := rng.IntN(slots)
		n := rng.IntN(len(c)) + 1
		if rng.IntN(3) > 0 {
			// Store a stretch ending at n, as one event of a prompt stored
			// over several does.
			from := 0
			if rng.IntN(2) == 0 {
				from = rng.IntN(n)
			}
			for i, h := range c[from:n] {
				want := !model[h][slot]
				if got := tb.add(h, slot); got != want {
					t.Fatalf("step %d: add(%d, %d) = %v, want %v", step, h, slot, got, want)
				}
				if model[h] == nil {
					model[h] = map[int]bool{}
				}
				model[h][slot] = true
				if i > 0 {
					tb.link(c[from+i-1], h)
				}
			}
			if from > 0 {
				tb.link(c[from-1], c[from])
			}
		} else {
			for _, h := range c[rng.IntN(n):n] {
				want := model[h][slot]
				if got := tb.remove(h, slot); got != want {
					t.Fatalf("step %d: remove(%d, %d) = %v, want %v", step, h, slot, got, want)
				}
				delete(model[h], slot)
				if len(model[h]) == 0 {
					delete(model, h)
				}
			}
		}
		q := chains[rng.IntN(len(chains))]
		depth := make([]int, tb.width())
		tb.match(q, depth)
		for s := range slots {
			want := 0
			for want < len(q) && model[q[want]][s] {
				want++
			}
			if got := 0; s < len(depth) {
				got = depth[s]
				if got != want {
					t.Fatalf("step %d: slot %d matched %d blocks, want %d", step, s, got, want)
				}
			} else if want != 0 {
				t.Fatalf("step %d: slot %d beyond the table's width but holds %d", step, s, want)
			}
		}
		if tb.distinct() != len(model) {
			t.Fatalf("step %d: %d distinct blocks, want %d", step, tb.distinct(), len(model))
		}
	}
}
