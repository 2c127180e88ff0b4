package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// A Tokenizer gives the token ids a request's prompt will have on the
// workers; the routing decision hashes them into blocks.
type Tokenizer interface {
	Tokens(ctx context.Context, path string, body []byte) ([]uint32, error)
}

// Embedded tokenizes with kvlens's own tokenizer and chat template, which its
// simulated workers share.
type Embedded struct{}

var _ Tokenizer = Embedded{}

// Tokens implements Tokenizer.
func (Embedded) Tokens(_ context.Context, path string, body []byte) ([]uint32, error) {
	return PromptTokens(path, body), nil
}

// WorkerTokenize asks a healthy worker's POST /tokenize, in vLLM's shape,
// for deployments whose model tokenizer kvlens does not embed: the tokens
// then match the workers' own exactly, at the cost of one round trip per
// request.
type WorkerTokenize struct {
	// Pool gives the workers to ask; the first healthy one answers.
	Pool *Pool
	// Client makes the call.
	Client *http.Client
	// Timeout bounds the call; 0 means 2 s.
	Timeout time.Duration
}

var _ Tokenizer = (*WorkerTokenize)(nil)

// tokenizeBody is what /tokenize takes: vLLM accepts a chat request's
// messages (it applies its chat template) or a completion's prompt.
type tokenizeBody struct {
	Model    string          `json:"model,omitempty"`
	Messages json.RawMessage `json:"messages,omitempty"`
	Prompt   json.RawMessage `json:"prompt,omitempty"`
}

// Tokens implements Tokenizer.
func (t *WorkerTokenize) Tokens(ctx context.Context, path string, body []byte) ([]uint32, error) {
	var req tokenizeBody
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("router: tokenize: request body: %w", err)
	}
	if path == "/v1/chat/completions" {
		req.Prompt = nil
	} else {
		req.Messages = nil
	}
	payload, _ := json.Marshal(req)
	var wk *Worker
	for _, w := range t.Pool.Workers() {
		if w.Healthy() {
			wk = w
			break
		}
	}
	if wk == nil {
		return nil, errors.New("router: tokenize: no healthy worker to ask")
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := *wk.URL
	u.Path += "/tokenize"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("router: tokenize on %s: %w", wk.Name, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := t.Client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("router: tokenize on %s: %w", wk.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("router: tokenize on %s: HTTP %d: %s", wk.Name, resp.StatusCode, bytes.TrimSpace(msg))
	}
	var out struct {
		Tokens []uint32 `json:"tokens"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(&out); err != nil {
		return nil, fmt.Errorf("router: tokenize on %s: answer: %w", wk.Name, err)
	}
	return out.Tokens, nil
}
