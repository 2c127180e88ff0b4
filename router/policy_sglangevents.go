package router

// SGLangEvents sends each request, while the fleet's in-flight requests
// are balanced, to the worker whose cache holds the most leading blocks of
// the prompt by the KV-event index, ties to the worker with fewer requests
// in flight, then to the one whose index holds fewer blocks; when no
// worker holds any block of the prompt, or the prompt is shorter than a
// block, or the fleet is imbalanced, to the worker with the fewest
// requests in flight.
//
// This is the event-driven mode of the cache_aware policy of SGLang's
// model gateway, which it takes when it tokenizes (its gRPC mode) and the
// workers publish KV events, re-expressed here from its code as of autumn
// 2026 (lightseekorg/smg model_gateway/src/policies/cache_aware.rs,
// select_worker_event_driven and score_overlap). Its imbalance test and
// defaults are SGLang's (see SGLang): balance_abs_threshold 64 and
// balance_rel_threshold 1.5. Unlike SGLang's other modes it has no match
// threshold: any cached block wins over load.
//
// It reads kvlens's KV-event index, so on workers that publish no events
// every overlap is 0 and it sends every request to the least loaded; the
// gateway would fall back there to its approximate tree, which is SGLang.
//
//   - Ties in every figure go to the later worker in the list, as Rust's
//     max_by returns the last of equal maxima; the least loaded is the
//     earlier of equals, as min_by_key returns the first.
type SGLangEvents struct {
	// BalanceAbs is balance_abs_threshold, in requests (default 64).
	BalanceAbs int
	// BalanceRel is balance_rel_threshold (default 1.5).
	BalanceRel float64
}

var _ Policy = SGLangEvents{}

// Name implements Policy.
func (SGLangEvents) Name() string { return "sglang_events" }

// Pick implements Policy.
func (p SGLangEvents) Pick(r *Request, cands []Candidate) int {
	lo, imbalanced := sglangLoad(cands, p.BalanceAbs, p.BalanceRel)
	if imbalanced {
		return lo
	}
	best := -1
	for i := range cands {
		c := &cands[i]
		if c.Overlap == 0 {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &cands[best]
		if c.Overlap > b.Overlap ||
			c.Overlap == b.Overlap && (c.InFlight < b.InFlight ||
				c.InFlight == b.InFlight && c.IndexBlocks <= b.IndexBlocks) {
			best = i
		}
	}
	if best < 0 {
		return lo
	}
	return best
}
