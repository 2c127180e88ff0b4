package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/kvlens/kvlens/apierror"
	"github.com/kvlens/kvlens/sim"
)

const contentChunk = `data: {"choices":[{"delta":{"content":"a"}}]}` + "\n\n"

// cutAfter answers with the SSE bytes given, then dies as a crashed worker
// does.
func cutAfter(contentType, sent string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, sent)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

func TestProxyEndsACutStreamWithAnErrorEvent(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		sent        string
		// want is what the client reads, whole; wantCut says the client
		// sees the connection cut instead.
		want    string
		wantCut bool
	}{
		{
			"a stream cut between events ends with an error event naming the worker",
			"text/event-stream", contentChunk,
			contentChunk + `data: {"error":{"message":"router: worker a's stream broke mid-answer: unexpected EOF","type":"ServiceUnavailableError","param":null,"code":502}}` + "\n\n",
			false,
		},
		{
			"an event cut midway is dropped, so the error event parses",
			"text/event-stream", contentChunk + `data: {"choices":[{"del`,
			contentChunk + `data: {"error":{"message":"router: worker a's stream broke mid-answer: unexpected EOF","type":"ServiceUnavailableError","param":null,"code":502}}` + "\n\n",
			false,
		},
		{
			"events ended by CRLF pairs are passed on as whole events too",
			"text/event-stream; charset=utf-8", "data: {}\r\n\r\ndata: {\"x\"",
			"data: {}\r\n\r\n" + `data: {"error":{"message":"router: worker a's stream broke mid-answer: unexpected EOF","type":"ServiceUnavailableError","param":null,"code":502}}` + "\n\n",
			false,
		},
		// Sad path: a body that is not an event stream has no place for
		// an event, so the client sees the cut itself.
		{
			"a cut JSON body reaches the client as a cut",
			"application/json", `{"choices":[`,
			"", true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wk := httptest.NewServer(cutAfter(tt.contentType, tt.sent))
			defer wk.Close()
			px, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a="+wk.URL)
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
			if err != nil {
				t.Fatal(err)
			}
			got, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tt.wantCut {
				if rerr == nil {
					t.Fatalf("the client read a clean end (%q); a cut must reach it as a cut", got)
				}
			} else if rerr != nil || string(got) != tt.want {
				t.Fatalf("read %q, %v\nwant %q", got, rerr, tt.want)
			}
			waitFor(t, func() bool { return px.Router().Counts().InFlight == 0 })
			if st := px.Router().Workers()[0]; st.Errors != 1 {
				t.Fatalf("errors = %d, want the cut counted once", st.Errors)
			}
		})
	}
}

// TestACutStreamIsAnErrorToAnOpenAIClient proves an OpenAI SDK (go-openai)
// reports the cut as an error with the router's message, not as a short
// answer.
func TestACutStreamIsAnErrorToAnOpenAIClient(t *testing.T) {
	wk := httptest.NewServer(cutAfter("text/event-stream", contentChunk))
	defer wk.Close()
	_, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a="+wk.URL)
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = srv.URL + "/v1"
	stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, Stream: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "stream broke mid-answer") {
		t.Fatalf("the client's stream ended with %v; want the router's error", err)
	}
}

func TestProxyPassesUpstreamHeaders(t *testing.T) {
	wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Retry-After", "7")
		h.Set("X-Request-Id", "req-1")
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "one connection only")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Content-Type", "application/json")
		apierror.Write(w, http.StatusTooManyRequests, "slow down")
	}))
	defer wk.Close()
	_, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a="+wk.URL)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tests := []struct {
		name, header, want string
	}{
		{"Retry-After reaches the client, so it backs off as the worker asked", "Retry-After", "7"},
		{"the worker's request id reaches the client", "X-Request-Id", "req-1"},
		{"the content type is the worker's", "Content-Type", "application/json"},
		{"the router names the worker", HeaderWorker, "a"},
		// Sad path: headers about the worker's connection stay there.
		{"Keep-Alive is not passed on", "Keep-Alive", ""},
		{"a header the worker's Connection names is not passed on", "X-Hop", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resp.Header.Get(tt.header); got != tt.want {
				t.Fatalf("%s = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"type":"RateLimitError"`) {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

// TestTheRouterSurfaceIsWhatClientsExpect drives the router in front of a
// simulated worker and checks what an OpenAI client reads.
func TestTheRouterSurfaceIsWhatClientsExpect(t *testing.T) {
	w, err := sim.NewServer(sim.ServerOptions{Name: "s", Profile: sim.MustProfile(sim.DefaultProfile)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wk := httptest.NewServer(w)
	defer wk.Close()
	_, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a="+wk.URL)
	tests := []struct {
		name, method, path, body string
		want                     int
		// wantType is the error's type; empty for a success.
		wantType string
		wantIn   string
	}{
		{"an unknown model is a 404 in vLLM's shape", "POST", "/v1/chat/completions",
			`{"model":"gpt-4","messages":[{"role":"user","content":"x"}],"max_tokens":1}`, 404, "NotFoundError", "The model `gpt-4` does not exist."},
		{"content given as text parts is served", "POST", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":1}`, 200, "", `"chat.completion"`},
		{"/v1/models is a list", "GET", "/v1/models", "", 200, "", `"object":"list"`},
		// Sad path: the router's own refusals carry a type too.
		{"an unknown path is a NotFoundError", "GET", "/v1/nothing", "", 404, "NotFoundError", "no route"},
		{"a prompt past the context length is a BadRequestError", "POST", "/v1/completions",
			`{"prompt":"` + strings.Repeat("word ", 70000) + `"}`, 400, "BadRequestError", "context length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(string(raw), tt.wantIn) {
				t.Fatalf("got %d %.300s, want %d containing %s", resp.StatusCode, raw, tt.want, tt.wantIn)
			}
			if tt.wantType == "" {
				return
			}
			var e apierror.Response
			if err := json.Unmarshal(raw, &e); err != nil || e.Error.Type != tt.wantType || e.Error.Code != tt.want {
				t.Fatalf("error body %s (%v), want type %s", raw, err, tt.wantType)
			}
		})
	}
}

// TestTextPartsAreTokenizedAsTheirText proves the router hashes a prompt
// sent as text parts exactly as the same prompt sent as a string.
func TestTextPartsAreTokenizedAsTheirText(t *testing.T) {
	s := PromptTokens("/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":"a KV cache\nand a block"}]}`))
	p := PromptTokens("/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a KV cache"},{"type":"text","text":"and a block"}]}]}`))
	if len(s) == 0 || len(s) != len(p) {
		t.Fatalf("string prompt: %d tokens, parts: %d", len(s), len(p))
	}
	for i := range s {
		if s[i] != p[i] {
			t.Fatalf("token %d differs: %d and %d", i, s[i], p[i])
		}
	}
	// Sad path: an image part cannot be tokenized here; the worker judges.
	if ids := PromptTokens("/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`)); ids != nil {
		t.Fatalf("an image part gave %d tokens", len(ids))
	}
}

// blankLineEnds returns where each blank line of an SSE stream ends, a
// CRLF counted whole; a blank line is a line end at the start of a line.
func blankLineEnds(p []byte) (ends []int) {
	begin := 0
	if bytes.HasPrefix(p, []byte("\xef\xbb\xbf")) {
		begin = 3 // a byte-order mark, which is not part of the first line
	}
	for i := begin; i < len(p); i++ {
		if p[i] != '\r' && p[i] != '\n' {
			continue
		}
		end := i + 1
		if p[i] == '\r' && end < len(p) && p[end] == '\n' {
			end++
		}
		if i == begin {
			ends = append(ends, end)
		}
		begin = end
		i = end - 1
	}
	return ends
}

// FuzzProxyPassesWholeEvents checks the proxy passes on whole events only,
// whatever the line ends: what it keeps back of an SSE stream (the
// scanner's Partial), written in two pieces, starts at the end of the last
// blank line, or is the whole stream when there is none.
func FuzzProxyPassesWholeEvents(f *testing.F) {
	for _, s := range []string{"", "data: {}\n\n", "data: {}\n\ndata: {\"x", "data: a\r\n\r\ndata: b\n\n", "\n\n\n", "\r\n\r\n\r", "data: a\r\rdata: b\n\r\ndata: c\r"} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, p []byte, cut int) {
		cut = min(max(cut, 0), len(p))
		s := &streamScanner{}
		s.Write(p[:cut])
		s.Write(p[cut:])
		want := len(p)
		if ends := blankLineEnds(p); len(ends) > 0 {
			want = len(p) - ends[len(ends)-1]
		}
		if s.isPlain {
			want = 0 // a JSON body, passed on as it comes
		}
		if got := s.Partial(); got != want {
			t.Fatalf("keeps back %d bytes, %q; want %d", got, p[len(p)-min(got, len(p)):], want)
		}
	})
}
