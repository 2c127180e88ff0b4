package sim

import (
	"encoding/json"
	"fmt"
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
