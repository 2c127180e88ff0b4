package router

import "math"

// KV sends each request to the worker where it would wait for the least
// prefill, counting every request already in flight there as LoadTokens
// tokens of prefill more (KVCost).
//
// The rule in full: cost(w) = W · (a quarter of the prefill queued on w +
// this prompt's tokens not cached on w) + LoadTokens · requests in flight
// on w, in tokens; the lowest cost wins. While another worker has room, a
// worker without a free batch slot for each of the request's sequences is
// a candidate only when the fleet is crowded (fewer than 4 free batch slots
// a worker in all) and it freed at least as many slots in the last
// FreedWindow as sequences would wait there (in flight + the request's
// sequences − batch capacity); otherwise it is skipped. A request
// cached nowhere beyond a prefix other conversations share (a first turn
// on a shared starter or system prompt: branches) does not go to a worker
// that would then hold more than SharedBound requests while another with
// room would not. Costs within half a block or 2% of each other are
// equal, and the tie goes to the worker with fewer requests in flight,
// then less queued prefill, then less context in flight, then fewer
// cached blocks, then the earlier worker in the list: never to chance, so
// a conversation does not alternate between equally good workers (Dynamo
// issue #3581). Nothing depends on the workload.
//
// Why this shape: a follow-up's cache saving is thousands of tokens (its
// whole conversation), while one request more or less in flight changes a
// worker's speed by a few percent. The old cost charged every in-flight
// request's whole prompt as load (160–250 blocks each), which outweighed
// the saving and scattered conversations as soon as users paused; one
// request is worth LoadTokens tokens, 32, chosen on kvlens's workload suite
// (docs/routing.md: from 32 to 128 the results move by a few percent).
// Queued prefill counts a quarter (QueuedShare): in full, a burst of first
// turns booked on a worker sent its conversations' follow-ups elsewhere.
// A full worker queues a request until a slot frees (seed 003, Dynamo
// issues #7836 and #737). With room to spare elsewhere a move keeps its
// room, so a full worker is skipped (at 8 workers near capacity, letting
// follow-ups queue there cut kv's SLO envelope from about 500
// conversations to 380-485). Once the fleet is crowded, a moved request
// soon waits on its new worker too and has paid a prefill for it, the
// GPU time a crowded fleet is short of; so a full worker that is freeing
// slots is costed as any other, and a follow-up waits there for a slot
// near its cache. Pricing each wait (256 to 4,096 tokens tried) only sent
// more follow-ups away from their cache (docs/routing.md). After a burst
// of new conversations no slot may free for as long as a request lasts
// (Dynamo issue #737), and a full worker then takes nothing while another
// has room. When every worker is full, the cost alone decides. A shared prefix
// is cheap to copy to one more worker, once, while a conversation's own
// history is paid again in full on every move; counted as any cached
// prefix, a starter held by few of 8 workers drew every new conversation
// on it to its holders, whose batches ran 28 requests (median) above the
// lightest's (docs/routing.md, "At 8 workers").
// Approximate selects the predicted index instead of KV events.
type KV struct {
	// Weight is W, the weight of prefill tokens (default 1).
	Weight float64
	// Approximate makes the router feed this policy from the predicted index
	// (the kv_approx policy), for workers that publish no KV events.
	Approximate bool

	// shared learns which prefixes conversations share; Pick runs under
	// the router's decision lock, one decision at a time.
	shared branches
}

// SharedBound is the most requests in flight a worker may hold before KV
// sends a request whose cache is only a shared prefix elsewhere: a
// quarter or 4 requests over the fleet's mean, whichever is more, counting
// the request. The 4 keep a fleet with few requests in flight (users
// reading their answers) from moving first turns off their cache for a
// difference of one or two; a quarter, tried with half, did best on the
// 8-worker grid, and the same for every workload.
func SharedBound(inFlight, workers int) int {
	mean := float64(inFlight+1) / float64(workers)
	return int(math.Ceil(max(1.25*mean, mean+4)))
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
	room, free, total, deepest := false, 0, 0, 0
	for i := range cands {
		room = room || fits(r, &cands[i])
		free += max(0, cands[i].Capacity-cands[i].InFlight)
		total += cands[i].InFlight
		deepest = max(deepest, cands[i].Overlap)
	}
	// With plenty of slots free across the fleet, a request moved off a
	// full worker finds room and keeps it; with fewer than 4 a worker,
	// its new worker fills soon too, and the move buys a prefill and then
	// a wait all the same.
	crowded := free < 4*len(cands)
	// Every request teaches branches; one cached nowhere beyond a shared
	// prefix is bounded while some worker with room is at or under
	// SharedBound.
	shared := p.shared.observe(r.Chain)
	bound, bounded := SharedBound(total, len(cands)), false
	if deepest <= shared {
		for i := range cands {
			bounded = bounded || (cands[i].InFlight+1 <= bound && fits(r, &cands[i]))
		}
	}
	best, bestCost := -1, 0.0
	for i := range cands {
		c := &cands[i]
		if bounded && c.InFlight+1 > bound {
			continue
		}
		// A full worker, while another has room, only if the fleet is
		// crowded and it frees a slot for each sequence that would wait.
		if wait := c.InFlight + sequences(r, c) - c.Capacity; room && wait > 0 && (!crowded || c.RecentlyFreed < wait) {
			continue
		}
		v := KVCost(r, c, p.Weight)
		switch {
		case best < 0:
			best, bestCost = i, v
		case nearTie(v, bestCost, r.BlockSize):
			if lighter(c, &cands[best]) {
				best, bestCost = i, min(v, bestCost)
			}
		case v < bestCost:
			best, bestCost = i, v
		}
	}
	return best
}

// fits reports whether c has a free batch slot for each of r's sequences:
// a request for n choices needs n (sequences). The bound and the
// full-worker rule ask the same question, so that a worker the bound keeps
// is never one the full-worker rule skips while the bound skips the rest.
func fits(r *Request, c *Candidate) bool { return c.InFlight+sequences(r, c) <= c.Capacity }

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
