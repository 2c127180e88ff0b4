package router

import (
	"slices"
	"strings"
	"sync"

	"github.com/kvlens/kvlens/tokenizer"
)

// maxTokenCacheBytes bounds the proxy's chat token cache, in bytes of heap
// as entryCost counts them (64 MiB). It holds a few hundred live
// conversations' transcripts: the demo's two lanes of up to 180
// conversations each, with answers of up to max_tokens (about 4 KB) per turn.
const maxTokenCacheBytes = 64 << 20

// entryOverhead is what one cache entry costs besides its text and token
// ids, in bytes: its map slot (a string and a slice header, 40 bytes, at a
// load factor that falls to 7/16 after a map grows), its place in order
// (16 bytes, with append's slack) and the two allocations' rounding up to a
// size class. Measured at 98 to 134 bytes per entry by
// TestTokenCacheHeapWithinCap's sizes; without it, a cache of short
// chats held 2.8 times its cap.
const entryOverhead = 128

// entryCost is the heap one entry holds, in bytes.
func entryCost(seg string, ids []uint32) int { return len(seg) + 4*cap(ids) + entryOverhead }

// tokenCache tokenizes chat prompts one message at a time and remembers each
// message's tokens, so a conversation's next turn only tokenizes what is new.
// The result equals tokenizer.Encode(tokenizer.RenderChat(msgs)) exactly:
// the template opens every message with "<|" right after a newline, and
// cl100k's pre-tokenizer never lets a piece span a newline followed by "<",
// so each message tokenizes on its own (TestChatTokensMatchEncode checks it).
// When its entries cost more than max bytes (entryCost), the oldest go.
type tokenCache struct {
	max   int
	mu    sync.Mutex
	m     map[string][]uint32
	order []string // insertion order, for eviction
	head  int
	bytes int
}

func newTokenCache() *tokenCache { return newTokenCacheOf(maxTokenCacheBytes) }

func newTokenCacheOf(maxBytes int) *tokenCache {
	return &tokenCache{max: maxBytes, m: map[string][]uint32{}}
}

// segment renders one message as RenderChat does.
func segment(m tokenizer.Message) string {
	var b strings.Builder
	b.Grow(len(m.Role) + len(m.Content) + 6)
	b.WriteString("<|")
	b.WriteString(m.Role)
	b.WriteString("|>\n")
	b.WriteString(m.Content)
	b.WriteString("\n")
	return b.String()
}

const assistantOpen = "<|assistant|>\n"

func (c *tokenCache) encode(seg string) []uint32 {
	if ids, ok := c.get(seg); ok {
		return ids
	}
	ids := tokenizer.Encode(seg)
	c.put(seg, ids)
	return ids
}

func (c *tokenCache) get(seg string) ([]uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, ok := c.m[seg]
	return ids, ok
}

func (c *tokenCache) put(seg string, ids []uint32) {
	cost := entryCost(seg, ids)
	if cost > c.max/16 {
		return // too big to be worth keeping
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[seg]; ok {
		return
	}
	c.m[seg] = ids
	c.order = append(c.order, seg)
	c.bytes += cost
	for c.bytes > c.max && c.head < len(c.order) {
		old := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		c.bytes -= entryCost(old, c.m[old])
		delete(c.m, old)
	}
	if c.head > len(c.order)/2 && c.head > 1024 {
		c.order = append([]string(nil), c.order[c.head:]...)
		c.head = 0
	}
}

// size returns the entries' count and cost in bytes.
func (c *tokenCache) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}

// pieceBytes is how much new text chatUntil tokenizes between two asks
// whether more is needed: about 200 tokens, 6 blocks, 50 µs of BPE.
const pieceBytes = 1024

// chatUntil tokenizes msgs as chat does, but before each piece of text it
// has not seen before (a message, or about pieceBytes of a long one) it asks
// more, with the tokens so far, whether the rest is needed. When more says
// no, it returns the tokens so far, an estimate of the whole prompt's length
// from the tokens per byte so far, and rest, which tokenizes the remainder,
// caches it and returns all the tokens. When every piece was needed, rest
// is nil and estimate is exact.
//
// With limit > 0 it stops as soon as it has more than limit tokens, and
// returns a *tokenizer.TooLongError; rest then tokenizes without limit, so
// more must not say no to a prompt that may pass it.
func (c *tokenCache) chatUntil(msgs []tokenizer.Message, more func(ids []uint32) bool, limit int) (ids []uint32, estimate int, rest func() []uint32, err error) {
	over := func() bool { return limit > 0 && len(ids) > limit }
	segs := make([]string, 0, len(msgs)+1)
	for _, m := range msgs {
		segs = append(segs, segment(m))
	}
	segs = append(segs, assistantOpen)
	done := 0 // bytes of text behind ids
	for i, seg := range segs {
		if cached, ok := c.get(seg); ok {
			ids = append(ids, cached...)
			done += len(seg)
			if over() {
				return nil, 0, nil, &tokenizer.TooLongError{AtLeast: len(ids), Limit: limit}
			}
			continue
		}
		parts := tokenizer.Cut(seg, len(seg)/pieceBytes)
		start := len(ids)
		for j, part := range parts {
			if !more(ids) {
				left := 0
				for _, p := range parts[j:] {
					left += len(p)
				}
				for _, s := range segs[i+1:] {
					left += len(s)
				}
				estimate = len(ids) + left/4
				if done > 0 {
					estimate = len(ids) + left*len(ids)/done
				}
				head := ids[:len(ids):len(ids)] // rest appends to a copy
				return ids, estimate, func() []uint32 {
					all := head
					for _, p := range parts[j:] {
						all = append(all, tokenizer.Encode(p)...)
					}
					c.put(seg, slices.Clone(all[start:]))
					for _, s := range segs[i+1:] {
						all = append(all, c.encode(s)...)
					}
					return all
				}, nil
			}
			ids = append(ids, tokenizer.Encode(part)...)
			done += len(part)
			if over() {
				return nil, 0, nil, &tokenizer.TooLongError{AtLeast: len(ids), Limit: limit}
			}
		}
		c.put(seg, slices.Clone(ids[start:]))
	}
	return ids, len(ids), nil, nil
}

// chat returns the tokens of RenderChat(msgs): chatUntil, never stopped.
func (c *tokenCache) chat(msgs []tokenizer.Message) []uint32 {
	ids, _, _, _ := c.chatUntil(msgs, func([]uint32) bool { return true }, 0)
	return ids
}

// ChatTokens returns the tokens of tokenizer.RenderChat(msgs), as the proxy
// computes them for a chat request, from the same per-message cache.
func ChatTokens(msgs []tokenizer.Message) []uint32 { return chatTokens.chat(msgs) }

// ChatTokensCached returns how many messages the proxy's token cache holds
// and the heap they cost, in bytes (entryCost).
func ChatTokensCached() (entries, bytes int) { return chatTokens.size() }

// A TokenCache tokenizes chat prompts as the proxy does (ChatTokens), but
// remembers messages in a cache of its own. A caller whose conversations
// the proxy never serves, such as a virtual-time simulation, uses one so
// that they neither evict the proxy's nor outlive the caller: the cache is
// freed with the TokenCache.
type TokenCache struct{ c *tokenCache }

// NewTokenCache returns a TokenCache whose messages cost at most maxBytes of
// heap (entryCost); 0 means the proxy's bound, maxTokenCacheBytes.
func NewTokenCache(maxBytes int) *TokenCache {
	if maxBytes <= 0 {
		maxBytes = maxTokenCacheBytes
	}
	return &TokenCache{newTokenCacheOf(maxBytes)}
}

// Chat returns the tokens of tokenizer.RenderChat(msgs).
func (t *TokenCache) Chat(msgs []tokenizer.Message) []uint32 { return t.c.chat(msgs) }

// Size returns how many messages the cache holds and the heap they cost,
// in bytes.
func (t *TokenCache) Size() (entries, bytes int) { return t.c.size() }
