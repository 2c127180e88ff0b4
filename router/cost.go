package router

// This file holds every routing cost kvlens computes; lower is better.
// Dynamo's is in blocks of work, kvlens's in tokens.

// uncachedTokens is the part of the request's prompt c would have to prefill:
// ISL − overlap·B, never negative.
func uncachedTokens(r *Request, c *Candidate) int {
	return max(0, r.Tokens-c.Overlap*r.BlockSize)
}

// DynamoCost is Dynamo's logit for sending r to c, reproduced as
// shared/reference/dynamo-router.md states it:
//
//	prefill_tokens = active_prefill_tokens + max(0, ISL − overlap·B)
//	decode_blocks  = active_blocks + (full_blocks(request) − active_depth)
//	logit          = W · prefill_tokens / B + decode_blocks
//
// Fractional prefill blocks are kept. active_blocks counts a prefix shared
// by several active requests once.
func DynamoCost(r *Request, c *Candidate, weight float64) float64 {
	b := float64(max(1, r.BlockSize))
	prefill := float64(c.PrefillTokens + uncachedTokens(r, c))
	decode := float64(c.ActiveBlocks + len(r.Chain) - c.ActiveDepth)
	return weight*prefill/b + decode
}

// LoadTokens is what one request in flight on a worker weighs in KVCost, in
// prompt tokens of prefill: chosen on kvlens's workload suite
// (docs/routing.md), and the same for every workload.
const LoadTokens = 32

// QueuedShare is the share of a worker's queued prefill that KVCost counts
// as this request's wait. The router counts a prefill as queued from its
// booking until its first token comes back, so the figure spikes whenever
// first turns have just been booked on a worker, and counted in full it
// sent follow-ups away from their cache at every such spike: on the trace
// at 160 `kv` held 77% of prompt tokens in cache against the oracle's 82%.
// Of 0, 1/8, 1/4, 3/8, 1/2 and 1 on kvlens's workload suite, 1/8 to 3/8
// did best, within the seeds' noise of each other (docs/routing.md); a
// quarter is the round value among them, the same for every workload.
const QueuedShare = 0.25

// KVCost is kvlens's cost for sending r to c, in tokens:
//
//	cost = W · (QueuedShare · queued_prefill_tokens + max(0, ISL − overlap·B)) + LoadTokens · in_flight
//
// The prefill term is the work that must finish on c before this request's
// first token: a share of the prefill queued there, and this prompt's
// uncached part. The load term stands for everything else a busier worker
// costs (slower steps, a longer queue for a batch slot), at LoadTokens
// tokens a request.
func KVCost(r *Request, c *Candidate, weight float64) float64 {
	prefill := QueuedShare*float64(c.PrefillTokens) + float64(uncachedTokens(r, c))
	return weight*prefill + LoadTokens*float64(c.InFlight)
}

// nearTie reports whether two costs in tokens are too close to tell apart:
// within half a block of b tokens, or within 2% of the smaller.
func nearTie(a, b float64, blockSize int) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= max(float64(blockSize)/2, 0.02*min(a, b))
}
