// Package tokenizer is the one tokenizer and chat template that kvlens's
// simulated workers, router and load generator share.
//
// It embeds OpenAI's cl100k BPE (through github.com/tiktoken-go/tokenizer),
// whose token counts on English prose are within a few percent of Llama 3's,
// so kvlens needs no model download. A deployment whose workers use another
// tokenizer asks a worker's /tokenize instead.
package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Message is one chat message, as an OpenAI client sends it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

var (
	codecOnce sync.Once
	codec     tokenizer.Codec
	codecErr  error
)

func get() tokenizer.Codec {
	codecOnce.Do(func() {
		codec, codecErr = tokenizer.Get(tokenizer.Cl100kBase)
	})
	if codecErr != nil {
		// The vocabulary is compiled into the binary; failing to load it is
		// a build defect, not a run-time condition.
		panic(fmt.Sprintf("tokenizer: load embedded cl100k vocabulary: %v", codecErr))
	}
	return codec
}

// Encode returns the token ids of text.
func Encode(text string) []uint32 { return encode(text, nil) }

// Cut splits text into at most n parts of similar length, each cut placed
// just before a space that sits between two ASCII letters. No piece of
// cl100k's pre-tokenizer spans such a point: every pattern that can contain
// a letter ends at the last letter of a run, and the space-led word that
// follows is matched the same way from the start of the next part, since the
// pattern has no look-behind. So the parts tokenize independently to the
// same ids.
func Cut(text string, n int) []string {
	if n <= 1 {
		return []string{text}
	}
	parts := make([]string, 0, n)
	for k := n; k > 1; k-- {
		at := len(text) / k
		i := max(at, 1)
		for ; i < len(text)-1; i++ {
			if text[i] == ' ' && isASCIILetter(text[i-1]) && isASCIILetter(text[i+1]) {
				break
			}
		}
		if i >= len(text)-1 {
			break // no cut point left: the rest is one part
		}
		parts = append(parts, text[:i])
		text = text[i:]
	}
	return append(parts, text)
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// encode appends the ids of text to dst.
func encode(text string, dst []uint32) []uint32 {
	ids, _, err := get().Encode(text)
	if err != nil {
		// Invalid UTF-8 is replaced rather than refused, as real servers do.
		ids, _, _ = get().Encode(strings.ToValidUTF8(text, "\uFFFD"))
	}
	dst = slices.Grow(dst, len(ids))
	for _, id := range ids {
		dst = append(dst, uint32(id))
	}
	return dst
}

// Count returns the number of tokens in text.
func Count(text string) int {
	n, err := get().Count(text)
	if err != nil {
		return len(Encode(text))
	}
	return n
}

// Decode returns the text of ids. Ids outside the vocabulary are skipped.
func Decode(ids []uint32) string {
	u := make([]uint, len(ids))
	for i, id := range ids {
		u[i] = uint(id)
	}
	s, err := get().Decode(u)
	if err != nil {
		return ""
	}
	return s
}

// RenderChat renders messages with kvlens's fixed chat template and leaves the
// prompt open for the assistant's reply. Workers and router both tokenize this
// string, so the same conversation always yields the same token prefix: each
// turn's prompt starts with the previous turn's prompt and answer.
func RenderChat(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|")
		b.WriteString(m.Role)
		b.WriteString("|>\n")
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	b.WriteString("<|assistant|>\n")
	return b.String()
}
