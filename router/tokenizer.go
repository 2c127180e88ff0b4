package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/kvlens/kvlens/tokenizer"
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

// isEmbedded reports whether t tokenizes as Embedded does, so that the
// proxy may use the embedded tokenizer's per-message cache directly.
func isEmbedded(t Tokenizer) bool {
	switch t := t.(type) {
	case Embedded:
		return true
	case interface{ IsEmbedded() bool }:
		return t.IsEmbedded()
	}
	return false
}

// Files tokenizes with a model's own tokenizer and chat template, read
// from its files (tokenizer.LoadFiles): the engine's very ids, with no
// round trip. A chat is rendered with the template and encoded without
// adding special tokens (the template writes them), a completion's prompt
// with them, as vLLM does.
type Files struct {
	Engine *tokenizer.Engine
}

var _ Tokenizer = Files{}

// Tokens implements Tokenizer. The engine caches the ids of the text
// between special tokens, so a conversation's next turn only merges its
// new messages.
func (f Files) Tokens(_ context.Context, path string, body []byte) ([]uint32, error) {
	var req promptBody
	if json.Unmarshal(body, &req) != nil {
		return nil, nil // the worker will judge the body
	}
	const noLimit = math.MaxInt / tokenizer.MaxTokenBytes // the proxy checks the limit
	if path == "/v1/chat/completions" {
		if len(req.Messages) == 0 {
			return nil, nil
		}
		text, err := f.Engine.Render(req.Messages)
		if err != nil {
			return nil, fmt.Errorf("router: %w", err)
		}
		return f.Engine.EncodeLimit(text, noLimit)
	}
	s, ids, ok := req.completionPrompt()
	switch {
	case !ok:
		return nil, nil
	case ids != nil:
		return ids, nil
	}
	return f.Engine.EncodePrompt(s, noLimit)
}

// WorkerTokenize asks a healthy worker's POST /tokenize, in vLLM's shape,
// for deployments whose model tokenizer kvlens does not have: the tokens
// then match the workers' own exactly, at the cost of a round trip per
// request. A conversation's follow-up turn costs one round trip for its
// new messages only (see splice.go).
type WorkerTokenize struct {
	// Pool gives the workers to ask; the first healthy one answers.
	Pool *Pool
	// Client makes the call.
	Client *http.Client
	// Timeout bounds the call; 0 means 2 s.
	Timeout time.Duration
	// Logf, if set, says when splicing turns off (see splice.go).
	Logf func(format string, args ...any)

	mu    sync.Mutex
	cache map[string][]uint32 // request payload -> tokens
	chats splicer
}

var _ Tokenizer = (*WorkerTokenize)(nil)

// tokenizeBody is what /tokenize takes: vLLM accepts a chat request's
// messages (it applies its chat template) or a completion's prompt.
type tokenizeBody struct {
	Model    string          `json:"model,omitempty"`
	Messages json.RawMessage `json:"messages,omitempty"`
	Prompt   json.RawMessage `json:"prompt,omitempty"`
	// AddGenerationPrompt, for messages, is vLLM's add_generation_prompt
	// (default true); the splicer asks for a chat without it.
	AddGenerationPrompt *bool `json:"add_generation_prompt,omitempty"`
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
		// vLLM's /tokenize takes a prompt as a string only.
		req.Messages = nil
		text, ids, ok := (&promptBody{Prompt: req.Prompt}).completionPrompt()
		switch {
		case !ok:
			return nil, nil // the worker will judge the body
		case ids != nil:
			return ids, nil
		}
		req.Prompt, _ = json.Marshal(text)
	}
	payload, _ := json.Marshal(req)
	wk := t.healthy()
	if wk == nil {
		return nil, errors.New("router: tokenize: no healthy worker to ask")
	}
	key := string(payload)
	if ids, ok := t.cached(key); ok {
		return ids, nil
	}
	var ids []uint32
	var err error
	if len(req.Messages) > 0 {
		ids, err = t.chats.tokens(ctx, t, wk, req.Model, req.Messages)
	} else {
		ids, err = t.ask(ctx, wk, payload)
	}
	if err == nil {
		t.remember(key, ids)
	}
	return ids, err
}

// healthy returns the first healthy worker, nil when there is none.
func (t *WorkerTokenize) healthy() *Worker {
	for _, w := range t.Pool.Workers() {
		if w.Healthy() {
			return w
		}
	}
	return nil
}

// ask is one round trip to wk's /tokenize.
func (t *WorkerTokenize) ask(ctx context.Context, wk *Worker, payload []byte) ([]uint32, error) {
	return tokenizeOn(ctx, t.Client, wk, payload, t.Timeout)
}

// workerCacheEntries bounds WorkerTokenize's cache of answers, in entries.
const workerCacheEntries = 4096

// cached and remember keep the latest answers by exact request: a retried
// or repeated prompt costs no round trip.
func (t *WorkerTokenize) cached(key string) ([]uint32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids, ok := t.cache[key]
	return ids, ok
}

func (t *WorkerTokenize) remember(key string, ids []uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cache == nil || len(t.cache) >= workerCacheEntries {
		t.cache = map[string][]uint32{} // forget all: simpler than LRU, and rare
	}
	t.cache[key] = ids
}

// tokenizeOn asks wk's POST /tokenize for payload's tokens; timeout 0 means 2 s.
func tokenizeOn(ctx context.Context, client *http.Client, wk *Worker, payload []byte, timeout time.Duration) ([]uint32, error) {
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
	resp, err := client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("router: tokenize on %s: %w", wk.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		why := string(bytes.TrimSpace(msg))
		switch {
		case resp.StatusCode == http.StatusNotFound:
			// vLLM and SGLang serve it; a router in front, or another
			// engine, may not.
			why = "it serves no POST /tokenize"
		case why == "":
			why = http.StatusText(resp.StatusCode)
		}
		return nil, fmt.Errorf("router: tokenize on %s: HTTP %d: %s", wk.Name, resp.StatusCode, why)
	}
	ids, err := parseTokenizeAnswer(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("router: tokenize on %s: %w", wk.Name, err)
	}
	return ids, nil
}

// parseTokenizeAnswer reads a /tokenize answer: vLLM's and SGLang's both
// carry the ids as "tokens" (vLLM adds count and max_model_len, SGLang
// count); SGLang's older servers answered "input_ids", also accepted.
func parseTokenizeAnswer(r io.Reader) ([]uint32, error) {
	var out struct {
		Tokens   *[]int64 `json:"tokens"`
		InputIDs *[]int64 `json:"input_ids"`
	}
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		return nil, fmt.Errorf("answer is not JSON: %s", oneLine(err))
	}
	src := out.Tokens
	if src == nil {
		src = out.InputIDs
	}
	if src == nil {
		return nil, errors.New("answer has no tokens")
	}
	ids := make([]uint32, len(*src))
	for i, id := range *src {
		if id < 0 || id > math.MaxUint32 {
			return nil, fmt.Errorf("answer has token id %d, outside 0 to 2^32-1", id)
		}
		ids[i] = uint32(id)
	}
	return ids, nil
}
