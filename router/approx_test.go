package router

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/des"
)

func TestApprox(t *testing.T) {
	chainOf := func(base, n int) []uint64 { return blockhash.Chain(toks(base, n), testB) }
	tests := []struct {
		name string
		run  func(a *Approx, clk *des.Loop)
		want map[string]int // overlap of chainOf(1, 10) per worker
		size int
	}{
		{"a decision predicts the chosen worker holds the prompt",
			func(a *Approx, clk *des.Loop) { a.Insert("a", chainOf(1, 10)) },
			map[string]int{"a": 10}, 10},
		{"predictions expire after the TTL",
			func(a *Approx, clk *des.Loop) { a.Insert("a", chainOf(1, 10)); clk.Run(time.Minute + time.Second) },
			map[string]int{}, 0},
		{"reuse refreshes the TTL of the blocks reused",
			func(a *Approx, clk *des.Loop) {
				a.Insert("a", chainOf(1, 10))
				clk.Run(40 * time.Second)
				a.Insert("a", chainOf(1, 4)) // the first 4 blocks are reused
				clk.Run(30 * time.Second)
			}, map[string]int{"a": 4}, 4},
		{"past the cap the earliest-expiring are pruned to 80%",
			func(a *Approx, clk *des.Loop) {
				a.Insert("b", chainOf(500, 10)) // oldest: pruned first
				clk.Run(time.Second)
				a.Insert("a", chainOf(1, 10))
				clk.Run(time.Second)
				a.Insert("c", chainOf(900, 3)) // 23 > 20: prune to 16
			}, map[string]int{"a": 10}, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := des.New(time.Unix(1_700_000_000, 0))
			a := NewApprox(clk, time.Minute, 20)
			tt.run(a, clk)
			names := []string{"a", "b", "c"}
			got := map[string]int{}
			for i, d := range a.FindMatches(chainOf(1, 10), names, nil) {
				if d > 0 {
					got[names[i]] = d
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("overlap = %v, want %v", got, tt.want)
			}
			if n := a.Len(); n != tt.size {
				t.Fatalf("size = %d, want %d", n, tt.size)
			}
			sum := 0
			for _, n := range a.Sizes(names, nil) {
				sum += n
			}
			if sum != tt.size {
				t.Fatalf("per-worker sizes sum to %d, want %d", sum, tt.size)
			}
		})
	}
}

func TestApproxRemoveAndClear(t *testing.T) {
	a := NewApprox(des.New(time.Unix(1_700_000_000, 0)), 0, 0)
	c := blockhash.Chain(toks(1, 5), testB)
	a.Insert("a", c)
	a.Insert("b", c)
	a.RemoveWorker("a")
	if a.Blocks("a") != 0 || a.Blocks("b") != 5 || a.Len() != 5 {
		t.Fatalf("after removing a: a %d, b %d, len %d", a.Blocks("a"), a.Blocks("b"), a.Len())
	}
	a.Clear()
	a.Insert("c", c[:2])
	if a.Len() != 2 || a.Blocks("b") != 0 {
		t.Fatalf("after clear: len %d, b %d", a.Len(), a.Blocks("b"))
	}
}
