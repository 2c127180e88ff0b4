package router

import (
	"strings"
	"sync"

	"github.com/kvlens/kvlens/tokenizer"
)

// maxTokenCacheBytes bounds the chat token cache: message text plus 4 bytes
// per token (64 MiB).
const maxTokenCacheBytes = 64 << 20

// tokenCache tokenizes chat prompts one message at a time and remembers each
// message's tokens, so a conversation's next turn only tokenizes what is new.
// The result equals tokenizer.Encode(tokenizer.RenderChat(msgs)) exactly:
// the template opens every message with "<|" right after a newline, and
// cl100k's pre-tokenizer never lets a piece span a newline followed by "<",
// so each message tokenizes on its own (TestChatTokensMatchEncode checks it).
type tokenCache struct {
	mu    sync.Mutex
	m     map[string][]uint32
	order []string // insertion order, for eviction
	head  int
	bytes int
}

func newTokenCache() *tokenCache { return &tokenCache{m: map[string][]uint32{}} }

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
	c.mu.Lock()
	ids, ok := c.m[seg]
	c.mu.Unlock()
	if ok {
		return ids
	}
	ids = tokenizer.Encode(seg)
	cost := len(seg) + 4*len(ids)
	if cost > maxTokenCacheBytes/16 {
		return ids // too big to be worth keeping
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[seg]; ok {
		return ids
	}
	c.m[seg] = ids
	c.order = append(c.order, seg)
	c.bytes += cost
	for c.bytes > maxTokenCacheBytes && c.head < len(c.order) {
		old := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		c.bytes -= len(old) + 4*len(c.m[old])
		delete(c.m, old)
	}
	if c.head > len(c.order)/2 && c.head > 1024 {
		c.order = append([]string(nil), c.order[c.head:]...)
		c.head = 0
	}
	return ids
}

// chat returns the tokens of RenderChat(msgs).
func (c *tokenCache) chat(msgs []tokenizer.Message) []uint32 {
	var out []uint32
	for _, m := range msgs {
		out = append(out, c.encode(segment(m))...)
	}
	return append(out, c.encode(assistantOpen)...)
}

// ChatTokens returns the tokens of tokenizer.RenderChat(msgs), as the proxy
// computes them for a chat request, from the same per-message cache.
func ChatTokens(msgs []tokenizer.Message) []uint32 { return chatTokens.chat(msgs) }
