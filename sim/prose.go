package sim

import (
	"strings"
	"sync"

	"github.com/kvlens/kvlens/tokenizer"
)

// prose is what simulated workers "generate". Visitors read answers in the
// conversation viewer, so it is real English about the subject of the demo,
// not random bytes. A request reads it as a ring, from an offset derived from
// its prompt.
const prose = `A language model answers one token at a time, and every new token has to attend to all the tokens that came before it. ` +
	`To avoid recomputing the same attention keys and values at every step, the engine keeps them in GPU memory in what is called the KV cache. ` +
	`The cache is split into fixed-size blocks, so memory can be handed out and reclaimed the way an operating system pages memory. ` +
	`When two requests begin with the same tokens, for example the same system prompt or the earlier turns of one conversation, the blocks for that shared prefix can be reused instead of recomputed. ` +
	`Reusing a prefix skips most of the prefill work, and prefill is what decides how long a user waits for the first token. ` +
	`In a fleet of several workers, each worker has its own cache, and a prefix that is cached on one worker does nothing for a request that lands on another. ` +
	`A round-robin balancer spreads requests evenly but ignores where the cache is, so a follow-up turn often lands on a worker that must rebuild the whole conversation from scratch. ` +
	`A cache-aware router keeps an index of which worker holds which blocks, and sends each request where the longest matching prefix already lives. ` +
	`Affinity alone is not enough, though: if every conversation sticks to the worker that saw it first, bursts can pile onto one worker while the others sit idle. ` +
	`A good router therefore weighs the prefill it would save against the load it would add, and it never pushes a worker past its batch capacity while another has room. ` +
	`The figures to watch are time to first token, which prefix reuse improves, and time per output token, which grows with the number of sequences decoding together. ` +
	`Goodput counts only the requests that met every service level objective, so a fast median cannot hide a slow tail or a rejected request. `

var (
	proseOnce sync.Once
	proseIDs  []uint32
	// wordStarts are the ring's positions whose token begins a word (its
	// text starts with a space). Answers start only there, and the ring
	// wraps from a sentence's end to a word, so an answer's text encodes
	// back to the very tokens the engine generated: a follow-up turn that
	// resends it matches the answer's cached blocks.
	wordStarts []int
	// pieces maps each token id of the ring to its text, decoded once so
	// that streaming does no tokenizer work.
	pieces map[uint32]string
)

// proseTokens returns the ring's token ids and their texts.
func proseTokens() ([]uint32, map[uint32]string) {
	proseOnce.Do(func() {
		proseIDs = tokenizer.Encode(" " + strings.TrimSpace(prose))
		pieces = make(map[uint32]string, len(proseIDs))
		for i, id := range proseIDs {
			pieces[id] = tokenizer.Decode([]uint32{id})
			if strings.HasPrefix(pieces[id], " ") {
				wordStarts = append(wordStarts, i)
			}
		}
	})
	return proseIDs, pieces
}

// answerStart returns the ring position of word start n (modulo their number).
func answerStart(n uint64) int {
	proseTokens()
	return wordStarts[n%uint64(len(wordStarts))]
}

// pieceText returns the text of a token the engine generated.
func pieceText(id uint32) string {
	_, p := proseTokens()
	if s, ok := p[id]; ok {
		return s
	}
	return tokenizer.Decode([]uint32{id})
}

// PieceText returns the text of a token an engine generated, as a worker
// streams it.
func PieceText(id uint32) string { return pieceText(id) }
