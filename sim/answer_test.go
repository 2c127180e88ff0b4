package sim

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/tokenizer"
)

const answerSource = "Please explain the following text about caches.\n\n" +
	"---\ntitle: Caches\ntopic: caches\n---\n\n" +
	"# Caches\n\n" +
	"A cache keeps recent answers close. It trades memory for time.\n\n" +
	"## Why eviction matters\n\n" +
	"Memory runs out. The least recently used block goes first, since it is the least likely to come back.\n\n" +
	"```go\nfunc evict() {}\n```\n\n" +
	"A second paragraph of the section. It has 2 sentences.\n\n" +
	"## Sharing prefixes\n\n" +
	"Two prompts that begin alike share their first blocks. The café sentence is left out.\n\n" +
	"| a | b |\n|---|---|\n\n" +
	"- A list item counts too. So does its second sentence.\n- **Bold** keeps its marks."

func TestAnswersAreDrawnFromTheChatsOwnText(t *testing.T) {
	chat := func(question string) []tokenizer.Message {
		msgs := []tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: answerSource}}
		if question != "" {
			msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: "Earlier answer."},
				tokenizer.Message{Role: "user", Content: question})
		}
		return msgs
	}
	tests := []struct {
		name      string
		msgs      []tokenizer.Message
		greedy    bool
		wantStart string
		// within lists the sentences a sampled answer may start with.
		within []string
	}{
		{"the opening turn starts at the text's first sentence, past the question and front matter",
			chat(""), true, "A cache keeps recent answers close.", nil},
		{"a question quoting a heading is answered from that section",
			chat(`Walk me through "Why eviction matters" step by step.`), true, "Memory runs out.", nil},
		{"a quoted heading is matched whatever its case",
			chat(`What about "sharing PREFIXES"?`), true, "Two prompts that begin alike share their first blocks.", nil},
		{"a question quoting a phrase is answered from the sentence that holds it",
			chat(`You mentioned "least recently used". What are the trade-offs?`), true,
			"The least recently used block goes first, since it is the least likely to come back.", nil},
		{"a sampled answer starts at a sentence of the quoted section",
			chat(`Walk me through "Why eviction matters".`), false, "",
			[]string{"Memory runs out.", "The least recently used", "A second paragraph", "It has 2 sentences."}},
		{"a list item is prose, without its bullet",
			chat(`Could you give an example of "list item"?`), true, "A list item counts too.", nil},
		{"a list item keeps its own emphasis",
			chat(`What does "keeps its marks" mean?`), true, "**Bold** keeps its marks.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for pick := range uint64(20) {
				got := answerText(tt.msgs, 64, pick, tt.greedy)
				if len(got) < answerChars*64 {
					t.Fatalf("answer of %d bytes, want at least %d for 64 tokens", len(got), answerChars*64)
				}
				for _, bad := range []string{"func evict", "title:", "| a |", "café", "Please explain", "- A list", "#"} {
					if strings.Contains(got, bad) {
						t.Fatalf("answer holds %q: %q", bad, got)
					}
				}
				if tt.within == nil {
					if !strings.HasPrefix(got, tt.wantStart) {
						t.Fatalf("answer starts %q, want %q", got[:min(len(got), 80)], tt.wantStart)
					}
					continue
				}
				ok := false
				for _, w := range tt.within {
					ok = ok || strings.HasPrefix(got, w)
				}
				if !ok {
					t.Fatalf("pick %d: answer starts %q, not at a sentence of the section", pick, got[:min(len(got), 80)])
				}
			}
		})
	}
	t.Run("a chat with no text to draw from gets the prose ring", func(t *testing.T) {
		for _, msgs := range [][]tokenizer.Message{
			nil,
			{{Role: "system", Content: "Be brief.\n\nVery."}},
			{{Role: "user", Content: "Why does prefix caching help?"}},
		} {
			if got := answerText(msgs, 64, 0, true); got != "" {
				t.Fatalf("answer %q to %v, want none", got, msgs)
			}
		}
	})
	t.Run("sampled opening answers to one prompt rarely start alike", func(t *testing.T) {
		s := loadgen.BuiltinStarters()[0]
		msgs := []tokenizer.Message{{Role: "user", Content: "Please explain the following text about " + s.Topic + ".\n\n" + s.Text}}
		starts := map[string]bool{}
		for pick := range uint64(100) {
			a := answerText(msgs, 1024, pick*7919, false)
			starts[a[:40]] = true
		}
		if len(starts) < 60 {
			t.Fatalf("100 sampled answers have %d distinct starts, want at least 60", len(starts))
		}
	})
}

// TestAFollowUpReusesTheDrawnAnswersBlocks plays a conversation against a
// worker over HTTP, as the load generator does: each answer's streamed
// text, sent back in the next prompt, must encode to the tokens the engine
// generated, or a follow-up would prefill the whole answer again. It runs
// on the embedded tokenizer and on a foreign one.
func TestAFollowUpReusesTheDrawnAnswersBlocks(t *testing.T) {
	s := loadgen.BuiltinStarters()[1]
	o200k, err := tokenizer.NewEngine("o200k", "llama3")
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []*tokenizer.Engine{tokenizer.Embedded, o200k} {
		t.Run(tok.String(), func(t *testing.T) {
			p := fast()
			p.KeepGeneratedBlocks = true
			w, err := NewServer(ServerOptions{Name: "w0", Profile: p, Seed: 4, Tokenizer: tok})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(w)
			t.Cleanup(func() { srv.Close(); w.Close() })
			msgs := []openai.ChatCompletionMessage{
				{Role: "system", Content: "You are a knowledgeable assistant."},
				{Role: "user", Content: "Please explain the following text about " + s.Topic + ".\n\n" + s.Text},
			}
			questions := []string{
				fmt.Sprintf("Walk me through %q step by step.", loadgenHeadings(s.Text)[1]),
				"What is the most common misconception about " + s.Topic + "?",
				"Could you give a concrete example of \"leader election\"?",
			}
			for turn := range 4 {
				got, err := streamMessages(t, srv.URL, msgs, 300)
				if err != nil || got.usage == nil {
					t.Fatalf("turn %d: %v, usage %v", turn, err, got.usage)
				}
				if uncached := got.usage.PromptTokens - got.usage.PromptTokensDetails.CachedTokens; turn > 0 && uncached > 80 {
					t.Fatalf("turn %d: %d of %d prompt tokens uncached, want only the question and the answer's last block",
						turn, uncached, got.usage.PromptTokens)
				}
				first, _, _ := strings.Cut(got.text, ". ")
				if !strings.Contains(s.Text, first) {
					t.Fatalf("turn %d: answer's first sentence %q is not from the starter", turn, first)
				}
				if h := loadgenHeadings(s.Text)[1]; turn == 1 && !strings.Contains(section(s.Text, h), first) {
					t.Fatalf("turn 1 asked about %q; answer starts %q, outside that section", h, got.text[:80])
				}
				if turn < len(questions) {
					msgs = append(msgs, openai.ChatCompletionMessage{Role: "assistant", Content: got.text},
						openai.ChatCompletionMessage{Role: "user", Content: questions[turn]})
				}
			}
		})
	}
}

func loadgenHeadings(text string) []string {
	var hs []string
	for line := range strings.Lines(text) {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			hs = append(hs, strings.TrimSpace(h))
		}
	}
	return hs
}

// section returns the text under heading h, up to the next heading.
func section(text, h string) string {
	_, after, _ := strings.Cut(text, "## "+h+"\n")
	body, _, _ := strings.Cut(after, "\n#")
	return body
}

func FuzzAnswerText(f *testing.F) {
	f.Add(answerSource, `Walk me through "Why eviction matters".`, uint64(3), true)
	f.Add("Q\n\n```\n\n# h\n\n---", `""`, uint64(0), false)
	f.Fuzz(func(t *testing.T, source, question string, pick uint64, greedy bool) {
		msgs := []tokenizer.Message{{Role: "user", Content: source}, {Role: "assistant", Content: "a"}, {Role: "user", Content: question}}
		got := answerText(msgs, 32, pick, greedy)
		if got == "" {
			return
		}
		for _, line := range strings.Split(got, "\n\n") {
			if !plain(line) {
				t.Fatalf("answer holds a line that is not plain ASCII: %q", line)
			}
		}
		// The answer starts with one of the source's sentences; a
		// paragraph's lines are joined with one space, so compare words.
		words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
		first, _, _ := strings.Cut(got, "\n\n")
		if s := sentences(first); len(s) > 0 {
			first = s[0]
		}
		if !strings.Contains(words(source), words(first)) {
			t.Fatalf("answer %q does not start with the source's text", got)
		}
	})
}
