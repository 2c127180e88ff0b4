package router

import "math/rand/v2"

// Random sends each request to a healthy worker chosen uniformly at random.
type Random struct {
	rng *rand.Rand
}

var _ Policy = (*Random)(nil)

// Name implements Policy.
func (*Random) Name() string { return "random" }

// Pick implements Policy.
func (p *Random) Pick(_ *Request, cands []Candidate) int {
	if p.rng == nil {
		return rand.IntN(len(cands))
	}
	return p.rng.IntN(len(cands))
}
