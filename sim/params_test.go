package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/apierror"
	"github.com/kvlens/kvlens/tokenizer"
)

// TestSamplingParamsAreCheckedAsVLLMChecksThem sends the sampling fields
// vLLM's SamplingParams refuses out of range: max_tokens (or
// max_completion_tokens) under 1 and temperature outside [0, 2] are 400s
// in its words, while absent or null fields take the defaults.
func TestSamplingParamsAreCheckedAsVLLMChecksThem(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name, path, body string
		want             int
		// wantIn is a piece of the answer.
		wantIn string
		// wantCompletion is a 200's completion_tokens; 0 to skip the check.
		wantCompletion int
	}{
		{"max_tokens 1 is served one token", "/v1/chat/completions", `{"max_tokens":1,` + msgs + `}`, 200, `"chat.completion"`, 1},
		{"a completion's max_tokens 1 is served one token", "/v1/completions", `{"max_tokens":1,"prompt":"x"}`, 200, `"text_completion"`, 1},
		{"a completion without max_tokens is cut at vLLM's 16 tokens", "/v1/completions", `{"prompt":"x"}`, 200, `"finish_reason":"length"`, 16},
		{"max_completion_tokens is read when given, over max_tokens", "/v1/chat/completions", `{"max_tokens":0,"max_completion_tokens":3,"ignore_eos":true,` + msgs + `}`, 200, `"chat.completion"`, 3},
		{"temperature 0 and 2, the ends of vLLM's range, are served", "/v1/completions", `{"temperature":2,"max_tokens":1,"prompt":"x"}`, 200, `"text_completion"`, 1},
		// sad path
		{"max_tokens 0 is a 400, as vLLM answers", "/v1/chat/completions", `{"max_tokens":0,` + msgs + `}`, 400, "max_tokens must be at least 1, got 0.", 0},
		{"a completion's max_tokens 0 is a 400", "/v1/completions", `{"max_tokens":0,"prompt":"x"}`, 400, "max_tokens must be at least 1, got 0.", 0},
		{"max_completion_tokens 0 is a 400 whatever max_tokens says", "/v1/chat/completions", `{"max_tokens":5,"max_completion_tokens":0,` + msgs + `}`, 400, "max_tokens must be at least 1, got 0.", 0},
		{"a negative max_tokens is a 400", "/v1/completions", `{"max_tokens":-3,"prompt":"x"}`, 400, "max_tokens must be at least 1, got -3.", 0},
		{"a negative temperature is a 400", "/v1/chat/completions", `{"temperature":-0.5,` + msgs + `}`, 400, "temperature must be non-negative, got -0.5.", 0},
		{"a temperature over 2 is a 400", "/v1/completions", `{"temperature":2.5,"prompt":"x"}`, 400, "temperature must be in [0, 2], got 2.5.", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, "POST", tt.path, tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantIn) || strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 {
				t.Fatalf("got %d %.300s, want %d containing %q on one line", status, raw, tt.want, tt.wantIn)
			}
			if tt.wantCompletion == 0 {
				return
			}
			checkCompletionTokens(t, raw, tt.wantCompletion)
		})
	}
}

// TestAChatWithoutMaxTokensMayRunToTheEndOfTheContext: vLLM caps a chat
// answer that sets neither max_tokens nor max_completion_tokens at what is
// left of the context (max_model_len less the prompt), not at a fixed
// count; a prompt that leaves nothing is refused as a max_tokens of 0.
func TestAChatWithoutMaxTokensMayRunToTheEndOfTheContext(t *testing.T) {
	p := fast()
	p.MaxModelLen = 200               // tokens: ignore_eos runs to the end in ~200 steps of 1 ms
	p.OutputMin, p.OutputMax = 20, 30 // an answer left alone ends well before
	_, srv, _ := newTestServer(t, p)
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	count := func(content string) int {
		return tokenizer.Count(tokenizer.RenderChat([]tokenizer.Message{{Role: "user", Content: content}}))
	}
	prompt := count("x")
	// fill is a message whose chat prompt is exactly max_model_len tokens.
	fill := "word"
	for count(fill) < p.MaxModelLen {
		fill += " word"
	}
	if count(fill) != p.MaxModelLen {
		t.Fatalf("no prompt of exactly %d tokens: %d", p.MaxModelLen, count(fill))
	}
	tests := []struct {
		name, body string
		want       int
		// wantIn is a piece of the answer.
		wantIn string
		// wantCompletion is a 200's completion_tokens; 0 to skip the check.
		wantCompletion int
	}{
		{"an absent max_tokens runs to max_model_len less the prompt", `{"ignore_eos":true,` + msgs + `}`, 200, `"finish_reason":"length"`, p.MaxModelLen - prompt},
		{"a null max_tokens and max_completion_tokens are absent", `{"max_tokens":null,"max_completion_tokens":null,"ignore_eos":true,` + msgs + `}`, 200, `"finish_reason":"length"`, p.MaxModelLen - prompt},
		{"an answer that ends by itself first ends with stop", `{"messages":[{"role":"user","content":"x"}]}`, 200, `"finish_reason":"stop"`, 0},
		{"max_completion_tokens alone caps it", `{"max_completion_tokens":5,"ignore_eos":true,` + msgs + `}`, 200, `"finish_reason":"length"`, 5},
		// sad path
		{"a prompt that fills the context leaves no token to answer with, a 400 in vLLM's words", `{"messages":[{"role":"user","content":"` + fill + `"}]}`, 400, "max_tokens must be at least 1, got 0.", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, "POST", "/v1/chat/completions", tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantIn) {
				t.Fatalf("got %d %.300s, want %d containing %q", status, raw, tt.want, tt.wantIn)
			}
			if tt.wantCompletion == 0 {
				return
			}
			checkCompletionTokens(t, raw, tt.wantCompletion)
		})
	}
}

// TestACompletionsNullMaxTokensIsNotItsDefault: vLLM's CompletionRequest
// defaults max_tokens to 16, and a null given replaces that default with
// None, which get_max_tokens reads as the rest of the context, as for a
// chat; only a completion that leaves max_tokens out is cut at 16.
func TestACompletionsNullMaxTokensIsNotItsDefault(t *testing.T) {
	p := fast()
	p.MaxModelLen = 200 // tokens: ignore_eos runs to the end in ~200 steps of 1 ms
	_, srv, _ := newTestServer(t, p)
	tests := []struct {
		name, body string
		want       func(prompt int) int // completion_tokens for a prompt of that many tokens
	}{
		{"left out, it is 16", `{"ignore_eos":true,"prompt":"x"}`, func(int) int { return 16 }},
		{"null, it is the rest of the context", `{"max_tokens":null,"ignore_eos":true,"prompt":"x"}`, func(prompt int) int { return p.MaxModelLen - prompt }},
		{"null and streamed, the same", `{"max_tokens":null,"ignore_eos":true,"prompt":"x","stream":true,"stream_options":{"include_usage":true}}`, func(prompt int) int { return p.MaxModelLen - prompt }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, "POST", "/v1/completions", tt.body)
			if status != 200 {
				t.Fatalf("got %d %.300s", status, raw)
			}
			// A stream's usage rides on its last chunk before [DONE].
			body := string(raw)
			if i := strings.LastIndex(body, `data: {"id"`); i >= 0 {
				body, _, _ = strings.Cut(strings.TrimPrefix(body[i:], "data: "), "\n")
			}
			var got struct {
				Usage struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil || got.Usage.PromptTokens == 0 {
				t.Fatalf("no usage in %.300s (%v)", body, err)
			}
			if want := tt.want(got.Usage.PromptTokens); got.Usage.CompletionTokens != want {
				t.Fatalf("completion_tokens %d for a prompt of %d, want %d", got.Usage.CompletionTokens, got.Usage.PromptTokens, want)
			}
		})
	}
}

// TestStreamOptionsWithoutAStreamAreRefused: vLLM refuses stream_options
// on a request that does not stream, with a 400 in its words. It tests the
// options as Python tests a dict, so an empty object, or null, passes.
func TestStreamOptionsWithoutAStreamAreRefused(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	const msgs = `"messages":[{"role":"user","content":"x"}],"max_tokens":1`
	const prompt = `"prompt":"x","max_tokens":1`
	const refusal = "Stream options can only be defined when `stream=True`."
	tests := []struct {
		name, path, body string
		want             int
		// wantIn is a piece of the answer.
		wantIn string
	}{
		{"a chat's stream_options with stream true are served", "/v1/chat/completions", `{"stream":true,"stream_options":{"include_usage":true},` + msgs + `}`, 200, `"usage":`},
		{"a completion's stream_options with stream true are served", "/v1/completions", `{"stream":true,"stream_options":{"include_usage":false},` + prompt + `}`, 200, "data: [DONE]"},
		{"empty stream_options without a stream pass, as vLLM reads {} as false", "/v1/chat/completions", `{"stream_options":{},` + msgs + `}`, 200, `"chat.completion"`},
		{"null stream_options without a stream pass", "/v1/completions", `{"stream_options":null,` + prompt + `}`, 200, `"text_completion"`},
		// sad path
		{"a chat's stream_options without stream are a 400", "/v1/chat/completions", `{"stream_options":{"include_usage":true},` + msgs + `}`, 400, refusal},
		{"a completion's stream_options with stream false are a 400", "/v1/completions", `{"stream":false,"stream_options":{"include_usage":true},` + prompt + `}`, 400, refusal},
		{"stream_options with stream null are a 400", "/v1/chat/completions", `{"stream":null,"stream_options":{"include_usage":false},` + msgs + `}`, 400, refusal},
		{"stream_options holding only options the worker ignores are a 400 too", "/v1/completions", `{"stream_options":{"continuous_usage_stats":false},` + prompt + `}`, 400, refusal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, "POST", tt.path, tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantIn) {
				t.Fatalf("got %d %.300s, want %d containing %q", status, raw, tt.want, tt.wantIn)
			}
			if status != 400 {
				return
			}
			var e apierror.Response
			if err := json.Unmarshal(raw, &e); err != nil || e.Error.Type != "BadRequestError" || e.Error.Code != 400 || strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 {
				t.Fatalf("%s is not vLLM's error JSON on one line", raw)
			}
		})
	}
}

// checkCompletionTokens fails unless the answer raw reports want
// completion tokens in its usage.
func checkCompletionTokens(t *testing.T, raw []byte, want int) {
	t.Helper()
	var got struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || got.Usage.CompletionTokens != want {
		t.Fatalf("completion_tokens %d (%v), want %d", got.Usage.CompletionTokens, err, want)
	}
}
