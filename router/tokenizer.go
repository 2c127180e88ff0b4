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
	"slices"
	"sync"
	"sync/atomic"
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

	mu    sync.Mutex
	cache map[string][]uint32 // request payload -> tokens
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
	key := string(payload)
	if ids, ok := t.cached(key); ok {
		return ids, nil
	}
	ids, err := tokenizeOn(ctx, t.Client, wk, payload, t.Timeout)
	if err == nil {
		t.remember(key, ids)
	}
	return ids, err
}

// workerCacheEntries bounds WorkerTokenize's cache of answers, in entries.
const workerCacheEntries = 4096

// cached and remember keep the latest answers by exact request: a retried
// or repeated prompt costs no round trip. A follow-up turn still costs one
// round trip for the whole chat: an engine's template may render a message
// differently once it is no longer last (Llama 3 adds the assistant header
// only at the end) and BPE may merge across a message boundary, so reusing
// a prefix's tokens would be exact only for templates known to allow it.
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
		return nil, fmt.Errorf("router: tokenize on %s: HTTP %d: %s", wk.Name, resp.StatusCode, bytes.TrimSpace(msg))
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

// Auto tokenizes with the embedded tokenizer while it matches the workers'
// own, and with the workers' /tokenize once one does not: --tokenizer auto.
// Choose probes every healthy worker at start, and Check a worker when it
// is (re)admitted; a mismatch switches to the workers' tokenizer for good.
type Auto struct {
	// Worker asks the workers' /tokenize once Auto has switched.
	Worker *WorkerTokenize
	// Model is the model name the probe asks for; empty sends none.
	Model string

	useWorker atomic.Bool
}

var _ Tokenizer = (*Auto)(nil)

// IsEmbedded reports whether Auto tokenizes with the embedded tokenizer.
func (a *Auto) IsEmbedded() bool { return !a.useWorker.Load() }

// Tokens implements Tokenizer.
func (a *Auto) Tokens(ctx context.Context, path string, body []byte) ([]uint32, error) {
	if a.useWorker.Load() {
		return a.Worker.Tokens(ctx, path, body)
	}
	return Embedded{}.Tokens(ctx, path, body)
}

// probeChat is the sample chat Auto compares: a system prompt, a turn and
// an answer, with punctuation, digits and a newline, so that templates and
// BPEs that differ anywhere common tend to differ here.
var probeChat = []tokenizer.Message{
	{Role: "system", Content: "You are a helpful assistant. Answer briefly."},
	{Role: "user", Content: "What's 12 + 30? Reply with the number,\nthen a haiku."},
	{Role: "assistant", Content: "42.\nQuiet prefix cache / blocks remembered, reused / the router sees all"},
	{Role: "user", Content: "Thanks!"},
}

// Check probes wk: it compares the embedded tokens of a sample chat with
// wk's /tokenize answer and switches to the workers' tokenizer when they
// differ. It returns one line saying what it found; an error when wk could
// not be asked, which changes nothing.
func (a *Auto) Check(ctx context.Context, wk *Worker) (string, error) {
	msgs, _ := json.Marshal(probeChat)
	payload, _ := json.Marshal(tokenizeBody{Model: a.Model, Messages: msgs})
	theirs, err := tokenizeOn(ctx, a.Worker.Client, wk, payload, a.Worker.Timeout)
	if err != nil {
		return "", err
	}
	ours := ChatTokens(probeChat)
	if slices.Equal(ours, theirs) {
		return fmt.Sprintf("%s tokenizes a sample chat exactly as the embedded tokenizer (%d tokens)", wk.Name, len(ours)), nil
	}
	a.useWorker.Store(true)
	return fmt.Sprintf("%s tokenizes a sample chat differently from the embedded tokenizer (%d tokens against %d%s)", wk.Name, len(theirs), len(ours), firstDiff(ours, theirs)), nil
}

// firstDiff describes where two token lists part, as ", first at token 3".
func firstDiff(a, b []uint32) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf(", first differing at token %d", i)
		}
	}
	return ""
}

// Choose probes every healthy worker (see Check) and returns one line
// naming the tokenizer chosen and why.
func (a *Auto) Choose(ctx context.Context, pool *Pool) string {
	var why, failed []string
	for _, wk := range pool.Workers() {
		if !wk.Healthy() {
			continue
		}
		line, err := a.Check(ctx, wk)
		if err != nil {
			failed = append(failed, oneLine(err))
			continue
		}
		why = append(why, line)
		if !a.IsEmbedded() {
			break // one mismatch decides
		}
	}
	switch {
	case !a.IsEmbedded():
		return "tokenizer auto: worker (each worker's /tokenize): " + why[len(why)-1]
	case len(why) > 0:
		return "tokenizer auto: embedded (cl100k, kvlens template): every worker asked matches; " + why[0]
	case len(failed) > 0:
		return "tokenizer auto: embedded, unverified: " + failed[0]
	}
	return "tokenizer auto: embedded, unverified: no healthy worker to ask yet"
}
