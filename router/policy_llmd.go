package router

import "github.com/zeebo/xxh3"

// LLMD sends each request to the worker with the highest weighted sum of
// llm-d's three default scorers: prefix cache (weight 3), queue depth
// (weight 2) and KV-cache utilisation (weight 2), ties at random.
//
// This is the default scheduling profile of llm-d's inference scheduler
// (llm-d/llm-d-inference-scheduler, its deploy/config and guides'
// EndpointPickerConfig: prefix-cache-scorer 3, queue-scorer 2,
// kv-cache-utilization-scorer 2, max-score-picker), whose scorers come from
// the Gateway API Inference Extension
// (kubernetes-sigs/gateway-api-inference-extension v1.5, pkg/epp/framework/
// plugins: requestcontrol/dataproducer/approximateprefix, scheduling/
// scorer/{prefix,queue,kvcache_utilization}), re-expressed here. Each
// scorer gives every endpoint a score in [0, 1]:
//
//   - prefix cache: matched blocks / the prompt's blocks, where a match is
//     what the scorer's own LRU remembers having sent to the endpoint; it
//     reads no KV events and no tokens. It hashes the prompt's text (a
//     chat's messages as JSON, PromptText) in blocks of B·4 bytes, B the
//     engine's block size in tokens at 4 characters a token (autoTune,
//     the default, reads B from the endpoint), each block's hash chained
//     on the one before, and only the first 256 blocks
//     (maxPrefixBlocksToMatch): two prompts that share their first 256
//     blocks look the same to it, whatever follows. With autoTune the LRU
//     holds as many blocks per endpoint as its KV cache (KVBlocks).
//     (llm-d's precise-prefix-cache-scorer, which reads KV events, is not
//     this default.)
//   - queue depth: (max − q)/(max − min) over the endpoints' waiting
//     requests q, 1 for all when they are equal. kvlens takes q as the
//     requests booked beyond the batch capacity, max(0, in-flight −
//     max_batch_size), where llm-d reads vllm:num_requests_waiting.
//   - KV-cache utilisation: 1 − used/total KV blocks. kvlens takes used as
//     the distinct prompt blocks of booked requests, where llm-d reads
//     vllm:kv_cache_usage_perc; total is KVBlocks.
type LLMD struct {
	// PrefixWeight, QueueWeight and KVWeight weight the scorers (3, 2, 2).
	PrefixWeight, QueueWeight, KVWeight float64
	// KVBlocks is every worker's KV-cache capacity, in blocks, for the
	// utilisation scorer and the size of the prefix scorer's LRU (default
	// DefaultKVBlocks, the H200 profile's).
	KVBlocks int

	sent *sentIndex
	rng  interface{ IntN(int) int }
}

// llm-d's defaults.
const (
	llmdPrefixWeight = 3
	llmdQueueWeight  = 2
	llmdKVWeight     = 2
	// llmdMaxBlocks is the prefix scorer's maxPrefixBlocksToMatch.
	llmdMaxBlocks = 256
	// llmdCharsPerToken is its averageCharactersPerToken: a block of B
	// tokens is hashed as B·4 bytes of text.
	llmdCharsPerToken = 4
	// llmdMinBlockTokens is the floor the scorer's documentation gives
	// autoTune's block size (v1.5's code has none); kvlens's engines'
	// 32-token blocks are above it either way.
	llmdMinBlockTokens = 16
	// DefaultKVBlocks is the KV-cache capacity the llmd policy assumes when
	// it is told none: the simulated H200 profile's, in blocks.
	DefaultKVBlocks = 12300
)

var _ Policy = (*LLMD)(nil)

// Name implements Policy.
func (*LLMD) Name() string { return "llmd" }

// Pick implements Policy.
func (p *LLMD) Pick(r *Request, cands []Candidate) int {
	kvBlocks := p.KVBlocks
	if kvBlocks <= 0 {
		kvBlocks = DefaultKVBlocks
	}
	if p.sent == nil {
		p.sent = newSentIndex(kvBlocks)
	}
	if p.rng == nil {
		p.rng = newRand(0)
	}
	chain := textChain(PromptText(r), llmdCharsPerToken*max(llmdMinBlockTokens, r.BlockSize), llmdMaxBlocks)
	qmin, qmax := waiting(&cands[0]), waiting(&cands[0])
	for i := range cands {
		qmin, qmax = min(qmin, waiting(&cands[i])), max(qmax, waiting(&cands[i]))
	}
	var tieBuf [64]int
	ties := tieBuf[:0]
	best := 0.0
	for i := range cands {
		c := &cands[i]
		v := p.PrefixWeight*prefixScore(p.sent.match(c.Worker.Name, chain), len(chain)) +
			p.QueueWeight*queueScore(waiting(c), qmin, qmax) +
			p.KVWeight*(1-min(1, float64(c.ActiveBlocks)/float64(kvBlocks)))
		switch {
		case len(ties) == 0 || v > best:
			best, ties = v, append(ties[:0], i)
		case v == best:
			ties = append(ties, i)
		}
	}
	i := ties[p.rng.IntN(len(ties))]
	p.sent.insert(cands[i].Worker.Name, chain)
	return i
}

// textChain hashes text as llm-d's prefix scorer does: its first maxBlocks
// whole blocks of blockBytes bytes, each hash chained on the one before;
// a shorter tail is left out.
func textChain(text []byte, blockBytes, maxBlocks int) []uint64 {
	n := min(len(text)/blockBytes, maxBlocks)
	chain := make([]uint64, n)
	var prev uint64
	for i := range n {
		prev = xxh3.HashSeed(text[i*blockBytes:(i+1)*blockBytes], prev)
		chain[i] = prev
	}
	return chain
}

// waiting is the requests booked on c beyond its batch capacity.
func waiting(c *Candidate) int { return max(0, c.InFlight-c.Capacity) }

// prefixScore is the prefix-cache scorer: matched / total blocks, 0 for a
// prompt shorter than a block.
func prefixScore(matched, total int) float64 {
	if total == 0 {
		return 0
	}
	return float64(matched) / float64(total)
}

// queueScore is the queue scorer's min-max normalisation: 1 for the
// shortest queue, 0 for the longest, 1 for all when they are equal.
func queueScore(q, qmin, qmax int) float64 {
	if qmax == qmin {
		return 1
	}
	return float64(qmax-q) / float64(qmax-qmin)
}
