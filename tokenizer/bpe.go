package tokenizer

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
)

// bpe is a Hugging Face fast tokenizer read from tokenizer.json: byte-level
// BPE, as Llama 3, Qwen 2.5 and Mistral-Nemo ship it. It encodes as the
// tokenizers library does: the text is cut at added tokens (each its one
// id), each piece between them is normalized, pre-tokenized (Split
// regexes, then ByteLevel) and merged word by word in the order of the
// merges list.
//
// No maintained pure-Go library does this correctly: Go's regexp has no
// look-ahead, which Llama 3's and Qwen's split patterns use (\s+(?!\S)),
// and ports of tiktoken merge by token rank rather than by the merges
// list. The regexes run on github.com/dlclark/regexp2 and NFC on
// golang.org/x/text; only the merge loop is kvlens's.
type bpe struct {
	nfc    bool
	splits []*regexp2.Regexp // Split pre-tokenizers, in order; each isolates its matches
	// prefixSpace is the ByteLevel pre-tokenizer's add_prefix_space; gpt2
	// its own split, when use_regex.
	prefixSpace bool
	gpt2        *regexp2.Regexp

	vocab        map[string]uint32 // byte-level token -> id
	merges       map[[2]uint32]merge
	ignoreMerges bool   // a word that is a token is that token, unmerged
	unk          uint32 // id of unk_token, for a character outside the vocabulary
	hasUnk       bool

	added  []addedToken
	byHead [256][]int // added tokens by their first byte, longest first

	// bos and eos are what the post-processor adds around a text encoded
	// with special tokens (a completion's prompt).
	bos, eos []uint32

	maxTokenBytes int    // the longest token, in bytes
	maxID         uint32 // the largest id, in the vocabulary or added

	texts texts // id -> bytes, for decoding

	mu       sync.Mutex
	words    map[string][]uint32 // word cache: a byte-level word -> its ids
	segments map[string][]uint32 // text between added tokens -> its ids
	segBytes int
}

// merge is one rule of the merges list: its rank and the id it makes.
type merge struct{ rank, id uint32 }

type addedToken struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Special    bool   `json:"special"`
}

// component is a normalizer, pre-tokenizer or post-processor object of
// tokenizer.json; only the fields kvlens reads.
type component struct {
	Type           string          `json:"type"`
	Normalizers    []component     `json:"normalizers"`
	Pretokenizers  []component     `json:"pretokenizers"`
	Processors     []component     `json:"processors"`
	Pattern        json.RawMessage `json:"pattern"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       *bool           `json:"use_regex"`
	Single         []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	} `json:"single"`
	SpecialTokens map[string]struct {
		IDs []uint32 `json:"ids"`
	} `json:"special_tokens"`
}

type tokenizerJSON struct {
	AddedTokens   []addedToken `json:"added_tokens"`
	Normalizer    *component   `json:"normalizer"`
	PreTokenizer  *component   `json:"pre_tokenizer"`
	PostProcessor *component   `json:"post_processor"`
	Model         struct {
		Type                    string            `json:"type"`
		Vocab                   map[string]uint32 `json:"vocab"`
		Merges                  json.RawMessage   `json:"merges"`
		IgnoreMerges            bool              `json:"ignore_merges"`
		UnkToken                *string           `json:"unk_token"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
		Dropout                 *float64          `json:"dropout"`
	} `json:"model"`
}

// gpt2Pattern is the ByteLevel pre-tokenizer's own split, when use_regex.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// regexTimeout bounds one regex match: a pattern that backtracks without
// end on some text must not hang a worker or the router.
const regexTimeout = time.Second

// parseBPE reads tokenizer.json. Its errors are one line, without the
// file's name, which the caller adds.
func parseBPE(data []byte) (*bpe, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %s", oneLine(err))
	}
	m := &tj.Model
	switch {
	case m.Type == "" && m.Vocab == nil:
		return nil, errors.New("no model: want a Hugging Face tokenizer.json with a BPE model")
	case m.Type != "" && m.Type != "BPE":
		return nil, fmt.Errorf("model type %s is not supported: kvlens reads byte-level BPE only", m.Type)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "",
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, errors.New("BPE with a subword prefix or suffix is not supported: kvlens reads byte-level BPE only")
	case m.Dropout != nil && *m.Dropout > 0:
		return nil, errors.New("BPE dropout is random; kvlens cannot predict its tokens")
	case len(m.Vocab) == 0:
		return nil, errors.New("the BPE vocabulary is empty")
	}
	t := &bpe{vocab: m.Vocab, ignoreMerges: m.IgnoreMerges}
	if err := t.readNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	byteLevel, err := t.readPreTokenizer(tj.PreTokenizer, true)
	if err != nil {
		return nil, err
	}
	if !byteLevel {
		return nil, errors.New("the pre-tokenizer has no ByteLevel step: kvlens reads byte-level BPE only (a SentencePiece-style tokenizer.json, with Metaspace, is not supported)")
	}
	if err := t.readMerges(m.Merges); err != nil {
		return nil, err
	}
	if m.UnkToken != nil {
		t.unk, t.hasUnk = m.Vocab[*m.UnkToken]
	}
	for tok, id := range m.Vocab {
		t.maxID = max(t.maxID, id)
		n := 0
		for _, r := range tok {
			if _, ok := unicodeByte[r]; !ok {
				n += utf8.RuneLen(r) // not a byte-level character: added as is
				continue
			}
			n++
		}
		t.maxTokenBytes = max(t.maxTokenBytes, n)
	}
	for _, a := range tj.AddedTokens {
		if a.Content == "" {
			return nil, fmt.Errorf("added token %d has no content", a.ID)
		}
		t.added = append(t.added, a)
		t.maxID = max(t.maxID, a.ID)
		t.maxTokenBytes = max(t.maxTokenBytes, len(a.Content))
	}
	for i, a := range t.added {
		t.byHead[a.Content[0]] = append(t.byHead[a.Content[0]], i)
	}
	for _, idx := range t.byHead {
		slices.SortStableFunc(idx, func(a, b int) int { return len(t.added[b].Content) - len(t.added[a].Content) })
	}
	if err := t.readPostProcessor(tj.PostProcessor); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *bpe) readNormalizer(c *component) error {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "NFC":
		t.nfc = true
	case "Sequence":
		for i := range c.Normalizers {
			if err := t.readNormalizer(&c.Normalizers[i]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("normalizer %s is not supported (kvlens reads NFC or none)", c.Type)
	}
	return nil
}

// readPreTokenizer reads the pre-tokenizer; byteLevel reports whether it
// ends with ByteLevel, which must come last (last says whether c may).
func (t *bpe) readPreTokenizer(c *component, last bool) (byteLevel bool, err error) {
	if c == nil {
		return false, nil
	}
	switch c.Type {
	case "Sequence":
		for i := range c.Pretokenizers {
			bl, err := t.readPreTokenizer(&c.Pretokenizers[i], last && i == len(c.Pretokenizers)-1)
			if err != nil {
				return false, err
			}
			byteLevel = byteLevel || bl
		}
		return byteLevel, nil
	case "Split":
		if c.Invert || (c.Behavior != "Isolated" && c.Behavior != "") {
			return false, fmt.Errorf("pre-tokenizer Split with behavior %s, invert %v is not supported (kvlens reads Isolated)", c.Behavior, c.Invert)
		}
		var p struct {
			Regex  *string `json:"Regex"`
			String *string `json:"String"`
		}
		if err := json.Unmarshal(c.Pattern, &p); err != nil || (p.Regex == nil && p.String == nil) {
			return false, errors.New("pre-tokenizer Split has no pattern")
		}
		expr := regexp2.Escape(deref(p.String))
		if p.Regex != nil {
			expr = *p.Regex
		}
		re, err := regexp2.Compile(expr, regexp2.None)
		if err != nil {
			return false, fmt.Errorf("pre-tokenizer Split: pattern: %s", oneLine(err))
		}
		re.MatchTimeout = regexTimeout
		t.splits = append(t.splits, re)
		return false, nil
	case "ByteLevel":
		if !last {
			return false, errors.New("pre-tokenizer ByteLevel is followed by another step, which kvlens does not support")
		}
		t.prefixSpace = c.AddPrefixSpace
		if c.UseRegex == nil || *c.UseRegex {
			t.gpt2 = regexp2.MustCompile(gpt2Pattern, regexp2.None)
			t.gpt2.MatchTimeout = regexTimeout
		}
		return true, nil
	}
	return false, fmt.Errorf("pre-tokenizer %s is not supported (kvlens reads Split and ByteLevel)", c.Type)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readMerges reads the merges, written "a b" or, in newer files, ["a","b"].
func (t *bpe) readMerges(raw json.RawMessage) error {
	var pairs [][2]string
	var asText []string
	if len(raw) == 0 || string(raw) == "null" {
		// A vocabulary with no merges is valid: every word is its bytes.
	} else if err := json.Unmarshal(raw, &asText); err == nil {
		pairs = make([][2]string, len(asText))
		for i, s := range asText {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return fmt.Errorf("merge %d, %q, is not two tokens separated by a space", i, s)
			}
			pairs[i] = [2]string{a, b}
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return fmt.Errorf("merges: want a list of \"a b\" strings or of [a, b] pairs: %s", oneLine(err))
	}
	t.merges = make(map[[2]uint32]merge, len(pairs))
	for i, p := range pairs {
		a, okA := t.vocab[p[0]]
		b, okB := t.vocab[p[1]]
		id, okID := t.vocab[p[0]+p[1]]
		if !okA || !okB || !okID {
			return fmt.Errorf("merge %d, %q + %q, names a token not in the vocabulary", i, p[0], p[1])
		}
		if _, dup := t.merges[[2]uint32{a, b}]; !dup {
			t.merges[[2]uint32{a, b}] = merge{rank: uint32(i), id: id}
		}
	}
	return nil
}

// readPostProcessor reads the special tokens the post-processor adds around
// a single text: TemplateProcessing's, through a Sequence; ByteLevel's
// post-processing changes offsets only.
func (t *bpe) readPostProcessor(c *component) error {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		for i := range c.Processors {
			if err := t.readPostProcessor(&c.Processors[i]); err != nil {
				return err
			}
		}
		return nil
	case "TemplateProcessing":
		t.bos, t.eos = nil, nil
		seen := false
		for _, p := range c.Single {
			switch {
			case p.Sequence != nil:
				seen = true
			case p.SpecialToken != nil:
				st, ok := c.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return fmt.Errorf("post-processor names special token %q without its ids", p.SpecialToken.ID)
				}
				if seen {
					t.eos = append(t.eos, st.IDs...)
				} else {
					t.bos = append(t.bos, st.IDs...)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("post-processor %s is not supported (kvlens reads TemplateProcessing and ByteLevel)", c.Type)
}

// encode appends the ids of text to dst as the tokenizers library encodes it
// without special tokens (add_special_tokens=False), stopping once dst
// holds more than limit ids (limit <= 0: no limit).
func (t *bpe) encode(text string, dst []uint32, limit int) ([]uint32, error) {
	over := func() bool { return limit > 0 && len(dst) > limit }
	start := 0
	for i := 0; i < len(text); {
		a, end, ok := t.addedAt(text, i)
		if !ok {
			i++
			continue
		}
		from := i
		if a.Lstrip {
			for from > start {
				r, n := utf8.DecodeLastRuneInString(text[start:from])
				if !unicode.IsSpace(r) {
					break
				}
				from -= n
			}
		}
		if a.Rstrip {
			for end < len(text) {
				r, n := utf8.DecodeRuneInString(text[end:])
				if !unicode.IsSpace(r) {
					break
				}
				end += n
			}
		}
		var err error
		if dst, err = t.segment(text[start:from], dst); err != nil {
			return nil, err
		}
		if dst = append(dst, a.ID); over() {
			return dst, nil
		}
		start, i = end, end
	}
	return t.segment(text[start:], dst)
}

// addedAt returns the longest added token at text[i:] and where it ends.
func (t *bpe) addedAt(text string, i int) (addedToken, int, bool) {
	for _, k := range t.byHead[text[i]] {
		a := t.added[k]
		if !strings.HasPrefix(text[i:], a.Content) {
			continue
		}
		end := i + len(a.Content)
		if a.SingleWord && (wordBefore(text, i) || wordAfter(text, end)) {
			continue
		}
		return a, end, true
	}
	return addedToken{}, 0, false
}

func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func wordBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return i > 0 && isWord(r)
}

func wordAfter(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return i < len(s) && isWord(r)
}

// maxSegmentCache bounds the segment cache: text plus 4 bytes a token (32 MiB).
const maxSegmentCache = 32 << 20

// segment appends the ids of text holding no added token. A chat rendered
// by a template that puts special tokens between messages is mostly made
// of such segments, each a message, so a conversation's next turn only
// merges its new messages.
func (t *bpe) segment(text string, dst []uint32) ([]uint32, error) {
	if text == "" {
		return dst, nil
	}
	t.mu.Lock()
	ids, ok := t.segments[text]
	t.mu.Unlock()
	if ok {
		return append(dst, ids...), nil
	}
	start := len(dst)
	in := text
	if t.nfc {
		in = norm.NFC.String(text)
	}
	dst, err := t.pieces(in, dst)
	if err != nil {
		return nil, err
	}
	cost := len(text) + 4*(len(dst)-start)
	if cost <= maxSegmentCache/64 {
		t.mu.Lock()
		if t.segments == nil || t.segBytes+cost > maxSegmentCache {
			t.segments, t.segBytes = map[string][]uint32{}, 0 // forget all: simpler than LRU
		}
		t.segments[text] = slices.Clone(dst[start:])
		t.segBytes += cost
		t.mu.Unlock()
	}
	return dst, nil
}

// pieces pre-tokenizes text and merges each word: the Split steps in
// order, then ByteLevel's own, which adds a leading space to each piece
// that has none (add_prefix_space) and splits it with GPT-2's pattern
// (use_regex).
func (t *bpe) pieces(text string, dst []uint32) ([]uint32, error) {
	words := []string{text}
	for _, re := range t.splits {
		var next []string
		for _, w := range words {
			var err error
			if next, err = isolate(re, w, next); err != nil {
				return nil, err
			}
		}
		words = next
	}
	for _, w := range words {
		if t.prefixSpace && !strings.HasPrefix(w, " ") {
			w = " " + w
		}
		if t.gpt2 == nil {
			dst = t.word(byteLevel(w), dst)
			continue
		}
		parts, err := isolate(t.gpt2, w, nil)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			dst = t.word(byteLevel(p), dst)
		}
	}
	return dst, nil
}

// isolate appends to dst the pieces of s: each match of re, and the text
// between matches.
func isolate(re *regexp2.Regexp, s string, dst []string) ([]string, error) {
	runes := []rune(s)
	m, err := re.FindRunesMatch(runes)
	at := 0
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		if m.RuneLength == 0 {
			continue
		}
		if m.RuneIndex > at {
			dst = append(dst, string(runes[at:m.RuneIndex]))
		}
		dst = append(dst, string(runes[m.RuneIndex:m.RuneIndex+m.RuneLength]))
		at = m.RuneIndex + m.RuneLength
	}
	if err != nil {
		return nil, fmt.Errorf("pre-tokenizer: %s", oneLine(err))
	}
	if at < len(runes) {
		dst = append(dst, string(runes[at:]))
	}
	return dst, nil
}

// maxWordCache bounds the word cache, in words.
const maxWordCache = 1 << 16

// word appends the ids of one byte-level word.
func (t *bpe) word(w string, dst []uint32) []uint32 {
	if t.ignoreMerges {
		if id, ok := t.vocab[w]; ok {
			return append(dst, id)
		}
	}
	t.mu.Lock()
	ids, ok := t.words[w]
	t.mu.Unlock()
	if ok {
		return append(dst, ids...)
	}
	ids = t.mergeWord(w)
	if len(w) <= 256 {
		t.mu.Lock()
		if t.words == nil || len(t.words) >= maxWordCache {
			t.words = map[string][]uint32{}
		}
		t.words[w] = ids
		t.mu.Unlock()
	}
	return append(dst, ids...)
}

// symbol is one token of a word being merged, in a linked list.
type symbol struct {
	id         uint32
	prev, next int // -1 at the ends
	gone       bool
}

// candidate is a merge that may apply between symbol left and the next.
type candidate struct {
	rank, id uint32
	left     int
	right    uint32 // the right symbol's id when queued, to tell a stale entry
	leftID   uint32
}

type candidates []candidate

func (c candidates) Len() int { return len(c) }
func (c candidates) Less(i, j int) bool {
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].left < c[j].left // the leftmost of equal merges first, as the library does
}
func (c candidates) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)   { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// mergeWord applies the merges to a byte-level word, lowest rank first:
// O(n log n) in its characters, so a megabyte-long "word" costs no more
// than its length says.
func (t *bpe) mergeWord(w string) []uint32 {
	syms := make([]symbol, 0, len(w))
	for _, r := range w {
		id, ok := t.vocab[string(r)]
		if !ok {
			if !t.hasUnk {
				continue // as the library does with no unk_token: the character is dropped
			}
			id = t.unk
		}
		syms = append(syms, symbol{id: id, prev: len(syms) - 1, next: len(syms) + 1})
	}
	if len(syms) == 0 {
		return nil
	}
	syms[len(syms)-1].next = -1
	var q candidates
	push := func(left int) {
		right := syms[left].next
		if right < 0 {
			return
		}
		if m, ok := t.merges[[2]uint32{syms[left].id, syms[right].id}]; ok {
			heap.Push(&q, candidate{rank: m.rank, id: m.id, left: left, leftID: syms[left].id, right: syms[right].id})
		}
	}
	for i := range syms {
		push(i)
	}
	for q.Len() > 0 {
		c := heap.Pop(&q).(candidate)
		l := &syms[c.left]
		if l.gone || l.id != c.leftID || l.next < 0 || syms[l.next].id != c.right {
			continue // stale: one side has merged since
		}
		r := &syms[l.next]
		l.id = c.id
		r.gone = true
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		if l.prev >= 0 {
			push(l.prev)
		}
		push(c.left)
	}
	ids := make([]uint32, 0, len(syms))
	for i := 0; i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

// byteUnicode maps each byte to the character that stands for it in a
// byte-level vocabulary (GPT-2's table): printable Latin-1 stands for
// itself, every other byte for a character from U+0100 up, in byte order.
var byteUnicode, unicodeByte = func() ([256]rune, map[rune]byte) {
	var b2u [256]rune
	u2b := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		b2u[b], u2b[r] = r, byte(b)
	}
	return b2u, u2b
}()

// byteLevel spells s's bytes in byte-level characters.
func byteLevel(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteUnicode[s[i]])
	}
	return b.String()
}

// oneLine keeps the first line of err's text.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
