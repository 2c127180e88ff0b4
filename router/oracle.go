package router

import "sync"

// DefaultOracleBlocks bounds the oracle's set, in blocks: 2^21 blocks is
// 64 Mi tokens at 32 tokens a block, and the set then takes at most 64 MiB
// (16 bytes a slot, load factor between 3/8 and 3/4).
const DefaultOracleBlocks = 1 << 21

// Oracle is the best achievable hit rate of a run: it remembers every block
// any worker ever stored, never evicting one, and scores each routed
// request by the longest prefix of its block chain in that union, capped as
// the engine caps a prompt (at least one token is always computed, so at
// most (ISL−1)/B blocks hit). No router can do better than a worker holding
// everything any worker ever held.
//
// Memory is bounded: the union is a hash set of chain hashes (one 16-byte
// slot each, at most 2·MaxBlocks slots). Past MaxBlocks distinct blocks it
// stops learning and counts what it missed in Saturated, and its figure
// then understates the best achievable. It is safe for concurrent use.
type Oracle struct {
	mu        sync.Mutex
	max       int
	set       blockMap
	saturated uint64
	requests  int64
	prompt    int64
	hit       int64
}

// NewOracle returns an empty oracle holding at most maxBlocks blocks; 0
// means DefaultOracleBlocks.
func NewOracle(maxBlocks int) *Oracle {
	if maxBlocks <= 0 {
		maxBlocks = DefaultOracleBlocks
	}
	return &Oracle{max: maxBlocks}
}

// Store records that some worker stored the blocks of chain.
func (o *Oracle) Store(chain []uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, h := range chain {
		if o.set.get(h) != 0 {
			continue
		}
		if o.set.len() >= o.max {
			o.saturated++
			continue
		}
		o.set.set(h, 1)
	}
}

// Match is the best achievable cached prefix of a prompt of tokens tokens
// whose chain is chain, at blockSize tokens a block, in tokens.
func (o *Oracle) Match(chain []uint64, tokens, blockSize int) int {
	if blockSize <= 0 || tokens <= 0 {
		return 0
	}
	limit := min(len(chain), (tokens-1)/blockSize)
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for n < limit && o.set.get(chain[n]) != 0 {
		n++
	}
	return n * blockSize
}

// Record counts one served request: its prompt and its best achievable hit,
// in tokens.
func (o *Oracle) Record(prompt, hit int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests++
	o.prompt += int64(prompt)
	o.hit += int64(hit)
}

// OracleStats are an oracle's totals since the router started.
type OracleStats struct {
	// Requests counts served requests scored.
	Requests int64 `json:"requests"`
	// PromptTokens sums their prompts, in tokens.
	PromptTokens int64 `json:"prompt_tokens"`
	// HitTokens sums their best achievable cached prefixes, in tokens.
	HitTokens int64 `json:"hit_tokens"`
	// HitRate is HitTokens / PromptTokens, from 0 to 1.
	HitRate float64 `json:"hit_rate"`
	// Blocks counts the distinct blocks any worker ever stored.
	Blocks int `json:"blocks"`
	// Saturated counts blocks not learnt because the set was full; when it
	// is not 0, HitRate understates the best achievable.
	Saturated uint64 `json:"saturated,omitempty"`
}

// Stats returns the oracle's totals.
func (o *Oracle) Stats() OracleStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := OracleStats{Requests: o.requests, PromptTokens: o.prompt, HitTokens: o.hit, Blocks: o.set.len(), Saturated: o.saturated}
	if o.prompt > 0 {
		s.HitRate = float64(o.hit) / float64(o.prompt)
	}
	return s
}
