package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/kvlens/kvlens/tokenizer"
)

// A UserSimulator writes the user's next question in a conversation.
type UserSimulator interface {
	// FollowUp returns the next user message, given the starter and the
	// conversation so far (ending with the assistant's last answer).
	FollowUp(ctx context.Context, s Starter, history []tokenizer.Message) (string, error)
}

// UserModel asks an OpenAI-compatible "user model" endpoint, through
// go-openai, for each follow-up question.
type UserModel struct {
	client  *openai.Client
	model   string
	timeout time.Duration
}

// UserModelMaxTokens caps a generated question, as the original demo did.
const UserModelMaxTokens = 100

// NewUserModel returns a simulator that asks model at baseURL (ending in
// /v1), giving up on each question after timeout. apiKey may be empty.
func NewUserModel(baseURL, model, apiKey string, timeout time.Duration) *UserModel {
	cfg := openai.DefaultConfig(apiKey)
	cfg.BaseURL = strings.TrimSuffix(baseURL, "/")
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
	return &UserModel{client: openai.NewClientWithConfig(cfg), model: model, timeout: timeout}
}

// maxQuestionBytes bounds a user model's question: UserModelMaxTokens
// tokens are a few hundred bytes of English.
const maxQuestionBytes = 4096

// lastAnswerChars bounds how much of the last answer the user model reads: it
// needs the gist, not the whole 1,024-token reply.
const lastAnswerChars = 3000

// FollowUp implements UserSimulator.
func (u *UserModel) FollowUp(ctx context.Context, s Starter, history []tokenizer.Message) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	answer := ""
	if n := len(history); n > 0 {
		answer = history[n-1].Content
	}
	if len(answer) > lastAnswerChars {
		answer = answer[:lastAnswerChars]
	}
	resp, err := u.client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:     u.model,
		MaxTokens: UserModelMaxTokens,
		Messages: []openai.ChatCompletionMessage{
			{Role: "system", Content: "You play a curious engineer reading a text titled \"" + s.Title + "\" about " + s.Topic +
				" with an AI assistant. Reply with only the user's next message: a single concise follow-up question about the assistant's last answer."},
			{Role: "user", Content: "The assistant's last answer:\n\n" + answer + "\n\nYour follow-up question:"},
		},
	})
	if err != nil {
		return "", fmt.Errorf("user model %s: %w", u.model, err)
	}
	if len(resp.Choices) == 0 || strings.TrimSpace(resp.Choices[0].Message.Content) == "" {
		return "", errors.New("user model " + u.model + ": empty answer")
	}
	q := strings.TrimSpace(resp.Choices[0].Message.Content)
	if len(q) > maxQuestionBytes {
		// A model that ignores max_tokens would otherwise put its whole
		// answer into every later turn's prompt.
		return "", fmt.Errorf("user model %s: a question of %d bytes, more than %d", u.model, len(q), maxQuestionBytes)
	}
	return q, nil
}

// cues are the section headings of a starter, which the built-in user asks
// about so that its questions follow the text's own structure.
func cues(text string) []string {
	var hs []string
	for line := range strings.Lines(text) {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			hs = append(hs, strings.TrimSpace(h))
		}
	}
	return hs
}

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true, "in": true,
	"on": true, "is": true, "are": true, "it": true, "its": true, "that": true, "this": true, "for": true,
	"with": true, "as": true, "by": true, "be": true, "was": true, "at": true, "from": true, "but": true,
	"so": true, "if": true, "not": true, "can": true, "which": true, "when": true, "each": true,
}

// keyPhrase picks two to four consecutive words of reply that neither start
// nor end on a stop word; ok is false when none is found in a few tries.
func keyPhrase(reply string, rng *rand.Rand) (string, bool) {
	words := strings.Fields(reply)
	if len(words) < 6 {
		return "", false
	}
	clean := func(w string) string { return strings.Trim(w, ".,;:!?\"'()[]*`#") }
	for range 8 {
		n := 2 + rng.IntN(3)
		i := rng.IntN(len(words) - n)
		first, last := clean(words[i]), clean(words[i+n-1])
		if first == "" || last == "" || stopWords[strings.ToLower(first)] || stopWords[strings.ToLower(last)] {
			continue
		}
		phrase := make([]string, n)
		for j := range n {
			phrase[j] = clean(words[i+j])
		}
		return strings.Join(phrase, " "), true
	}
	return "", false
}

var (
	phraseForms = []string{
		"Can you go deeper into %[2]q? How does that work in %[1]s?",
		"You mentioned %[2]q. What are the trade-offs there?",
		"What would go wrong in %[1]s if %[2]q did not hold?",
		"Could you give a concrete example of %[2]q?",
		"How would you measure %[2]q in a real %[1]s deployment?",
		"Why does %[2]q matter more than it first seems?",
	}
	headingForms = []string{
		"The text has a section on %[2]q. How does it relate to what you just explained?",
		"Walk me through %[2]q step by step, as if I were new to %[1]s.",
		"What is the hardest part of %[2]q to get right in practice?",
		"How has the approach to %[2]q in %[1]s changed over the years?",
	}
	topicForms = []string{
		"Summarise the key points so far about %[1]s in a few bullet points.",
		"What is the most common misconception about %[1]s?",
		"If I had to explain %[1]s to a new colleague in two minutes, what should I say?",
	}
)

// followUp writes a question about the topic that picks up a phrase from the
// last answer or a section heading of the starter, so that questions vary
// from conversation to conversation and follow the text.
func followUp(s Starter, headings []string, reply string, rng *rand.Rand) string {
	switch x := rng.IntN(10); {
	case x < 5:
		if p, ok := keyPhrase(reply, rng); ok {
			return fmt.Sprintf(phraseForms[rng.IntN(len(phraseForms))], s.Topic, p)
		}
		fallthrough
	case x < 8 && len(headings) > 0:
		if len(headings) > 0 {
			return fmt.Sprintf(headingForms[rng.IntN(len(headingForms))], s.Topic, headings[rng.IntN(len(headings))])
		}
	}
	return fmt.Sprintf(topicForms[rng.IntN(len(topicForms))], s.Topic)
}
