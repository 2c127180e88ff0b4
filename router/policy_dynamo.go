package router

import (
	"math"
	"math/rand/v2"
)

// Dynamo sends each request to the worker with the lowest DynamoCost, ties
// broken by the smallest index tree among workers that overlap the prompt
// (a worker with no overlap counts 0) then at random, or samples by cost
// when Temperature > 0, as NVIDIA Dynamo 0.9's KV router does.
//
// Source: ai-dynamo/dynamo v0.9, lib/llm/src/kv_router/scheduler.rs
// (select_worker, the logit and its tie-break) and
// shared/reference/dynamo-router.md. Defaults: overlap_score_weight 1,
// router_temperature 0. Dynamo 0.9 with default flags never sheds in KV mode
// (no busy monitor without a threshold), so kvlens's --admission shed is not
// part of this policy.
type Dynamo struct {
	// Weight is W in DynamoCost (Dynamo's overlap_score_weight, default 1).
	Weight float64
	// Temperature is Dynamo's router_temperature (default 0).
	Temperature float64

	rng *rand.Rand
}

var _ Policy = (*Dynamo)(nil)

// Name implements Policy.
func (*Dynamo) Name() string { return "dynamo" }

// Pick implements Policy.
func (p *Dynamo) Pick(r *Request, cands []Candidate) int {
	if p.rng == nil {
		p.rng = newRand(0)
	}
	var buf [64]float64
	costs := buf[:0]
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range cands {
		v := DynamoCost(r, &cands[i], p.Weight)
		costs = append(costs, v)
		lo, hi = min(lo, v), max(hi, v)
	}
	if p.Temperature > 0 {
		return sampleSoftmax(costs, lo, hi, p.Temperature, p.rng)
	}
	// Argmin; among equal costs the smallest tree, where only a worker that
	// overlaps the prompt has one, then uniformly at random.
	var tieBuf [64]int
	ties := tieBuf[:0]
	smallest := math.MaxInt
	for i, v := range costs {
		if v != lo {
			continue
		}
		n := 0
		if cands[i].Overlap > 0 {
			n = cands[i].IndexBlocks
		}
		switch {
		case n < smallest:
			smallest, ties = n, append(ties[:0], i)
		case n == smallest:
			ties = append(ties, i)
		}
	}
	return ties[p.rng.IntN(len(ties))]
}

// sampleSoftmax draws i with p ∝ exp(−((v_i − lo)/(hi − lo))/t), uniformly
// when every v is equal.
func sampleSoftmax(costs []float64, lo, hi, t float64, rng *rand.Rand) int {
	if hi == lo {
		return rng.IntN(len(costs))
	}
	var wbuf [64]float64
	w := wbuf[:0]
	sum := 0.0
	for _, v := range costs {
		x := math.Exp(-((v - lo) / (hi - lo)) / t)
		w = append(w, x)
		sum += x
	}
	u := rng.Float64() * sum
	for i, x := range w {
		if u -= x; u < 0 {
			return i
		}
	}
	return len(w) - 1
}
