package router

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/kvlens/kvlens/tokenizer"
)

// wholePrompt tokenizes a body's prompt the plain way, one call over the
// whole text, with none of the router's shortcuts (the message cache, the
// byte bound, stopping at a limit): what the router's answer must agree with.
// ok is false when the body holds no prompt the router reads.
func wholePrompt(path string, body []byte) (ids []uint32, ok bool) {
	var b struct {
		Messages []tokenizer.Message `json:"messages"`
		Prompt   json.RawMessage     `json:"prompt"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil, false
	}
	if path == "/v1/chat/completions" {
		if len(b.Messages) == 0 {
			return nil, false
		}
		return tokenizer.Encode(tokenizer.RenderChat(b.Messages)), true
	}
	// One prompt, in any of the OpenAI API's four shapes.
	var s string
	var texts []string
	var batch [][]uint32
	switch {
	case json.Unmarshal(b.Prompt, &s) == nil:
		return tokenizer.Encode(s), true
	case json.Unmarshal(b.Prompt, &texts) == nil && len(texts) == 1:
		return tokenizer.Encode(texts[0]), true
	case json.Unmarshal(b.Prompt, &ids) == nil:
		return ids, len(ids) > 0
	case json.Unmarshal(b.Prompt, &batch) == nil && len(batch) == 1:
		return batch[0], len(batch[0]) > 0
	}
	return nil, false
}

// FuzzRequestTokens feeds any client body, on either endpoint and under any
// token limit, to the two ways the router reads a prompt: promptTokens (the
// shared-tokenizer path) and Proxy.request (the decision's path, which may
// tokenize only a first piece and leave the rest for later). Neither may
// panic; each must give the prompt's tokens exactly, and refuse a prompt
// exactly when it has more tokens than the limit.
func FuzzRequestTokens(f *testing.F) {
	f.Add(true, []byte(`{"messages":[{"role":"user","content":"Why is the sky blue?"}]}`), 0)
	f.Add(true, []byte(`{"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`), 8)
	f.Add(true, []byte(`{"messages":[]}`), 4)
	f.Add(false, []byte(`{"prompt":"Once upon a time"}`), 3)
	f.Add(false, []byte(`{"prompt":[1,2,3,4]}`), 3)
	f.Add(false, []byte(`{"prompt":[1,2,-3]}`), 0)
	f.Add(false, []byte(`{"prompt":{"x":1}}`), 1)
	f.Add(false, []byte(`{"prompt":["Once upon a time"]}`), 0)
	f.Add(false, []byte(`{"prompt":[[5,6,7]]}`), 2)
	f.Add(false, []byte(`{"prompt":["one","two"]}`), 0)
	f.Add(false, []byte(`{"prompt":[]}`), 0)
	f.Add(true, []byte(`{"messages":[{"role":"user","content":"\ud800 bad \xff"}]}`), 2)
	f.Add(true, []byte(`not json`), 1)
	px := NewProxy(NewRouter(NewPool(nil), &KV{Weight: 1}, Config{}))
	f.Fuzz(func(t *testing.T, chat bool, body []byte, limit int) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		if limit < 0 || limit > 1<<16 {
			limit = 0
		}
		want, ok := wholePrompt(path, body)
		fits := limit == 0 || len(want) <= limit
		var many *tokenizer.TooManyPiecesError
		if chat && limit > 0 && errors.As(tokenizer.CheckPieces(body, limit), &many) {
			// Refused before decoding, by its messages and parts: not a
			// prompt judged by its tokens. That rule is CheckPieces's test.
			return
		}

		ids, err := promptTokens(path, body, limit)
		var tooLong *tokenizer.TooLongError
		switch {
		case !ok:
			if ids != nil || err != nil {
				t.Fatalf("promptTokens read a prompt from a body without one: %v, %v", ids, err)
			}
		case !fits:
			if !errors.As(err, &tooLong) {
				t.Fatalf("promptTokens let %d tokens past a limit of %d (err %v)", len(want), limit, err)
			}
		case err != nil:
			t.Fatalf("promptTokens refused %d tokens under a limit of %d: %v", len(want), limit, err)
		case !slices.Equal(ids, want):
			t.Fatalf("promptTokens gave %v, the prompt is %v", ids, want)
		}

		reqLimit := limit
		if reqLimit == 0 {
			reqLimit = 1 << 30
		}
		r := httptest.NewRequest("POST", path, nil)
		req, rest, err := px.request(r, body, reqLimit)
		switch {
		case !ok:
			if err != nil || req == nil || req.TokenIDs != nil {
				t.Fatalf("request tokenized a body without a prompt: %+v, %v", req, err)
			}
		case !fits:
			if !errors.As(err, &tooLong) {
				t.Fatalf("request let %d tokens past a limit of %d (err %v)", len(want), limit, err)
			}
		case err != nil:
			t.Fatalf("request refused %d tokens under a limit of %d: %v", len(want), limit, err)
		default:
			got := req.TokenIDs
			if rest != nil {
				if !slices.Equal(got, want[:min(len(got), len(want))]) {
					t.Fatalf("the decision's tokens %v are not the start of the prompt's %v", got, want)
				}
				got = rest()
			}
			if !slices.Equal(got, want) {
				t.Fatalf("request gave %v, the prompt is %v", got, want)
			}
		}
	})
}

// TestCompletionPromptShapes sends one prompt in each of the OpenAI API's
// shapes to the decision's path and to each tokenizer the router can use,
// the workers' /tokenize among them (which, like vLLM's, reads a string
// only): each must route on the prompt's own tokens, so that a client that
// sends ids keeps its cache affinity.
func TestCompletionPromptShapes(t *testing.T) {
	const text = "Summarise the history of the printing press in three sentences."
	ids := tokenizer.Encode(text)
	idsJSON, _ := json.Marshal(ids)
	var asked []string
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt string `json:"prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"prompt must be a string"}`, http.StatusBadRequest)
			return
		}
		asked = append(asked, req.Prompt)
		json.NewEncoder(w).Encode(map[string]any{"tokens": tokenizer.Encode(req.Prompt)})
	}))
	defer worker.Close()
	ws, err := ParseWorkers([]string{"a=" + worker.URL})
	if err != nil {
		t.Fatal(err)
	}
	px := NewProxy(NewRouter(NewPool(nil), &KV{Weight: 1}, Config{}))

	tests := []struct {
		name   string
		prompt string
		want   []uint32
		// asks is what the workers' /tokenize is asked: ids need no asking.
		asks []string
	}{
		{"a string is tokenized", `"` + text + `"`, ids, []string{text}},
		{"an array of one string is that string", `["` + text + `"]`, ids, []string{text}},
		{"token ids are taken as they are", string(idsJSON), ids, nil},
		{"an array of one array of ids is those ids", "[" + string(idsJSON) + "]", ids, nil},
		{"a batch of prompts is left to the worker", `["one","two"]`, nil, nil},
		{"no ids at all is left to the worker", `[]`, nil, nil},
		{"negative ids are left to the worker", `[1,-2]`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"model":"m","max_tokens":8,"prompt":` + tt.prompt + `}`)
			req, _, err := px.request(httptest.NewRequest("POST", "/v1/completions", nil), body, 1<<20)
			if err != nil || !slices.Equal(req.TokenIDs, tt.want) {
				t.Errorf("decision's tokens: %v, %v; want %v", req.TokenIDs, err, tt.want)
			}
			files, err := Files{Engine: tokenizer.Embedded}.Tokens(context.Background(), "/v1/completions", body)
			if err != nil || !slices.Equal(files, tt.want) {
				t.Errorf("Files: %v, %v; want %v", files, err, tt.want)
			}
			asked = nil
			fromWorker := &WorkerTokenize{Pool: NewPool(ws), Client: worker.Client()} // an empty cache
			got, err := fromWorker.Tokens(context.Background(), "/v1/completions", body)
			if err != nil || !slices.Equal(got, tt.want) || !slices.Equal(asked, tt.asks) {
				t.Errorf("WorkerTokenize: %v, %v, asked %q; want %v, asked %q", got, err, asked, tt.want, tt.asks)
			}
		})
	}
}
