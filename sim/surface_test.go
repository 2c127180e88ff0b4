package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/apierror"
)

// TestTheOpenAISurfaceIsWhatClientsExpect checks the answers an OpenAI
// client reads, status and body, against the shapes vLLM gives.
func TestTheOpenAISurfaceIsWhatClientsExpect(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	tests := []struct {
		name, method, path, body string
		want                     int
		// wantType is the error's type; empty for a success.
		wantType string
		// wantIn is a piece of the body.
		wantIn string
	}{
		{"a chat request for another model is a 404 in vLLM's words", "POST", "/v1/chat/completions",
			`{"model":"gpt-4","messages":[{"role":"user","content":"x"}],"max_tokens":1}`, 404, "NotFoundError", "The model `gpt-4` does not exist."},
		{"a completion request for another model is a 404", "POST", "/v1/completions",
			`{"model":"gpt-4","prompt":"x","max_tokens":1}`, 404, "NotFoundError", "does not exist"},
		{"a request for the served model is answered", "POST", "/v1/chat/completions",
			`{"model":"` + DefaultModel + `","messages":[{"role":"user","content":"x"}],"max_tokens":1}`, 200, "", `"chat.completion"`},
		{"a request that names no model gets the served one", "POST", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"x"}],"max_tokens":1}`, 200, "", `"chat.completion"`},
		{"content given as text parts is accepted", "POST", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":1}`, 200, "", `"chat.completion"`},
		{"/v1/models is a list", "GET", "/v1/models", "", 200, "", `"object":"list"`},

		// Sad path: every refusal carries a type.
		{"an image part is a 400 naming the part", "POST", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "BadRequestError", `content[0] has type \"image_url\"`},
		{"malformed JSON is a BadRequestError", "POST", "/v1/chat/completions", `{"messages":`, 400, "BadRequestError", "not valid JSON"},
		{"an unknown path is a NotFoundError", "GET", "/v2/nothing", "", 404, "NotFoundError", "no route"},
		{"an empty tokenize is a BadRequestError", "POST", "/tokenize", `{}`, 400, "BadRequestError", "give a prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, tt.method, tt.path, tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantIn) {
				t.Fatalf("got %d %s, want %d containing %s", status, raw, tt.want, tt.wantIn)
			}
			if tt.wantType == "" {
				return
			}
			var e apierror.Response
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			if e.Error.Type != tt.wantType || e.Error.Code != tt.want || e.Error.Message == "" || !strings.Contains(string(raw), `"param":null`) {
				t.Fatalf("error = %s, want type %s and code %d", raw, tt.wantType, tt.want)
			}
		})
	}
}

// TestTextPartsCountAsTheirText proves a prompt sent as text parts is the
// same prompt, token for token, as the string it holds.
func TestTextPartsCountAsTheirText(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	promptTokens := func(content string) int {
		t.Helper()
		body := `{"messages":[{"role":"user","content":` + content + `}],"max_tokens":1}`
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Usage.PromptTokens == 0 {
			t.Fatalf("%d: %v %+v", resp.StatusCode, err, got)
		}
		return got.Usage.PromptTokens
	}
	s := promptTokens(`"What is a KV cache?\nAnd a block?"`)
	p := promptTokens(`[{"type":"text","text":"What is a KV cache?"},{"type":"text","text":"And a block?"}]`)
	if s != p {
		t.Fatalf("the string prompt has %d tokens, its parts %d", s, p)
	}
}

// TestWholeAnswersHaveVLLMsFieldsAndNoOthers reads the JSON of a whole
// (unstreamed) answer and of /v1/models key by key: vLLM's fields, with
// cached tokens where vLLM reports them, and none that vLLM never sends
// (an OpenAI SDK's response types add Azure's content_filter_results).
func TestWholeAnswersHaveVLLMsFieldsAndNoOthers(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	keys := func(v any) string {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("not an object: %v", v)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return strings.Join(ks, " ")
	}
	const usageKeys = "completion_tokens prompt_tokens prompt_tokens_details total_tokens"
	tests := []struct {
		name, method, path, body string
		want                     map[string]string // a path into the answer, and its keys
	}{
		{"a chat answer", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`, map[string]string{
			"":                            "choices created id model object usage",
			"choices.0":                   "finish_reason index logprobs message stop_reason",
			"choices.0.message":           "content role tool_calls",
			"usage":                       usageKeys,
			"usage.prompt_tokens_details": "cached_tokens",
		}},
		{"a text completion", "POST", "/v1/completions", `{"prompt":"x","max_tokens":2}`, map[string]string{
			"":          "choices created id model object usage",
			"choices.0": "finish_reason index logprobs stop_reason text",
			"usage":     usageKeys,
		}},
		{"the models list", "GET", "/v1/models", "", map[string]string{
			"":       "data object",
			"data.0": "created id max_model_len object owned_by parent root",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, raw := call(t, srv, tt.method, tt.path, tt.body)
			var answer any
			if err := json.Unmarshal(raw, &answer); err != nil {
				t.Fatal(err)
			}
			for path, want := range tt.want {
				v := answer
				for _, step := range strings.Split(path, ".") {
					switch node := v.(type) {
					case map[string]any:
						if step != "" {
							v = node[step]
						}
					case []any:
						if len(node) == 0 {
							t.Fatalf("%s: %s is empty", tt.path, path)
						}
						v = node[0]
					}
				}
				if got := keys(v); got != want {
					t.Errorf("%q has the keys %q, want vLLM's %q", path, got, want)
				}
			}
		})
	}
}

// TestAWrongMethodIsA405NamingTheRightOne: vLLM (FastAPI) answers a known
// path asked with a method it does not serve with 405 and an Allow
// header, not 404, and its error JSON.
func TestAWrongMethodIsA405NamingTheRightOne(t *testing.T) {
	_, srv, ev := newTestServer(t, fast())
	tests := []struct {
		name, method, path string
		want               int
		wantAllow          string
	}{
		{"GET of the chat endpoint is a 405 allowing POST", "GET", "/v1/chat/completions", 405, "POST"},
		{"PUT of the completions endpoint is a 405 allowing POST", "PUT", "/v1/completions", 405, "POST"},
		{"HEAD of a POST endpoint is a 405 too", "HEAD", "/v1/chat/completions", 405, "POST"},
		{"DELETE of /tokenize is a 405", "DELETE", "/tokenize", 405, "POST"},
		{"GET of the cache reset is a 405, and resets nothing", "GET", "/reset_prefix_cache", 405, "POST"},
		{"POST of the models list is a 405 allowing GET and HEAD", "POST", "/v1/models", 405, "GET, HEAD"},
		{"DELETE of the faults is a 405 allowing what it serves", "DELETE", "/admin/faults", 405, "GET, HEAD, PUT"},
		// An unknown path is still a 404, whatever the method.
		{"GET of an unknown path is a 404", "GET", "/v1/embeddings", 404, ""},
		{"POST of an unknown path is a 404", "POST", "/v1/chat", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.want || resp.Header.Get("Allow") != tt.wantAllow {
				t.Fatalf("got %d, Allow %q; want %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"), tt.want, tt.wantAllow)
			}
			if tt.method == "HEAD" {
				return // a HEAD answer has no body
			}
			assertErrorBody(t, resp, tt.want)
		})
	}
	if n := ev.kinds()["AllBlocksCleared"]; n != 0 {
		t.Fatalf("a refused method cleared the cache %d times", n)
	}
}

// TestEvery405HasAnErrorBody sends every method to every path the worker
// serves: each 405 carries the error JSON on one line, as every other
// refusal does, never an empty or plain-text body.
func TestEvery405HasAnErrorBody(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	paths := []string{"/health", "/v1/models", "/v1/chat/completions", "/v1/completions", "/tokenize",
		"/reset_prefix_cache", "/metrics", "/inference/v1/config", "/get_server_info", "/admin/faults"}
	seen := 0
	for _, path := range paths {
		for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"} {
			req, _ := http.NewRequest(method, srv.URL+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusMethodNotAllowed {
				seen++
				t.Run(method+" "+path, func(t *testing.T) { assertErrorBody(t, resp, 405) })
			}
			resp.Body.Close()
		}
	}
	if seen == 0 {
		t.Fatal("no method was refused with a 405")
	}
}

// assertErrorBody checks that resp's body is the error JSON, on one line,
// with status as its code and a message.
func assertErrorBody(t *testing.T, resp *http.Response, status int) {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e apierror.Response
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code != status || e.Error.Message == "" || e.Error.Type == "" ||
		strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("body %q (%v), want the error JSON with code %d on one line", raw, err, status)
	}
}
