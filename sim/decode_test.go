package sim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/apierror"
)

// TestABodyWithAnythingAfterItsJSONIsRefused: vLLM parses a request body
// as one JSON document, so a body that goes on after its object is a 400
// there, and here; white space after it is not.
func TestABodyWithAnythingAfterItsJSONIsRefused(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	const chat = `{"messages":[{"role":"user","content":"x"}],"max_tokens":1}`
	const completion = `{"prompt":"x","max_tokens":1}`
	tests := []struct {
		name, method, path, body string
		want                     int
		wantIn                   string
	}{
		{"a chat body ending in a newline, as curl sends a file, is served", "POST", "/v1/chat/completions", chat + "\r\n \t", 200, `"chat.completion"`},
		{"a completion body ending in white space is served", "POST", "/v1/completions", completion + "\n", 200, `"text_completion"`},
		// sad path
		{"a chat body with words after it is a 400", "POST", "/v1/chat/completions", chat + "xyz", 400, fmt.Sprintf("goes on after its JSON value ends, at byte %d", len(chat))},
		{"a chat body with a second object after it is a 400", "POST", "/v1/chat/completions", chat + ` {"max_tokens":9}`, 400, "goes on after its JSON value"},
		{"a completion body with a stray bracket after it is a 400", "POST", "/v1/completions", completion + "]", 400, "goes on after its JSON value"},
		{"a tokenize body with words after it is a 400", "POST", "/tokenize", `{"prompt":"x"}garbage`, 400, "goes on after its JSON value"},
		{"a faults body with words after it is a 400, and changes nothing", "PUT", "/admin/faults", `{"error_503":1}!`, 400, "goes on after its JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, tt.method, tt.path, tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantIn) || strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 {
				t.Fatalf("got %d %.300s, want %d containing %q on one line", status, raw, tt.want, tt.wantIn)
			}
		})
	}
	if status, raw := call(t, srv, "POST", "/v1/completions", completion); status != 200 {
		t.Fatalf("after the refused faults a completion got %d %s: the faults were set", status, raw)
	}
}

// goTerms matches what a Go error says of Go's types, which a client of an
// OpenAI API cannot act on: "Go struct field", "map[string]interface {}",
// "float64", a package-qualified type name such as sim.chatRequest or
// tokenizer.Message.
var goTerms = regexp.MustCompile(`Go (value|struct)|interface \{|map\[|\[\]|\b(float|u?int)(8|16|32|64)\b|<nil>|\b(sim|tokenizer|router|json|openai|http|reqbody|apierror)\.[A-Za-z]`)

// echoed matches the quoted parts of a message: what a client sent, echoed.
var echoed = regexp.MustCompile(`"(\\.|[^"\\])*"|'[^']*'|\x60[^\x60]*\x60`)

// speaksGo says whether msg, but for what it quotes of the client's own
// words, names Go's types.
func speaksGo(msg string) bool { return goTerms.MatchString(echoed.ReplaceAllString(msg, `""`)) }

// TestNoErrorSpeaksOfGoTypes sends malformed bodies to every endpoint that
// reads one: each refusal says which field is wrong and what it takes, in
// JSON's terms, on one line, and none names a Go type.
func TestNoErrorSpeaksOfGoTypes(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	const chat, done, tok = "/v1/chat/completions", "/v1/completions", "/tokenize"
	const user = `{"role":"user","content":"x"}`
	tests := []struct {
		name, method, path, body string
		// want is a piece of the message.
		want string
	}{
		{"a body that is a list, not an object", "POST", chat, `[]`, "request body must be a JSON object, not a list"},
		{"a body that is a string", "POST", done, `"x"`, "request body must be a JSON object, not a string"},
		{"an empty body", "POST", chat, ``, "request body is empty"},
		{"a body cut short", "POST", done, `{"prompt":"x",`, "request body is not valid JSON: it ends before its JSON value does"},
		{"a body with a stray character", "POST", chat, `{"messages":[` + user + `],}`, "request body is not valid JSON: invalid character '}'"},
		{"messages as a string", "POST", chat, `{"messages":"hi"}`, "messages: expected a list, got a string"},
		{"a message that is a number", "POST", chat, `{"messages":[` + user + `,1]}`, "messages[1]: expected a message, an object such as"},
		{"a role that is a number", "POST", chat, `{"messages":[{"role":1,"content":"x"}]}`, "messages[0].role: expected a string, got a number"},
		{"content that is a number", "POST", chat, `{"messages":[{"role":"user","content":5}]}`, "messages[0].content: expected a string or a list of content parts, got a number"},
		{"content that is an object", "POST", chat, `{"messages":[` + user + `,{"role":"user","content":{"a":1}}]}`, "messages[1].content: expected a string or a list of content parts, got an object"},
		{"a content part that is a number", "POST", chat, `{"messages":[{"role":"user","content":[5]}]}`, "messages[0].content[0]: expected a content part"},
		{"a content part with no type", "POST", chat, `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0] has no type"},
		{"max_tokens as a string", "POST", chat, `{"messages":[` + user + `],"max_tokens":"5"}`, "max_tokens: expected an integer, got a string"},
		{"max_tokens with a fraction", "POST", done, `{"prompt":"x","max_tokens":1.5}`, "max_tokens: expected an integer, got 1.5"},
		{"max_tokens too large for an integer", "POST", chat, `{"messages":[` + user + `],"max_tokens":1e30}`, "max_tokens: expected an integer, got 1e30"},
		{"max_completion_tokens as a list", "POST", chat, `{"messages":[` + user + `],"max_completion_tokens":[1]}`, "max_completion_tokens: expected an integer, got a list"},
		{"stream as a string", "POST", chat, `{"messages":[` + user + `],"stream":"yes"}`, "stream: expected a boolean, got a string"},
		{"stream_options as a number", "POST", chat, `{"messages":[` + user + `],"stream_options":5}`, "stream_options: expected an object, got a number"},
		{"include_usage as a string", "POST", done, `{"prompt":"x","stream":true,"stream_options":{"include_usage":"y"}}`, "stream_options.include_usage: expected a boolean, got a string"},
		{"temperature as a string", "POST", chat, `{"messages":[` + user + `],"temperature":"hot"}`, "temperature: expected a number, got a string"},
		{"n as a string", "POST", done, `{"prompt":"x","n":"2"}`, "n: expected an integer, got a string"},
		{"model as a number", "POST", chat, `{"messages":[` + user + `],"model":5}`, "model: expected a string, got a number"},
		{"a prompt that is a number", "POST", done, `{"prompt":5}`, "prompt must be a non-empty string, a list of token ids"},
		{"a tokenize prompt that is a number", "POST", tok, `{"prompt":5}`, "prompt: expected a string, got a number"},
		{"tokenize messages with a bad content", "POST", tok, `{"messages":[{"role":"user","content":5}]}`, "messages[0].content: expected a string or a list of content parts"},
		{"add_generation_prompt as a string", "POST", tok, `{"add_generation_prompt":"x","prompt":"a"}`, "add_generation_prompt: expected a boolean, got a string"},
		{"a fault rate as a string", "PUT", "/admin/faults", `{"error_503":"lots"}`, "error_503: expected a number, got a string"},
		{"an unknown fault", "PUT", "/admin/faults", `{"explode":1}`, `unknown field "explode"`},
		{"a stall that is a list", "PUT", "/admin/faults", `{"stall":[]}`, `stall: expected a duration such as "2s" or a number of seconds, got a list`},
		{"a stall too long", "PUT", "/admin/faults", `{"stall":1e400}`, "stall: 1e400 seconds is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, tt.method, tt.path, tt.body)
			var e apierror.Response
			if err := json.Unmarshal(raw, &e); err != nil || status != 400 {
				t.Fatalf("got %d %s, want a 400 in the error JSON", status, raw)
			}
			msg := e.Error.Message
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Fatalf("message %q, want one line containing %q", msg, tt.want)
			}
			if speaksGo(msg) {
				t.Fatalf("message %q speaks of Go types", msg)
			}
		})
	}
}
