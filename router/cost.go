package router

// This file holds every routing cost kvlens computes. Both costs are in
// blocks of work; lower is better.

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

// KVCost is kvlens's cost for sending r to c:
//
//	cost = W · (queued_prefill_tokens + max(0, ISL − overlap·B)) / B + context_tokens / B
//
// The prefill term is Dynamo's: work that must finish before this request's
// first token. The decode term differs on purpose: it counts every in-flight
// request's whole prompt, shared prefix included, because each sequence
// reads its entire context at every decode step even when the blocks are
// shared in memory. Dynamo counts a shared prefix once, which is why one
// long system prompt drew every request to one worker (Dynamo issue #737).
func KVCost(r *Request, c *Candidate, weight float64) float64 {
	b := float64(max(1, r.BlockSize))
	prefill := float64(c.PrefillTokens + uncachedTokens(r, c))
	return weight*prefill/b + float64(c.ContextTokens)/b
}

// nearTie reports whether two costs are too close to tell apart: within half
// a block, or within 2% of the smaller.
func nearTie(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= max(0.5, 0.02*min(a, b))
}
