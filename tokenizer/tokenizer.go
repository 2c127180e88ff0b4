// Package tokenizer is the one tokenizer and chat template that kvlens's
// simulated workers, router and load generator share.
//
// It embeds OpenAI's cl100k BPE (through github.com/tiktoken-go/tokenizer),
// whose token counts on English prose are within a few percent of Llama 3's,
// so kvlens needs no model download. A deployment whose workers use another
// tokenizer asks a worker's /tokenize instead.
package tokenizer

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
	"golang.org/x/sync/semaphore"
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

// MaxTokenBytes is the length of cl100k's longest token, in bytes (128
// spaces). A text of n bytes therefore has at least n/128 tokens, rounded
// up: a lower bound that needs no tokenizing.
const MaxTokenBytes = 128

// pieceBytes is the length of text Encode hands the BPE at once. The BPE's
// pre-tokenizer copies its input into runes (4 bytes each) and allocates
// about 400 bytes a token, so tokenizing a long text in pieces keeps that
// garbage small and lets EncodeLimit stop early.
const pieceBytes = 4 << 10

// busyBytes bounds the text being tokenized at once in this process, in
// bytes. A piece Cut cannot split (a megabyte of spaces or of one "word")
// costs about 20 bytes of memory per byte of text while it is tokenized;
// this keeps a burst of them to a few tens of MiB. Pieces of ordinary text
// weigh pieceBytes, so they never wait for each other.
const busyBytes = 2 << 20

var busy = semaphore.NewWeighted(busyBytes)

// giantBytes is the length from which a piece is pathological, in bytes:
// prose has pieces of a few bytes, and only a run of hundreds of KiB of
// spaces or of one "word" is this long. Tokenizing one allocates about 40
// bytes per byte of it, which the garbage collector would otherwise leave
// in the heap for a while, so it is given back to the system at once.
const giantBytes = 256 << 10

// Encode returns the cl100k token ids of text, as tiktoken's
// encode_ordinary does: the text of a special token is ordinary text, so no
// message can write one. The simulated workers encode alike.
func Encode(text string) []uint32 {
	var ids []uint32
	for _, part := range Cut(text, len(text)/pieceBytes) {
		ids = encode(part, ids)
	}
	return ids
}

// TooLongError is a prompt refused because it has more tokens than a limit.
type TooLongError struct {
	// AtLeast is a lower bound of the prompt's length, in tokens: its exact
	// length when it was tokenized whole, else where tokenizing stopped, or
	// the bound from its bytes (see MaxTokenBytes).
	AtLeast int
	// Limit is the most tokens allowed.
	Limit int
	// Bytes is the prompt's length in bytes when it was refused on its
	// bytes alone, before tokenizing; 0 otherwise.
	Bytes int
	// Counted says AtLeast is the prompt's exact length: it came as token
	// ids, which are counted, not tokenized (see CheckIDs).
	Counted bool
}

func (e *TooLongError) Error() string {
	if e.Counted {
		return tooLongCounted(e.AtLeast, e.Limit)
	}
	if e.Bytes > 0 {
		return fmt.Sprintf("the prompt has at least %d tokens (%d bytes, and no token is longer than %d bytes), but this model's maximum context length is %d tokens",
			e.AtLeast, e.Bytes, MaxTokenBytes, e.Limit)
	}
	return fmt.Sprintf("the prompt has more than %d tokens (tokenizing stopped at %d), but this model's maximum context length is %d tokens",
		e.Limit, e.AtLeast, e.Limit)
}

// CheckBytes refuses a text of n bytes that cannot fit in limit tokens
// whatever it says, because even tokens of MaxTokenBytes could not hold it.
func CheckBytes(n, limit int) error {
	if least := (n + MaxTokenBytes - 1) / MaxTokenBytes; least > limit {
		return &TooLongError{AtLeast: least, Limit: limit, Bytes: n}
	}
	return nil
}

// EncodeLimit is Encode for a text that may hold at most limit tokens. It
// refuses a text too long by its bytes alone without tokenizing it (see
// CheckBytes), and otherwise tokenizes it piece by piece and stops as soon
// as it has more than limit tokens, so an over-long text costs at most
// limit tokens of work. Its error is a *TooLongError.
func EncodeLimit(text string, limit int) ([]uint32, error) {
	if err := CheckBytes(len(text), limit); err != nil {
		return nil, err
	}
	var ids []uint32
	for _, part := range Cut(text, len(text)/pieceBytes) {
		ids = encode(part, ids)
		if len(ids) > limit {
			return nil, &TooLongError{AtLeast: len(ids), Limit: limit}
		}
	}
	return ids, nil
}

// BodyOverhead is what a request body may hold besides its prompt text, in
// bytes: the JSON around the messages, sampling options, tools.
const BodyOverhead = 64 << 10

// BodyLimit is the largest request body worth reading for a model of
// maxModelLen tokens, in bytes: MaxTokenBytes per token plus BodyOverhead.
// No prompt that fits the context needs more, since no token is longer
// than MaxTokenBytes; English prose runs about 4 bytes a token and
// JSON-escaped CJK text about 12, so only escaped text made of the longest
// tokens could fit the context and still miss this bound.
func BodyLimit(maxModelLen int) int64 {
	return int64(maxModelLen)*MaxTokenBytes + BodyOverhead
}

// Cut splits text into at most n parts of similar length, each cut placed
// just before a space that sits between two ASCII letters, or before a
// newline that follows an ASCII letter or digit. No piece of cl100k's
// pre-tokenizer spans such a point: every pattern that can contain a letter
// or a digit ends at the last one of a run (none takes a newline after
// one; only punctuation takes the newlines after it), and what follows,
// a space-led word or the newlines, is matched the same way from the start
// of the next part, since the pattern has no look-behind. So the parts
// tokenize independently to the same ids.
//
// The newlines matter for a chat whose content came as a list of parts,
// which are joined with newlines: parts of a word each would otherwise
// leave no cut point, and EncodeLimit would tokenize the whole text before
// it could stop.
func Cut(text string, n int) []string {
	if n <= 1 {
		return []string{text}
	}
	parts := make([]string, 0, n)
	for k := n; k > 1; k-- {
		at := len(text) / k
		i := max(at, 1)
		for ; i < len(text)-1; i++ {
			if cutsBefore(text, i) {
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

// cutsBefore says whether Cut may cut text before byte i, 0 < i < len-1.
func cutsBefore(text string, i int) bool {
	switch text[i] {
	case ' ':
		return isASCIILetter(text[i-1]) && isASCIILetter(text[i+1])
	case '\n':
		return isASCIILetter(text[i-1]) || isASCIIDigit(text[i-1])
	}
	return false
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isASCIIDigit(c byte) bool { return c >= '0' && c <= '9' }

// encode appends the ids of text to dst, holding len(text) of busy while
// the BPE runs.
func encode(text string, dst []uint32) []uint32 { return encodeWith(get(), text, dst) }

// encodeWith is encode with codec c.
func encodeWith(c tokenizer.Codec, text string, dst []uint32) []uint32 {
	w := min(int64(len(text)), busyBytes)
	busy.Acquire(context.Background(), w) // cannot fail: the context never ends
	defer busy.Release(w)
	if len(text) >= giantBytes {
		// Deferred after Release, so it runs first: the next giant piece
		// starts once this one's memory is back.
		defer debug.FreeOSMemory()
	}
	ids, _, err := c.Encode(text)
	if err != nil {
		// Invalid UTF-8 is replaced rather than refused, as real servers do.
		ids, _, _ = c.Encode(strings.ToValidUTF8(text, "\uFFFD"))
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

// ChatBytes is len(RenderChat(msgs)), without rendering it.
func ChatBytes(msgs []Message) int {
	n := len(assistantOpen)
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + len("<||>\n\n")
	}
	return n
}

const assistantOpen = "<|assistant|>\n"

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
	b.WriteString(assistantOpen)
	return b.String()
}
