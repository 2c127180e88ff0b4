package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlens/kvlens/sim"
)

func TestWorkerTokenizeMatchesTheEmbeddedTokenizer(t *testing.T) {
	w, err := sim.NewServer(sim.ServerOptions{Name: "w0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	srv := httptest.NewServer(w)
	defer srv.Close()
	ws, _ := ParseWorkers([]string{srv.URL})
	remote := &WorkerTokenize{Pool: NewPool(ws), Client: http.DefaultClient}
	tests := []struct {
		name, path, body string
	}{
		{"a chat request is tokenized through the chat template", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a KV cache?"}]}`},
		{"a completion's prompt is tokenized as is", "/v1/completions", `{"model":"m","prompt":"Paged attention splits the cache into blocks."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, _ := Embedded{}.Tokens(context.Background(), tt.path, []byte(tt.body))
			got, err := remote.Tokens(context.Background(), tt.path, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("worker gave %d tokens, embedded %d; they must be equal", len(got), len(want))
			}
		})
	}
}

func TestWorkerTokenizeFailuresStillRoute(t *testing.T) {
	var worker http.HandlerFunc = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			http.Error(w, "tokenizer not loaded", 500)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: [DONE]\n\n"))
	}
	srv := httptest.NewServer(worker)
	defer srv.Close()
	ws, _ := ParseWorkers([]string{srv.URL})
	pool := NewPool(ws)
	tests := []struct {
		name    string
		tok     *WorkerTokenize
		wantErr string
	}{
		{"a worker's error is named", &WorkerTokenize{Pool: pool, Client: http.DefaultClient}, "HTTP 500: tokenizer not loaded"},
		{"a worker without the endpoint is said plainly", &WorkerTokenize{Pool: onePath(t, "/v1/completions"), Client: http.DefaultClient}, "HTTP 404: it serves no POST /tokenize"},
		{"an error without a body is named by its status", &WorkerTokenize{Pool: onePath(t, "/tokenize"), Client: http.DefaultClient}, "HTTP 502: Bad Gateway"},
		{"no healthy worker is said plainly", &WorkerTokenize{Pool: NewPool(nil), Client: http.DefaultClient}, "no healthy worker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.tok.Tokens(context.Background(), "/v1/completions", []byte(`{"prompt":"x"}`))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	// The proxy routes the request anyway, and counts it.
	px := NewProxy(NewRouter(pool, &RoundRobin{}, Config{}))
	px.SetTokenizer(&WorkerTokenize{Pool: pool, Client: http.DefaultClient})
	ts := httptest.NewServer(px)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: a tokenizer failure must not fail the request", resp.StatusCode)
	}
	if n := testutil.ToFloat64(px.Router().Metrics().TokenizeErrors); n != 1 {
		t.Fatalf("tokenize errors = %v, want 1", n)
	}
}

// onePath is a pool of one worker that answers 502 with no body on path
// and 404 with no body elsewhere.
func onePath(t *testing.T, path string) *Pool {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	ws, _ := ParseWorkers([]string{srv.URL})
	return NewPool(ws)
}
