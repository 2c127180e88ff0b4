package loadgen

import (
	"math/rand/v2"

	"github.com/kvlens/kvlens/tokenizer"
)

// systemPrompt opens every conversation. It is the same for all of them, as
// in the original demo, so every worker soon caches it.
const systemPrompt = "You are a knowledgeable assistant. Answer clearly and accurately, and explain technical ideas step by step."

// conversation is one simulated user's chat.
type conversation struct {
	starter  *Starter
	headings []string
	turns    int // how many turns it will have
	turn     int // the turn in progress, from 0
	// question and source are the turn's question and who wrote it.
	question, source string
	messages         []tokenizer.Message
	rng              *rand.Rand
	log              *ConversationLog
}

// openingQuestion is the first user turn without the starter's text.
func openingQuestion(s *Starter) string {
	return "Please explain the following text about " + s.Topic + "."
}

// newConversation opens a chat on s with the given system prompt (empty:
// the built-in one).
func newConversation(s *Starter, turns int, rng *rand.Rand, system string) *conversation {
	if system == "" {
		system = systemPrompt
	}
	return &conversation{
		starter:  s,
		headings: cues(s.Text),
		turns:    turns,
		rng:      rng,
		messages: []tokenizer.Message{
			{Role: "system", Content: system},
			{Role: "user", Content: openingQuestion(s) + "\n\n" + s.Text},
		},
	}
}
