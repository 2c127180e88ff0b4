package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/apierror"
)

// TestRefusalsNameTheirFieldAsVLLM sends requests vLLM refuses with its
// VLLMValidationError and holds the whole error against vLLM's: the
// message ends with the field and the value refused, and param names the
// field; refusals vLLM raises without a field keep a null param.
func TestRefusalsNameTheirFieldAsVLLM(t *testing.T) {
	p := fast()
	p.MaxModelLen = 1024
	_, srv, _ := newTestServer(t, p)
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	long := strings.Repeat("cache ", 3000)
	tests := []struct {
		name, path, body string
		status           int
		msg              string
		param            string // "" for null
	}{
		{"max_tokens 0 names max_tokens and its value", "/v1/chat/completions", `{"max_tokens":0,` + msgs + `}`, 400,
			"max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)", "max_tokens"},
		{"max_completion_tokens 0 is named max_tokens, as SamplingParams names it", "/v1/chat/completions", `{"max_completion_tokens":0,` + msgs + `}`, 400,
			"max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)", "max_tokens"},
		{"a negative completion max_tokens names its value", "/v1/completions", `{"max_tokens":-3,"prompt":"x"}`, 400,
			"max_tokens must be at least 1, got -3. (parameter=max_tokens, value=-3)", "max_tokens"},
		{"a negative temperature names temperature, printed as Python prints a float", "/v1/chat/completions", `{"temperature":-0.5,` + msgs + `}`, 400,
			"temperature must be non-negative, got -0.5. (parameter=temperature, value=-0.5)", "temperature"},
		{"a whole-number temperature over 2 is printed 3.0, as Python prints it", "/v1/completions", `{"temperature":3,"prompt":"x"}`, 400,
			"temperature must be in [0, 2], got 3.0. (parameter=temperature, value=3.0)", "temperature"},
		{"stream_options without a stream name stream_options, with no value", "/v1/completions", `{"stream_options":{"include_usage":true},"prompt":"x"}`, 400,
			"Stream options can only be defined when `stream=True`. (parameter=stream_options)", "stream_options"},
		{"a max_tokens over the whole context is refused before the prompt is read", "/v1/completions", `{"max_tokens":2000,"prompt":"x"}`, 400,
			"max_tokens=2000cannot be greater than max_model_len=max_total_tokens=1024. Please request fewer output tokens. (parameter=max_tokens, value=2000)", "max_tokens"},
		{"a max_completion_tokens over the whole context names that field", "/v1/chat/completions", `{"max_completion_tokens":1025,` + msgs + `}`, 400,
			"max_completion_tokens=1025cannot be greater than max_model_len=max_total_tokens=1024. Please request fewer output tokens. (parameter=max_completion_tokens, value=1025)", "max_completion_tokens"},
		{"a prompt with max_tokens past the context counts the cap against it", "/v1/completions", `{"max_tokens":100,"prompt":"` + long + `"}`, 400,
			"You passed 925 input tokens and requested 100 output tokens. However, the model's context length is only 1024 tokens, resulting in a maximum input length of 924 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=925)", "input_tokens"},
		{"a chat prompt alone past the context, with no cap, asks for 0 output tokens", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400,
			"You passed 1025 input tokens and requested 0 output tokens. However, the model's context length is only 1024 tokens, resulting in a maximum input length of 1024 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=1025)", "input_tokens"},
		// vLLM raises these without a field: param stays null, the message bare.
		{"n 0 has a null param", "/v1/chat/completions", `{"n":0,` + msgs + `}`, 400, "n must be at least 1, got 0.", ""},
		{"greedy n over 1 has a null param", "/v1/completions", `{"n":2,"temperature":0,"prompt":"x"}`, 400, "n must be 1 when using greedy sampling, got 2.", ""},
		{"an unknown model has a null param", "/v1/completions", `{"model":"nope","prompt":"x"}`, 404, "The model `nope` does not exist.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, "POST", tt.path, tt.body)
			var e apierror.Response
			if err := json.Unmarshal(raw, &e); err != nil || status != tt.status {
				t.Fatalf("got %d %s, want %d", status, raw, tt.status)
			}
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Message != tt.msg || param != tt.param {
				t.Errorf("got message %q, param %q\nwant message %q, param %q", e.Error.Message, param, tt.msg, tt.param)
			}
		})
	}
}

func TestPyFloat(t *testing.T) {
	tests := []struct {
		name string
		f    float64
		want string
	}{
		{"a whole number keeps its .0", 3, "3.0"},
		{"a fraction is its shortest digits", -0.5, "-0.5"},
		{"a long fraction round-trips", 2.0000001, "2.0000001"},
		{"1e16 and up switch to an exponent", 1e16, "1e+16"},
		{"below 1e16 stays positional", 1e15, "1000000000000000.0"},
		{"below 1e-4 switch to an exponent of two digits", 1.5e-5, "1.5e-05"},
		{"1e-4 stays positional", 0.0001, "0.0001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pyFloat(tt.f); got != tt.want {
				t.Errorf("pyFloat(%v) = %q, want %q", tt.f, got, tt.want)
			}
		})
	}
}
