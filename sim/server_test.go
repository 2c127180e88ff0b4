package sim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// instant is a timing with no delays, for tests of behaviour, not latency.
var instant = Timing{}

func newTestClient(t *testing.T) (*openai.Client, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(NewServer("w0", DefaultModel, instant))
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = srv.URL + "/v1"
	return openai.NewClientWithConfig(cfg), srv
}

func TestChatCompletionStreamReportsUsage(t *testing.T) {
	client, _ := newTestClient(t)
	req := openai.ChatCompletionRequest{
		Model:         DefaultModel,
		Messages:      []openai.ChatCompletionMessage{{Role: "user", Content: "Explain the KV cache."}},
		MaxTokens:     50,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	stream, err := client.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var text strings.Builder
	var usage *openai.Usage
	chunks := 0
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break // go-openai reports [DONE] as io.EOF
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage != nil {
			usage = resp.Usage
			continue
		}
		chunks++
		text.WriteString(resp.Choices[0].Delta.Content)
	}
	if usage == nil {
		t.Fatal("no usage chunk although include_usage was set")
	}
	if usage.CompletionTokens != 50 || chunks != 50 {
		t.Errorf("completion tokens = %d over %d chunks, want 50 (max_tokens caps the drawn length)", usage.CompletionTokens, chunks)
	}
	if usage.PromptTokens < 5 {
		t.Errorf("prompt tokens = %d, want the rendered prompt's count", usage.PromptTokens)
	}
	if !strings.Contains(text.String(), " ") {
		t.Errorf("generated text %q is not prose", text.String())
	}
}

func TestChatCompletionNonStreaming(t *testing.T) {
	client, _ := newTestClient(t)
	resp, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:     DefaultModel,
		Messages:  []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
		MaxTokens: 12,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CompletionTokens != 12 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("got %d tokens, text %q", resp.Usage.CompletionTokens, resp.Choices[0].Message.Content)
	}
}

func TestStreamEndsWithDone(t *testing.T) {
	_, srv := newTestClient(t)
	body := `{"model":"m","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type = %q", got)
	}
	if !strings.HasSuffix(string(raw), "data: [DONE]\n\n") {
		t.Errorf("stream does not end with [DONE]: %q", raw)
	}
	if n := strings.Count(string(raw), "data: {"); n != 3 {
		t.Errorf("got %d data chunks, want 3 (no usage chunk without include_usage)", n)
	}
}

func TestBadRequestsGetOneLineErrors(t *testing.T) {
	_, srv := newTestClient(t)
	tests := []struct {
		name, method, path, body string
		want                     int
		wantMsg                  string
	}{
		{"malformed JSON is a 400", "POST", "/v1/chat/completions", `{"messages":`, 400, "not valid JSON"},
		{"no messages is a 400", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "at least one message"},
		{"unknown role is a 400", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "not a chat role"},
		{"negative max_tokens is a 400", "POST", "/v1/chat/completions", `{"max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, 400, "must not be negative"},
		{"unknown path is a 404", "GET", "/v2/nothing", "", 404, "no route"},
		{"health answers ok", "GET", "/health", "", 200, "ok"},
		{"models lists the served model", "GET", "/v1/models", "", 200, DefaultModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want || !strings.Contains(string(raw), tt.wantMsg) {
				t.Fatalf("got %d %s, want %d containing %q", resp.StatusCode, raw, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestTimingGrowsWithPrompt(t *testing.T) {
	tm := DefaultTiming
	short, long := tm.firstToken(100), tm.firstToken(4000)
	if long <= short {
		t.Fatalf("first token at 4000 tokens (%v) not later than at 100 (%v)", long, short)
	}
	if want := 230 * time.Millisecond; long != want {
		t.Fatalf("first token for 4000 tokens = %v, want %v", long, want)
	}
}

func TestClientDisconnectStopsStream(t *testing.T) {
	s := NewServer("w0", DefaultModel, Timing{InterToken: time.Hour})
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	resp.Body.Read(buf) // the first token arrives at once
	cancel()
	resp.Body.Close()
	// The handler must return; httptest.Server.Close blocks until it does.
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("stream handler still running 5 s after the client left")
	}
}

func FuzzParseChatRequest(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`)
	f.Add(`{"messages":[{"role":"robot"}]}`)
	f.Add(`{"max_completion_tokens":9,"messages":[{"role":"system","content":""}]}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		req, err := parseChatRequest(strings.NewReader(body))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if len(req.Messages) == 0 || req.MaxTokens <= 0 {
			t.Fatalf("accepted request with %d messages and max_tokens %d", len(req.Messages), req.MaxTokens)
		}
	})
}
