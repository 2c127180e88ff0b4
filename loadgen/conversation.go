package loadgen

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"sort"
	"strings"

	"github.com/kvlens/kvlens/tokenizer"
)

// systemPrompt opens every conversation. It is the same for all of them, as
// in the original demo, so every worker soon caches it.
const systemPrompt = "You are a knowledgeable assistant. Answer clearly and accurately, and explain technical ideas step by step."

// Starter is a long text that opens a conversation.
type Starter struct {
	// ID is the file name without extension.
	ID string
	// Title is a human title.
	Title string
	// Topic is a few words naming the subject, used in follow-up questions.
	Topic string
	// Text is the body the user asks about.
	Text string
}

//go:embed starters/*.md
var builtinStarters embed.FS

// BuiltinStarters returns the starters compiled into the binary.
func BuiltinStarters() []Starter {
	ss, err := loadStarterFS(builtinStarters, "starters")
	if err != nil {
		panic(err) // the embedded files are checked by a test
	}
	return ss
}

// loadStarterFS reads every .md or .txt file under dir in fsys.
func loadStarterFS(fsys fs.FS, dir string) ([]Starter, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ss []Starter
	for _, e := range entries {
		ext := path.Ext(e.Name())
		if e.IsDir() || (ext != ".md" && ext != ".txt") {
			continue
		}
		raw, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		s, err := parseStarter(strings.TrimSuffix(e.Name(), ext), string(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		ss = append(ss, s)
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
	if len(ss) == 0 {
		return nil, fmt.Errorf("no .md or .txt starters in %s", dir)
	}
	return ss, nil
}

// parseStarter reads an optional front-matter block (title:, topic:) and the
// body that follows it.
func parseStarter(id, raw string) (Starter, error) {
	s := Starter{ID: id, Title: id, Topic: strings.ReplaceAll(id, "-", " ")}
	body := raw
	if rest, ok := strings.CutPrefix(raw, "---\n"); ok {
		head, after, ok := strings.Cut(rest, "\n---\n")
		if !ok {
			return s, fmt.Errorf("line 1: front matter opened with --- is never closed")
		}
		sc := bufio.NewScanner(strings.NewReader(head))
		for line := 2; sc.Scan(); line++ {
			key, val, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				return s, fmt.Errorf("line %d: front matter line %q is not key: value", line, sc.Text())
			}
			switch strings.TrimSpace(key) {
			case "title":
				s.Title = strings.TrimSpace(val)
			case "topic":
				s.Topic = strings.TrimSpace(val)
			}
		}
		body = after
	}
	s.Text = strings.TrimSpace(body)
	if s.Text == "" {
		return s, fmt.Errorf("the text is empty")
	}
	return s, nil
}

// conversation is one simulated user's chat.
type conversation struct {
	starter  Starter
	turns    int // how many turns it will have
	messages []tokenizer.Message
	rng      *rand.Rand
}

func newConversation(s Starter, turns int, rng *rand.Rand) *conversation {
	return &conversation{
		starter: s,
		turns:   turns,
		rng:     rng,
		messages: []tokenizer.Message{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: "Please explain the following text about " + s.Topic + ".\n\n" + s.Text},
		},
	}
}

// answered appends the assistant's reply and, if the conversation goes on,
// the user's next question.
func (c *conversation) answered(reply string, more bool) {
	c.messages = append(c.messages, tokenizer.Message{Role: "assistant", Content: reply})
	if more {
		c.messages = append(c.messages, tokenizer.Message{Role: "user", Content: followUp(c.starter, reply, c.rng)})
	}
}

var followUpForms = []string{
	"Can you go deeper into %[2]q? How does that work in %[1]s?",
	"You mentioned %[2]q. What are the trade-offs there?",
	"What would go wrong in %[1]s if %[2]q did not hold?",
	"Could you give a concrete example of %[2]q?",
	"How would you measure %[2]q in a real %[1]s deployment?",
	"Summarise the key points so far about %[1]s in a few bullet points.",
	"What is the most common misconception about %[1]s?",
}

// followUp writes a question about the topic that picks up a phrase from the
// last answer, so that questions vary from conversation to conversation.
func followUp(s Starter, reply string, rng *rand.Rand) string {
	phrase := s.Topic
	words := strings.Fields(reply)
	if len(words) >= 8 {
		i := rng.IntN(len(words) - 5)
		phrase = strings.Trim(strings.Join(words[i:i+4], " "), ".,;:!?\"'()")
	}
	return fmt.Sprintf(followUpForms[rng.IntN(len(followUpForms))], s.Topic, phrase)
}
