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
	// Among equal costs the smallest tree wins, where only a worker that
	// overlaps the prompt has one.
	tree := func(c *Candidate) int {
		if c.Overlap > 0 {
			return c.IndexBlocks
		}
		return 0
	}
	return pickByCost(cands, func(c *Candidate) float64 { return DynamoCost(r, c, p.Weight) }, tree, p.Temperature, p.rng)
}

// pickByCost is Dynamo's selection: with temperature t > 0 a softmax draw
// over the costs, else the lowest cost, among equal costs the smallest
// tree, then uniformly at random.
func pickByCost(cands []Candidate, cost func(*Candidate) float64, tree func(*Candidate) int, t float64, rng *rand.Rand) int {
	var buf [64]float64
	costs := buf[:0]
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range cands {
		v := cost(&cands[i])
		costs = append(costs, v)
		lo, hi = min(lo, v), max(hi, v)
	}
	if t > 0 {
		return sampleSoftmax(costs, lo, hi, t, rng)
	}
	var tieBuf [64]int
	ties := tieBuf[:0]
	smallest := math.MaxInt
	for i, v := range costs {
		if v != lo {
			continue
		}
		switch n := tree(&cands[i]); {
		case n < smallest:
			smallest, ties = n, append(ties[:0], i)
		case n == smallest:
			ties = append(ties, i)
		}
	}
	return ties[rng.IntN(len(ties))]
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
