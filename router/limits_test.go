package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlens/kvlens/tokenizer"
)

// countingTokenizer tokenizes as the embedded tokenizer does, counting its
// calls, so a test can prove a request was refused without tokenizing.
type countingTokenizer struct{ calls atomic.Int64 }

func (c *countingTokenizer) Tokens(_ context.Context, path string, body []byte) ([]uint32, error) {
	c.calls.Add(1)
	return PromptTokens(path, body), nil
}

// chatOf is a chat request body of one user message.
func chatOf(content string) string {
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": []tokenizer.Message{{Role: "user", Content: content}}})
	return string(b)
}

// post sends body to path and returns the status and answer.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func TestProxyBoundsTheWorkOfEachRequest(t *testing.T) {
	const limit = 1000 // tokens: Config.MaxModelLen, as no worker reports one
	var served atomic.Int64
	wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		usageSSE(0, nil)(w, r)
	}))
	defer wk.Close()
	px, srv := newTestProxy(t, &RoundRobin{}, Config{MaxModelLen: limit}, wk.URL)
	tok := &countingTokenizer{}
	px.SetTokenizer(tok)
	cap := tokenizer.BodyLimit(limit)
	prose := func(tokens int) string { return strings.Repeat(" cache", tokens) } // one token a word
	refused := map[string]float64{}                                              // counted so far, by reason
	tests := []struct {
		name       string
		path, body string
		want       int
		wantMsg    string
		tokenized  bool // the tokenizer was asked
		forwarded  bool // a worker got the request
	}{
		{"a chat prompt just under the limit is served", "/v1/chat/completions", chatOf(prose(limit - 20)), 200, "Paged", true, true},
		{"a completion prompt just under the limit is served", "/v1/completions", `{"prompt":"` + prose(limit-20) + `"}`, 200, "Paged", true, true},
		// sad path
		{"a chat prompt too long by its bytes is a 400 without tokenizing", "/v1/chat/completions",
			chatOf(strings.Repeat("a", limit*tokenizer.MaxTokenBytes+1)), 400, "no token is longer than 128 bytes", false, false},
		{"a completion prompt too long by its bytes is a 400 without tokenizing", "/v1/completions",
			`{"prompt":"` + strings.Repeat("a", limit*tokenizer.MaxTokenBytes+1) + `"}`, 400, "maximum context length is 1000 tokens", false, false},
		{"a chat prompt too long by its tokens is a 400 and never reaches a worker", "/v1/chat/completions",
			chatOf(prose(limit + 1)), 400, "maximum context length is 1000 tokens", true, false},
		{"a body over the cap is a 413 without tokenizing", "/v1/chat/completions",
			chatOf(strings.Repeat("a", int(cap))), 413, fmt.Sprintf("larger than %d bytes", cap), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, fwd := tok.calls.Load(), served.Load()
			status, raw := post(t, srv.URL+tt.path, tt.body)
			if status != tt.want || !strings.Contains(raw, tt.wantMsg) || strings.Count(strings.TrimSpace(raw), "\n") > 0 && status != 200 {
				t.Fatalf("got %d %.300s, want %d containing %q on one line", status, raw, tt.want, tt.wantMsg)
			}
			if got := tok.calls.Load() > calls; got != tt.tokenized {
				t.Errorf("tokenized = %v, want %v", got, tt.tokenized)
			}
			if got := served.Load() > fwd; got != tt.forwarded {
				t.Errorf("forwarded = %v, want %v", got, tt.forwarded)
			}
			if tt.want != 200 {
				reason := map[int]string{400: "too_long", 413: "too_large"}[tt.want]
				if got := testutil.ToFloat64(px.Router().Metrics().Refused.WithLabelValues(reason)); got != refused[reason]+1 {
					t.Errorf("kvlens_router_refused_total{reason=%q} = %v, want %v", reason, got, refused[reason]+1)
				}
				refused[reason]++
			}
			// The proxy keeps serving.
			if status, raw := post(t, srv.URL+"/v1/chat/completions", chatOf("hi")); status != 200 {
				t.Fatalf("a small request after it got %d %s", status, raw)
			}
		})
	}
}

func TestEmbeddedTokenizerStopsPastTheLimit(t *testing.T) {
	const limit = 1000
	wk := httptest.NewServer(usageSSE(0, nil))
	defer wk.Close()
	_, srv := newTestProxy(t, &RoundRobin{}, Config{MaxModelLen: limit}, wk.URL)
	tests := []struct {
		name    string
		body    string
		want    int
		wantMsg string
	}{
		{"a prompt just under the limit is served", chatOf(strings.Repeat(" cache", limit-20)), 200, "Paged"},
		// sad path
		{"a prompt a few tokens over the limit is a 400", chatOf(strings.Repeat(" cache", limit)), 400, "more than 1000 tokens"},
		{"a prompt far over the limit, not by its bytes, is a 400 once tokenizing passes it", chatOf(strings.Repeat(" cache", 20*limit)), 400, "tokenizing stopped at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := post(t, srv.URL+"/v1/chat/completions", tt.body)
			if status != tt.want || !strings.Contains(raw, tt.wantMsg) {
				t.Fatalf("got %d %.300s, want %d containing %q", status, raw, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestAWorkersRefusalTokenizesNothingMore(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusBadRequest, "prompt too long")
	}))
	defer refuse.Close()
	serve := httptest.NewServer(usageSSE(0, nil))
	defer serve.Close()
	tests := []struct {
		name       string
		worker     string
		want       int
		wantRestIn bool // the message's tokens are cached: its rest was tokenized
	}{
		{"a served request tokenizes its prompt's rest after the first token", serve.URL, 200, true},
		// sad path
		{"a refused request tokenizes nothing after the worker's answer", refuse.URL, 400, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px, srv := newTestProxy(t, &RoundRobin{}, Config{}, tt.worker)
			// About 2,000 tokens: the decision needs only the first piece,
			// as no worker holds any block of it.
			msg := tokenizer.Message{Role: "user", Content: fmt.Sprintf("case %d:%s", i, strings.Repeat(" cache", 2000))}
			if status, raw := post(t, srv.URL+"/v1/chat/completions", chatOf(msg.Content)); status != tt.want {
				t.Fatalf("got %d %s, want %d", status, raw, tt.want)
			}
			px.bg.Wait()
			if _, cached := chatTokens.get(segment(msg)); cached != tt.wantRestIn {
				t.Fatalf("the prompt's rest tokenized = %v, want %v", cached, tt.wantRestIn)
			}
			if status, _ := post(t, srv.URL+"/v1/chat/completions", chatOf("hi")); status != tt.want {
				t.Fatalf("a small request after it got %d, want %d", status, tt.want)
			}
		})
	}
}

func TestMaxModelLenComesFromWorkersThenTheFlag(t *testing.T) {
	models := func(n int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/models":
				fmt.Fprintf(w, `{"object":"list","data":[{"id":"m","max_model_len":%d}]}`, n)
			case "/health":
			default:
				http.NotFound(w, r)
			}
		}))
	}
	small, big := models(4096), models(32768)
	defer small.Close()
	defer big.Close()
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer silent.Close()
	tests := []struct {
		name     string
		flag     int
		workers  []string
		want     int
		wantFrom string
	}{
		{"the largest worker's report wins over the flag", 1000, []string{small.URL, big.URL}, 32768, ModelLenWorker},
		{"with no worker reporting, the flag applies", 1000, []string{silent.URL}, 1000, ModelLenFlag},
		{"with neither, the default applies", 0, []string{silent.URL}, DefaultMaxModelLen, ModelLenDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := ParseWorkers(tt.workers)
			if err != nil {
				t.Fatal(err)
			}
			pool := NewPool(ws)
			rt := NewRouter(pool, &RoundRobin{}, Config{MaxModelLen: tt.flag})
			pool.CheckHealth(context.Background(), http.DefaultClient, 5*time.Second)
			if n, from := rt.MaxModelLen(); n != tt.want || from != tt.wantFrom {
				t.Fatalf("MaxModelLen = %d (%s), want %d (%s)", n, from, tt.want, tt.wantFrom)
			}
		})
	}
}

func TestParseModelsReport(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    int
		wantErr string
	}{
		{"vLLM's answer gives its model's max_model_len", `{"object":"list","data":[{"id":"m","object":"model","max_model_len":16384}]}`, 16384, ""},
		{"several models give the largest", `{"data":[{"id":"a","max_model_len":4096},{"id":"b","max_model_len":8192}]}`, 8192, ""},
		{"a model without one is skipped", `{"data":[{"id":"a"},{"id":"b","max_model_len":2048}]}`, 2048, ""},
		// sad path
		{"no model with a max_model_len is an error", `{"data":[{"id":"a"}]}`, 0, "no model"},
		{"a fraction is an error", `{"data":[{"max_model_len":1.5}]}`, 0, "not a whole number"},
		{"zero is an error", `{"data":[{"max_model_len":0}]}`, 0, "not a whole number"},
		{"an absurd length is an error", `{"data":[{"max_model_len":99999999999}]}`, 0, "not a whole number"},
		{"a string is an error", `{"data":[{"max_model_len":"16k"}]}`, 0, "not a whole number"},
		{"not JSON is an error", `<html>`, 0, "not the JSON object"},
		{"data of the wrong type is an error", `{"data":{"max_model_len":5}}`, 0, "not the JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseModelsReport([]byte(tt.body))
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("got %d, %v; want %d", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %d, %v; want one line containing %q", got, err, tt.wantErr)
			}
		})
	}
}

func FuzzParseModelsReport(f *testing.F) {
	f.Add([]byte(`{"object":"list","data":[{"id":"m","max_model_len":16384}]}`))
	f.Add([]byte(`{"data":[{"id":"a"},{"id":"b","max_model_len":2048}]}`))
	f.Add([]byte(`{"data":[{"max_model_len":1e3}]}`))
	f.Add([]byte(`{"data":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := ParseModelsReport(body)
		if err != nil {
			if n != 0 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q with %d: want 0 and one line", err, n)
			}
			return
		}
		if n < 1 || n > MaxModelLenLimit {
			t.Fatalf("accepted max_model_len %d, outside 1..%d", n, MaxModelLenLimit)
		}
	})
}
