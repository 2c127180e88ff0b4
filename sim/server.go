// Package sim is a simulated inference worker: it serves the OpenAI API the
// way a vLLM or TensorRT-LLM worker does, with made-up but plausible timing,
// so kvlens can demonstrate routing with no GPU.
package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/kvlens/kvlens/tokenizer"
)

// DefaultModel is the model name simulated workers report.
const DefaultModel = "meta-llama/Llama-3.1-70B-Instruct-FP8"

// maxBodyBytes bounds a request body: 8 MiB is far beyond any prompt the
// simulated 16k-token context could hold.
const maxBodyBytes = 8 << 20

// Server is one simulated worker's HTTP API.
type Server struct {
	name   string
	model  string
	timing Timing
	// sleep waits for d or until done closes; it reports whether the full
	// time passed. Tests replace it to run without real delays.
	sleep func(d time.Duration, done <-chan struct{}) bool
	seq   atomic.Uint64
}

// NewServer returns a worker named name that serves model with timing t.
func NewServer(name, model string, t Timing) *Server {
	return &Server{name: name, model: model, timing: t, sleep: sleep}
}

func sleep(d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}

// ServeHTTP routes the worker's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, openai.ModelsList{Models: []openai.Model{{
			ID: s.model, Object: "model", OwnedBy: "kvlens-sim",
		}}})
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chatCompletions(w, r)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	}
}

// chatRequest is the subset of an OpenAI chat request the worker reads.
type chatRequest struct {
	Model               string                `json:"model"`
	Messages            []tokenizer.Message   `json:"messages"`
	MaxTokens           int                   `json:"max_tokens"`
	MaxCompletionTokens int                   `json:"max_completion_tokens"`
	Stream              bool                  `json:"stream"`
	StreamOptions       *openai.StreamOptions `json:"stream_options"`
}

// parseChatRequest decodes and checks a chat request body. Its errors are one
// line, fit to show a client.
func parseChatRequest(body io.Reader) (*chatRequest, error) {
	var req chatRequest
	dec := json.NewDecoder(body)
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("request body is not valid JSON: %v", err)
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("messages must hold at least one message")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "developer", "tool":
		default:
			return nil, fmt.Errorf("messages[%d].role %q is not a chat role", i, m.Role)
		}
	}
	if req.MaxCompletionTokens > 0 {
		req.MaxTokens = req.MaxCompletionTokens
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("max_tokens must not be negative, got %d", req.MaxTokens)
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = 1024
	}
	return &req, nil
}

// outputLength draws how many tokens an answer has before the model ends it:
// uniform over [640, 1024], a mean of about 830 tokens as in the seeds'
// workload, capped by the request's max_tokens.
func outputLength(maxTokens int) int {
	return min(maxTokens, 640+rand.IntN(385))
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	req, err := parseChatRequest(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	prompt := tokenizer.RenderChat(req.Messages)
	promptTokens := tokenizer.Count(prompt)
	n := outputLength(req.MaxTokens)
	id := fmt.Sprintf("chatcmpl-%s-%d", s.name, s.seq.Add(1))
	created := time.Now().Unix()
	ids, pieces := proseTokens()
	off := proseOffset(prompt)
	finish := openai.FinishReasonStop
	if n == req.MaxTokens {
		finish = openai.FinishReasonLength
	}
	usage := &openai.Usage{
		PromptTokens:        promptTokens,
		CompletionTokens:    n,
		TotalTokens:         promptTokens + n,
		PromptTokensDetails: &openai.PromptTokensDetails{},
	}
	done := r.Context().Done()

	if !req.Stream {
		if !s.sleep(s.timing.firstToken(promptTokens)+time.Duration(n-1)*s.timing.InterToken, done) {
			return
		}
		var text strings.Builder
		for i := range n {
			text.WriteString(pieces[(off+i)%len(ids)])
		}
		writeJSON(w, http.StatusOK, openai.ChatCompletionResponse{
			ID: id, Object: "chat.completion", Created: created, Model: s.model,
			Choices: []openai.ChatCompletionChoice{{
				Message:      openai.ChatCompletionMessage{Role: "assistant", Content: text.String()},
				FinishReason: finish,
			}},
			Usage: *usage,
		})
		return
	}

	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	chunk := openai.ChatCompletionStreamResponse{
		ID: id, Object: "chat.completion.chunk", Created: created, Model: s.model,
		Choices: []openai.ChatCompletionStreamChoice{{}},
	}
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	delay := s.timing.firstToken(promptTokens)
	for i := range n {
		if !s.sleep(delay, done) {
			return
		}
		delay = s.timing.InterToken
		chunk.Choices[0].Delta = openai.ChatCompletionStreamChoiceDelta{Content: pieces[(off+i)%len(ids)]}
		if i == 0 {
			chunk.Choices[0].Delta.Role = "assistant"
		}
		if i == n-1 {
			chunk.Choices[0].FinishReason = finish
		}
		if !send(chunk) {
			return
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(openai.ChatCompletionStreamResponse{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: s.model,
			Choices: []openai.ChatCompletionStreamChoice{}, Usage: usage,
		})
	}
	io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers in the OpenAI error shape, which every OpenAI client
// turns into a readable message.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": http.StatusText(status), "code": status,
	}})
}
