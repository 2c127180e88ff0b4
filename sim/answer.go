package sim

import (
	"hash/fnv"
	"strings"

	"github.com/kvlens/kvlens/tokenizer"
)

// A simulated worker answers a chat from the chat's own text, so that a
// visitor who reads a conversation sees an answer to its question: the
// sentences of the section the question names, or of the text the first
// turn asked about. The engine still decides how many tokens the answer
// has and when they come; this only decides which tokens they are.

// answerChars is how much text an answer draws per token it may need; the
// engine repeats the answer's tokens if it runs past them.
const answerChars = 6

// maxAnswerTokens bounds the text drawn for one answer, in tokens.
const maxAnswerTokens = 2048

// passage is one paragraph of the chat's source text, cut into sentences,
// under the heading of its section.
type passage struct {
	heading   string
	sentences []string
}

// answerText returns the text a worker answers msgs with, about maxTokens
// tokens of it, or "" when the chat has no text to draw from (the prose
// ring answers then). A greedy answer starts at its focus's first
// sentence; a sampled one at a sentence of the focus chosen by pick, so
// that two sampled answers to one prompt rarely share their tokens.
func answerText(msgs []tokenizer.Message, maxTokens int, pick uint64, greedy bool) string {
	var users []string
	for _, m := range msgs {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if len(users) == 0 {
		return ""
	}
	if !strings.Contains(strings.TrimSpace(users[0]), "\n\n") {
		return "" // a question with no text to answer from
	}
	ps := passages(users[0])
	if len(ps) == 0 {
		return ""
	}
	first, span := focus(ps, users[len(users)-1], len(users) == 1)
	start := first
	if !greedy {
		start = first + int(pick%uint64(span))
	}
	// Flatten the focus's paragraph and sentence from start, then read on,
	// wrapping to the text's beginning.
	want := answerChars * min(max(maxTokens, 1), maxAnswerTokens)
	var b strings.Builder
	n := 0
	for _, p := range ps {
		n += len(p.sentences)
	}
	for i := 0; b.Len() < want && i < 4*n; i++ {
		pi, si := locate(ps, (start+i)%n)
		if i > 0 {
			if si == 0 {
				b.WriteString("\n\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(ps[pi].sentences[si])
	}
	return b.String()
}

// focus returns the first sentence an answer to question draws from and
// how many sentences the focus spans: the section whose heading the
// question quotes, else the first sentence that holds its quoted phrase,
// else for the opening turn the whole text, else a section the question
// hashes to.
func focus(ps []passage, question string, opening bool) (first, span int) {
	total := 0
	for _, p := range ps {
		total += len(p.sentences)
	}
	if opening {
		return 0, total
	}
	section := func(i int) (int, int) { // the sentences of passage i's section
		start := 0
		for _, p := range ps[:i] {
			start += len(p.sentences)
		}
		n := 0
		for _, p := range ps[i:] {
			if p.heading != ps[i].heading {
				break
			}
			n += len(p.sentences)
		}
		return start, n
	}
	if q, ok := quoted(question); ok {
		lq := strings.ToLower(q)
		for i, p := range ps {
			if strings.EqualFold(p.heading, q) && (i == 0 || ps[i-1].heading != p.heading) {
				return section(i)
			}
		}
		at := 0
		for i, p := range ps {
			for j, s := range p.sentences {
				if strings.Contains(strings.ToLower(s), lq) {
					start, n := section(i)
					return at + j, start + n - (at + j)
				}
			}
			at += len(p.sentences)
		}
	}
	var heads []int // the first passage of each section
	for i, p := range ps {
		if i == 0 || p.heading != ps[i-1].heading {
			heads = append(heads, i)
		}
	}
	h := fnv.New64a()
	h.Write([]byte(question))
	return section(heads[h.Sum64()%uint64(len(heads))])
}

// locate returns the passage and sentence of flattened sentence k.
func locate(ps []passage, k int) (int, int) {
	for i, p := range ps {
		if k < len(p.sentences) {
			return i, k
		}
		k -= len(p.sentences)
	}
	return 0, 0
}

// quoted returns the first double-quoted phrase of s.
func quoted(s string) (string, bool) {
	_, rest, ok := strings.Cut(s, `"`)
	if !ok {
		return "", false
	}
	q, _, ok := strings.Cut(rest, `"`)
	q = strings.TrimSpace(q)
	return q, ok && q != ""
}

// passages cuts text into paragraphs of sentences under their headings. It
// skips the first paragraph (the question the first turn asks about the
// text) when more follow, YAML front matter, code blocks, tables and any
// sentence that is not plain ASCII or holds what looks like a special
// token: a worker streams an answer token by token, and such a sentence
// could split a character between two tokens or decode to a control token.
func passages(text string) []passage {
	blocks := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n")
	if len(blocks) > 1 {
		blocks = blocks[1:]
	}
	var ps []passage
	heading, fenced, front := "", false, false
	for bi, block := range blocks {
		block = strings.TrimSpace(block)
		switch {
		case block == "":
			continue
		case bi == 0 && strings.HasPrefix(block, "---"):
			front = !strings.HasSuffix(block[3:], "---")
			continue
		case front:
			front = !strings.HasSuffix(block, "---")
			continue
		case strings.HasPrefix(block, "```"):
			fenced = strings.Count(block, "```")%2 == 1
			continue
		case fenced:
			fenced = strings.Count(block, "```")%2 == 0
			continue
		case strings.HasPrefix(block, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(block, "#"))
			continue
		case strings.HasPrefix(block, "|"):
			continue
		}
		var lines []string
		for line := range strings.Lines(block) {
			line = strings.TrimSpace(line)
			for _, bullet := range []string{"- ", "* ", "+ ", "> "} {
				line = strings.TrimPrefix(line, bullet)
			}
			if line != "" {
				lines = append(lines, line)
			}
		}
		var ss []string
		for _, s := range sentences(strings.Join(lines, " ")) {
			if plain(s) {
				ss = append(ss, s)
			}
		}
		if len(ss) > 0 {
			ps = append(ps, passage{heading: heading, sentences: ss})
		}
	}
	return ps
}

// sentences cuts a paragraph after each ".", "?" or "!" that a space and
// a capital letter, a digit or an opening mark follow.
func sentences(p string) []string {
	var out []string
	start := 0
	for i := 0; i+2 < len(p); i++ {
		if (p[i] == '.' || p[i] == '?' || p[i] == '!') && p[i+1] == ' ' && opens(p[i+2]) {
			out = append(out, p[start:i+1])
			start = i + 2
		}
	}
	if s := strings.TrimSpace(p[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// opens says whether c may begin a sentence.
func opens(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("*\"(`", c) >= 0
}

// plain says whether s is printable ASCII without special-token markers.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return !strings.Contains(s, "<|") && !strings.Contains(s, "|>")
}
