package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/kvlens/kvlens/tokenizer"
)

// Work per request is bounded by the model's context length, max_model_len:
// the longest prompt plus output a worker accepts, in tokens. A prompt
// longer than the largest worker's is refused with 400 before it is
// tokenized whole, and request bodies are capped at tokenizer.BodyLimit of
// it, the most such a prompt can need, with 413.
//
// The router learns max_model_len from each worker's GET /v1/models, which
// in vLLM (and kvlens's simulated worker) gives it per model, on the same
// schedule as the batch capacity. A worker that reports none leaves the
// router's --max-model-len, or else DefaultMaxModelLen.

// DefaultMaxModelLen is the context length assumed when no worker reports
// one and no flag sets it, in tokens: Llama 3.1's, the seeds' model.
const DefaultMaxModelLen = 131072

// MaxModelLenLimit bounds a believable context length, in tokens, a
// worker's report or --max-model-len: no served model has a context of 16M
// tokens, so a larger number is garbage, and request bodies are capped
// from it.
const MaxModelLenLimit = 1 << 24

// Where the context length the router enforces came from, as MaxModelLen
// says.
const (
	// ModelLenWorker is the largest any worker reports.
	ModelLenWorker = "worker"
	// ModelLenFlag is the router's --max-model-len.
	ModelLenFlag = "flag"
	// ModelLenDefault is DefaultMaxModelLen: nothing else said.
	ModelLenDefault = "default"
)

// MaxModelLen returns the longest prompt the router lets through, in
// tokens, and where that came from: the largest max_model_len any worker
// reports, else Config.MaxModelLen, else DefaultMaxModelLen.
func (r *Router) MaxModelLen() (int, string) {
	n := 0
	for _, w := range r.pool.Workers() {
		n = max(n, int(w.maxModelLen.Load()))
	}
	switch {
	case n > 0:
		return n, ModelLenWorker
	case r.maxModelLen > 0:
		return r.maxModelLen, ModelLenFlag
	}
	return DefaultMaxModelLen, ModelLenDefault
}

// ReportedMaxModelLen is the max_model_len the worker last reported on GET
// /v1/models, in tokens; 0 before it has reported one.
func (w *Worker) ReportedMaxModelLen() int { return int(w.maxModelLen.Load()) }

// ParseModelsReport reads the largest max_model_len, in tokens, from a
// worker's answer to GET /v1/models: {"data":[{"id":…,"max_model_len":N},…]}.
// Its errors are one line.
func ParseModelsReport(body []byte) (int, error) {
	var doc struct {
		Data []struct {
			MaxModelLen json.RawMessage `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, fmt.Errorf("answer is not the JSON object expected: %s", oneLine(err))
	}
	n := 0
	for i, m := range doc.Data {
		if len(m.MaxModelLen) == 0 || string(m.MaxModelLen) == "null" {
			continue
		}
		v, err := strconv.ParseInt(string(m.MaxModelLen), 10, 64)
		if err != nil || v < 1 || v > MaxModelLenLimit {
			return 0, fmt.Errorf("data[%d].max_model_len is %s, not a whole number from 1 to %d", i, snippet(m.MaxModelLen), MaxModelLenLimit)
		}
		n = max(n, int(v))
	}
	if n == 0 {
		return 0, fmt.Errorf("no model in the answer has a max_model_len")
	}
	return n, nil
}

// learnMaxModelLen asks w's GET /v1/models, until ctx ends, for its
// max_model_len and records it. A worker that reports nothing usable keeps
// what it reported before; a change is logged.
func learnMaxModelLen(ctx context.Context, client *http.Client, w *Worker, logf func(string, ...any)) {
	n, err := askMaxModelLen(ctx, client, w)
	if err != nil {
		return // most OpenAI servers say nothing of it; the fallback applies
	}
	if old := w.maxModelLen.Swap(int64(n)); old != int64(n) && logf != nil {
		logf("router: worker %s reports max_model_len %d tokens (GET /v1/models)", w.Name, n)
	}
}

func askMaxModelLen(ctx context.Context, client *http.Client, w *Worker) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL.JoinPath("/v1/models").String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v1/models: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCapacityBody+1))
	if err != nil || len(body) > maxCapacityBody {
		return 0, fmt.Errorf("GET /v1/models: answer unreadable or larger than %d bytes", maxCapacityBody)
	}
	return ParseModelsReport(body)
}

// bodyLimit is the largest request body the proxy reads now, in bytes.
func (px *Proxy) bodyLimit() (int64, int) {
	n, _ := px.rt.MaxModelLen()
	return tokenizer.BodyLimit(n), n
}
