package sim

import (
	"fmt"
	"strings"
	"testing"
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
