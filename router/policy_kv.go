package router

// KV sends each request to the worker with the lowest KVCost among those
// below their batch capacity, breaking near-ties by load.
//
// The rule in full: a worker at or above its batch capacity (max_batch_size)
// is never chosen while any other healthy worker has room, because past that
// point the engine queues the request and every cached block saved is paid
// back in waiting (seed 003, Dynamo issues #7836 and #737). Among workers
// with room the cost is KVCost: queued plus own uncached prefill tokens,
// weighted by W, plus the full context of every in-flight request, so a
// shared system prompt no longer makes a loaded worker look cheap. Costs
// within half a block or 2% of each other are treated as equal and the tie
// goes to the worker with fewer in-flight requests, then less queued prefill,
// then less context in flight, then fewer cached blocks, then the earlier
// worker in the list — never to chance, so a conversation does not
// alternate between equally good workers (Dynamo issue #3581).
// When every worker is full, the request goes to the one least full for its
// capacity. Approximate selects the predicted index instead of KV events.
type KV struct {
	// Weight is W in KVCost (default 1).
	Weight float64
	// Approximate makes the router feed this policy from the predicted index
	// (the kv_approx policy), for workers that publish no KV events.
	Approximate bool
}

var _ Policy = (*KV)(nil)

// Name implements Policy.
func (p *KV) Name() string {
	if p.Approximate {
		return "kv_approx"
	}
	return "kv"
}

func (p *KV) predicted() bool { return p.Approximate }

// Pick implements Policy.
func (p *KV) Pick(r *Request, cands []Candidate) int {
	room := false
	for i := range cands {
		if cands[i].InFlight < cands[i].Capacity {
			room = true
			break
		}
	}
	if !room {
		return leastFull(cands)
	}
	best, bestCost := -1, 0.0
	for i := range cands {
		c := &cands[i]
		if c.InFlight >= c.Capacity {
			continue
		}
		v := KVCost(r, c, p.Weight)
		switch {
		case best < 0:
			best, bestCost = i, v
		case nearTie(v, bestCost):
			if lighter(c, &cands[best]) {
				best, bestCost = i, min(v, bestCost)
			}
		case v < bestCost:
			best, bestCost = i, v
		}
	}
	return best
}

// lighter reports whether a carries less load than b: fewer in-flight
// requests, then less queued prefill, then less context in flight, then
// fewer cached blocks (a fuller cache evicts sooner).
func lighter(a, b *Candidate) bool {
	switch {
	case a.InFlight != b.InFlight:
		return a.InFlight < b.InFlight
	case a.PrefillTokens != b.PrefillTokens:
		return a.PrefillTokens < b.PrefillTokens
	case a.ContextTokens != b.ContextTokens:
		return a.ContextTokens < b.ContextTokens
	}
	return a.IndexBlocks < b.IndexBlocks
}

// leastFull returns the candidate with the lowest in-flight to capacity
// ratio, the first on equality.
func leastFull(cands []Candidate) int {
	best := 0
	for i := range cands[1:] {
		c, b := &cands[i+1], &cands[best]
		if c.InFlight*max(1, b.Capacity) < b.InFlight*max(1, c.Capacity) {
			best = i + 1
		}
	}
	return best
}
