package router

import (
	"math/rand/v2"
	"testing"
)

// TestTableMatchesANaiveModel applies random stores, links and removals
// over 130 worker slots and checks every match against a plain map of sets,
// so stale hints, reused nodes and the extra words past slot 63 are all
// exercised.
func TestTableMatchesANaiveModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table
	model := map[uint64]map[int]bool{}
	// 40 chains of 12 blocks over a small hash space, so blocks are shared.
	chains := make([][]uint64, 40)
	for c := range chains {
		for range 12 {
			chains[c] = append(chains[c], uint64(rng.IntN(300)+1))
		}
	}
	for step := range 20000 {
		c := chains[rng.IntN(len(chains))]
		slot := rng.IntN(130)
		n := rng.IntN(len(c)) + 1
		if rng.IntN(3) > 0 {
			for i, h := range c[:n] {
				want := !model[h][slot]
				if got := tb.add(h, slot); got != want {
					t.Fatalf("step %d: add(%d, %d) = %v, want %v", step, h, slot, got, want)
				}
				if model[h] == nil {
					model[h] = map[int]bool{}
				}
				model[h][slot] = true
				if i > 0 {
					tb.link(c[i-1], h)
				}
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
		for s := range 130 {
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
