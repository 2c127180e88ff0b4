package router

// SGLang sends each request, while the fleet's in-flight requests are
// balanced, to the worker its approximate prefix tree says matches more
// than CacheThreshold of the prompt, else to the worker with the fewest
// in-flight requests; when the fleet is imbalanced it sends the request to
// the worker with the fewest in-flight requests, match or not.
//
// This is the cache_aware policy of SGLang's model gateway and of the vLLM
// router that forked it, re-expressed here from their code as of autumn
// 2026 (lightseekorg/smg model_gateway/src/policies/cache_aware.rs,
// sgl-project/sglang sgl-model-gateway/src/policies/cache_aware.rs,
// vllm-project/router src/policies/cache_aware.rs). Defaults are theirs:
// cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5,
// max_tree_size 2^26 per worker.
//
//   - Imbalanced means max−min in-flight > BalanceAbs and max > BalanceRel·min.
//   - A match of CacheThreshold or less goes to the least loaded worker.
//     The 2025 sgl-router sent it to the worker with the smallest tree, and
//     the gateway's header comment still says so; its code, and the vLLM
//     router's, take the least loaded.
//   - The tree holds what the router sent where, never what workers stored:
//     this policy reads neither the KV-event index nor the predicted one.
//     Every decision, balanced or not, inserts the prompt under the chosen
//     worker. The gateway keeps two trees: token ids for its gRPC mode
//     (which tokenizes), characters of the messages' text for HTTP. kvlens
//     keys it by the router's block hashes, as the token tree does, so a
//     match is counted in whole blocks (match rate = matched blocks·B /
//     prompt tokens). Its size cap, 2^26, is taken as 2^26/4 tokens (the
//     character tree's, at about 4 characters a token) and applied per
//     worker as an LRU, where the gateway evicts least-recently-used leaves
//     every 120 s. With KV events and gRPC the gateway has a third mode,
//     the most cached blocks by its event index: SGLangEvents
//     (sglang_events).
//   - Ties: among equal matches or equal loads, the earlier worker in the
//     list (the gateway takes whichever its map yields first).
type SGLang struct {
	// CacheThreshold is the match rate above which the matching worker is
	// chosen (cache_threshold, default 0.3).
	CacheThreshold float64
	// BalanceAbs is balance_abs_threshold, in requests (default 64).
	BalanceAbs int
	// BalanceRel is balance_rel_threshold (default 1.5).
	BalanceRel float64

	tree *sentIndex
}

// SGLang's defaults.
const (
	sglangCacheThreshold = 0.3
	sglangBalanceAbs     = 64
	sglangBalanceRel     = 1.5
	// sglangTreeTokens is max_tree_size (2^26 characters) at about 4
	// characters a token.
	sglangTreeTokens = 1 << 24
)

// NewSGLang returns the cache_aware policy with its defaults, for blocks of
// blockSize tokens.
func NewSGLang(blockSize int) *SGLang {
	return &SGLang{
		CacheThreshold: sglangCacheThreshold, BalanceAbs: sglangBalanceAbs, BalanceRel: sglangBalanceRel,
		tree: newSentIndex(sglangTreeTokens / max(1, blockSize)),
	}
}

var _ Policy = (*SGLang)(nil)

// Name implements Policy.
func (*SGLang) Name() string { return "sglang" }

// Pick implements Policy.
func (p *SGLang) Pick(r *Request, cands []Candidate) int {
	if p.tree == nil {
		p.tree = newSentIndex(sglangTreeTokens / max(1, r.BlockSize))
	}
	i := p.choose(r, cands)
	p.tree.insert(cands[i].Worker.Name, r.Chain)
	return i
}

func (p *SGLang) choose(r *Request, cands []Candidate) int {
	lo, imbalanced := sglangLoad(cands, p.BalanceAbs, p.BalanceRel)
	if imbalanced {
		return lo
	}
	best, matched := 0, -1
	for i := range cands {
		if m := p.tree.match(cands[i].Worker.Name, r.Chain); m > matched {
			best, matched = i, m
		}
	}
	if r.Tokens > 0 && float64(matched*r.BlockSize)/float64(r.Tokens) > p.CacheThreshold {
		return best
	}
	return lo
}

// sglangLoad is SGLang's load test, shared by its modes: the least loaded
// candidate (the first of equals) and whether the fleet is imbalanced, its
// in-flight spread over abs requests and its maximum over rel times its
// minimum.
func sglangLoad(cands []Candidate, abs int, rel float64) (lo int, imbalanced bool) {
	hi := 0
	for i := range cands {
		if cands[i].InFlight < cands[lo].InFlight {
			lo = i
		}
		if cands[i].InFlight > cands[hi].InFlight {
			hi = i
		}
	}
	minLoad, maxLoad := cands[lo].InFlight, cands[hi].InFlight
	return lo, maxLoad-minLoad > abs && float64(maxLoad) > rel*float64(minLoad)
}
