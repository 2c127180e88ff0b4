package router

import "sync/atomic"

// RoundRobin sends each request to the next healthy worker in turn.
type RoundRobin struct {
	// last is the Position of the worker picked last, plus one.
	last atomic.Int64
}

var _ Policy = (*RoundRobin)(nil)

// Name implements Policy.
func (*RoundRobin) Name() string { return "round_robin" }

// Pick implements Policy. Unhealthy workers never reach it as candidates, so
// the turn passes over them to the next healthy worker in the fleet's order.
func (p *RoundRobin) Pick(_ *Request, cands []Candidate) int {
	after := p.last.Load() - 1
	pick := 0
	for i, c := range cands {
		if int64(c.Position) > after {
			pick = i
			break
		}
	}
	p.last.Store(int64(cands[pick].Position) + 1)
	return pick
}
