package router

import "sync/atomic"

// RoundRobin sends each request to the next healthy worker in turn.
type RoundRobin struct {
	next atomic.Uint64
}

var _ Policy = (*RoundRobin)(nil)

// Name implements Policy.
func (*RoundRobin) Name() string { return "round_robin" }

// Pick implements Policy. Unhealthy workers never reach it as candidates, so
// the turn passes over them.
func (p *RoundRobin) Pick(_ *Request, cands []Candidate) int {
	return int((p.next.Add(1) - 1) % uint64(len(cands)))
}
