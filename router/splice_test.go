package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tokenizer"
)

// countingWorker is a simulated worker of engine eng whose /tokenize
// calls are counted and recorded.
type countingWorker struct {
	srv      *httptest.Server
	calls    atomic.Int64
	mu       sync.Mutex
	payloads []string
}

func newCountingWorker(t *testing.T, eng *tokenizer.Engine) *countingWorker {
	t.Helper()
	w, err := sim.NewServer(sim.ServerOptions{Name: "w0", Tokenizer: eng})
	if err != nil {
		t.Fatal(err)
	}
	cw := &countingWorker{}
	cw.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			body, _ := io.ReadAll(r.Body)
			cw.calls.Add(1)
			cw.mu.Lock()
			cw.payloads = append(cw.payloads, string(body))
			cw.mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		w.ServeHTTP(rw, r)
	}))
	t.Cleanup(func() { cw.srv.Close(); w.Close() })
	return cw
}

func (cw *countingWorker) last() string {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.payloads[len(cw.payloads)-1]
}

func fixtureEngine(t *testing.T, name string) *tokenizer.Engine {
	t.Helper()
	e, err := tokenizer.LoadFiles(filepath.Join("..", "tokenizer", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// chatRequest is a chat request of msgs.
func chatRequest(msgs []tokenizer.Message) []byte {
	b, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 8})
	return b
}

// TestWorkerTokenizeSplicesFollowUps plays a conversation through the
// workers' /tokenize. For engines whose templates put special tokens
// (Llama 3, Qwen 2.5) or "\n<|" (kvlens) between messages, once the
// splicer has learned the template and passed its audits, a follow-up
// costs one round trip that carries its new messages only. The built-in
// Llama 3 template writes its headers as plain text, which o200k merges
// across message boundaries: the splicer sees it and asks whole chats.
// Either way every turn's tokens equal the whole chat's.
func TestWorkerTokenizeSplicesFollowUps(t *testing.T) {
	llama3Builtin, _ := tokenizer.NewEngine("o200k", "llama3")
	engines := []struct {
		name    string
		eng     *tokenizer.Engine
		splices bool
	}{
		{"Llama 3's template and tokenizer.json splice", fixtureEngine(t, "llama3"), true},
		{"Qwen 2.5's template and tokenizer.json splice", fixtureEngine(t, "qwen2.5"), true},
		{"kvlens's template with cl100k splices", tokenizer.Embedded, true},
		// sad path
		{"the built-in Llama 3 template, plain text to o200k, is asked whole", llama3Builtin, false},
	}
	const turns = 7
	for _, tt := range engines {
		t.Run(tt.name, func(t *testing.T) {
			cw := newCountingWorker(t, tt.eng)
			ws, _ := ParseWorkers([]string{"w=" + cw.srv.URL})
			wt := &WorkerTokenize{Pool: NewPool(ws), Client: http.DefaultClient}
			msgs := []tokenizer.Message{
				{Role: "system", Content: "You are a patient tutor. Answer in two sentences."},
				{Role: "user", Content: "Opening question: what does a paged KV cache keep?"},
			}
			for turn := 1; turn <= turns; turn++ {
				before := cw.calls.Load()
				got, err := wt.Tokens(context.Background(), "/v1/chat/completions", chatRequest(msgs))
				if err != nil {
					t.Fatal(err)
				}
				text, _ := tt.eng.Render(msgs)
				if want := tt.eng.Encode(text); !slices.Equal(got, want) {
					t.Fatalf("turn %d: %d tokens, want the whole chat's %d%s", turn, len(got), len(want), firstDiff(got, want))
				}
				trips := cw.calls.Load() - before
				if !tt.splices {
					if p := cw.last(); !strings.Contains(p, "Opening question") {
						t.Errorf("turn %d asked %s; want the whole chat", turn, p)
					}
				} else if turn > 1+auditSplices {
					if trips != 1 {
						t.Errorf("turn %d cost %d round trips, want 1", turn, trips)
					}
					if p := cw.last(); strings.Contains(p, "Opening question") || !strings.Contains(p, fmt.Sprintf("question %d", turn)) {
						t.Errorf("turn %d asked %s; want only its new messages", turn, p)
					}
				}
				msgs = append(msgs,
					tokenizer.Message{Role: "assistant", Content: fmt.Sprintf("Answer %d: it keeps keys and values.\nIn blocks.", turn)},
					tokenizer.Message{Role: "user", Content: fmt.Sprintf("Follow-up question %d: and then?", turn+1)})
			}
		})
	}
}

// TestWorkerTokenizeAuditCatchesATemplateThatBreaksSplicing plays a chat
// on a template that renders a head only once the chat is long, which the
// splicer's checks cannot see: its audit against the whole chat does, it
// answers the whole chat's tokens, and splices no more.
func TestWorkerTokenizeAuditCatchesATemplateThatBreaksSplicing(t *testing.T) {
	dir := t.TempDir()
	tj, _ := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "llama3", tokenizer.TokenizerJSON))
	os.WriteFile(filepath.Join(dir, tokenizer.TokenizerJSON), tj, 0o644)
	tmpl := `{% if messages|length > 4 %}LONG CHAT{% endif %}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>{% endif %}`
	cfg, _ := json.Marshal(map[string]string{"chat_template": tmpl})
	os.WriteFile(filepath.Join(dir, tokenizer.TokenizerConfig), cfg, 0o644)
	eng, err := tokenizer.LoadFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	cw := newCountingWorker(t, eng)
	ws, _ := ParseWorkers([]string{"w=" + cw.srv.URL})
	var said []string
	wt := &WorkerTokenize{Pool: NewPool(ws), Client: http.DefaultClient, Logf: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	msgs := []tokenizer.Message{{Role: "user", Content: "first"}}
	for turn := 1; turn <= 5; turn++ {
		got, err := wt.Tokens(context.Background(), "/v1/chat/completions", chatRequest(msgs))
		if err != nil {
			t.Fatal(err)
		}
		text, _ := eng.Render(msgs)
		if want := eng.Encode(text); !slices.Equal(got, want) {
			t.Fatalf("turn %d: %d tokens, want the whole chat's %d", turn, len(got), len(want))
		}
		msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: "ok"}, tokenizer.Message{Role: "user", Content: fmt.Sprintf("turn %d", turn+1)})
	}
	if len(said) != 1 || !strings.Contains(said[0], "whole round trip") {
		t.Errorf("said %q; want one line saying splicing is off", said)
	}
}

func TestFilesTokenizesAsTheEngine(t *testing.T) {
	eng := fixtureEngine(t, "llama3")
	msgs := []tokenizer.Message{{Role: "user", Content: "What is a KV cache?"}}
	text, _ := eng.Render(msgs)
	prompt, _ := eng.EncodePrompt("Once upon a time", 100)
	tests := []struct {
		name, path, body string
		want             []uint32
	}{
		{"a chat is rendered with the model's template, with no BOS added", "/v1/chat/completions", string(chatRequest(msgs)), eng.Encode(text)},
		{"a completion's prompt gets the model's BOS, as vLLM adds it", "/v1/completions", `{"prompt":"Once upon a time"}`, prompt},
		{"a prompt of token ids is taken as is", "/v1/completions", `{"prompt":[1,2,3]}`, []uint32{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Files{eng}.Tokens(context.Background(), tt.path, []byte(tt.body))
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Tokens = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
