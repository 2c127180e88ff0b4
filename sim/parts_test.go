package sim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestAChatOfContentPartsStopsTokenizingAtTheLimit sends a chat whose
// content is a list of text parts, one long word each, far past the
// model's context: the worker refuses it in vLLM's words, which report one
// token past the limit whatever the prompt's length, and the tokenizer it
// uses stops about the limit's worth in, as it would the same words in one
// string, rather than tokenize the whole prompt's 20,000 tokens. Work is
// counted in tokens encoded, not in time.
func TestAChatOfContentPartsStopsTokenizingAtTheLimit(t *testing.T) {
	p := fast()
	p.MaxModelLen = 1024
	w, srv, _ := newTestServer(t, p)
	parts := make([]map[string]string, 1000) // with the message, within the 1,024 pieces a chat may have
	for i := range parts {
		parts[i] = map[string]string{"type": "text", "text": strings.Repeat("abcdefghij", 10)}
	}
	body, _ := json.Marshal(map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": parts}}})
	status, raw := call(t, srv, "POST", "/v1/chat/completions", string(body))
	const want = "You passed 1024 input tokens and requested 1 output tokens. However, the model's context length is only 1024 tokens, resulting in a maximum input length of 1023 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=1024)"
	if status != 400 || !strings.Contains(string(raw), want) {
		t.Fatalf("got %d %s, want a 400 saying %q", status, raw, want)
	}
	req, err := parseChatRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := w.tok.Render(req.Messages)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.tok.EncodeLimit(prompt, p.MaxModelLen-1)
	m := regexp.MustCompile(`tokenizing stopped at (\d+)`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("EncodeLimit: %v, want it to say where tokenizing stopped", err)
	}
	// EncodeLimit works in pieces of 4 KiB, which hold fewer tokens than
	// bytes: it may pass the limit by one piece, no more.
	if at, _ := strconv.Atoi(m[1]); at > p.MaxModelLen+4096 {
		t.Fatalf("tokenizing stopped at %d tokens, past the limit of %d by more than a piece", at, p.MaxModelLen)
	}
}
