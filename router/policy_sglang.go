package router

// SGLang sends each request, while the fleet's in-flight requests are
// balanced, to the worker its approximate prefix tree says matches more
// than CacheThreshold of the prompt, else to the worker with the smallest
// tree; when the fleet is imbalanced it sends the request to the worker with
// the fewest in-flight requests.
//
// This is the cache_aware policy of SGLang's router (sgl-project/sglang,
// sgl-router/src/policies/cache_aware.rs, and its Python predecessor
// sglang/srt/router) and of the vLLM router that forked it, re-expressed
// here. Defaults are theirs: cache_threshold 0.3, balance_abs_threshold 64,
// balance_rel_threshold 1.5, max_tree_size 2^26 characters per worker.
//
//   - Imbalanced means max−min in-flight > BalanceAbs and max > BalanceRel·min.
//   - The tree holds what the router sent where, never what workers stored:
//     this policy reads neither the KV-event index nor the predicted one.
//     Every decision, balanced or not, inserts the prompt under the chosen
//     worker.
//   - SGLang's tree is a character radix tree; kvlens keys it by block hash,
//     so a match is counted in whole blocks (match rate = matched blocks·B /
//     prompt tokens). Its size cap of 2^26 characters is taken as 2^26/4
//     tokens (about 4 characters a token) and applied per worker as an LRU,
//     where SGLang evicts least-recently-used leaves every 120 s.
//   - Ties: among equal matches, equal tree sizes or equal loads, the earlier
//     worker in the list (SGLang takes whichever its map yields first).
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
	lo, hi := 0, 0
	for i := range cands {
		if cands[i].InFlight < cands[lo].InFlight {
			lo = i
		}
		if cands[i].InFlight > cands[hi].InFlight {
			hi = i
		}
	}
	minLoad, maxLoad := cands[lo].InFlight, cands[hi].InFlight
	if maxLoad-minLoad > p.BalanceAbs && float64(maxLoad) > p.BalanceRel*float64(minLoad) {
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
	smallest := 0
	for i := range cands {
		if p.tree.size(cands[i].Worker.Name) < p.tree.size(cands[smallest].Worker.Name) {
			smallest = i
		}
	}
	return smallest
}
