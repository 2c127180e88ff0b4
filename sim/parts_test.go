package sim

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestAChatOfContentPartsStopsTokenizingAtTheLimit sends a chat whose
// content is a list of text parts, one long word each, far past the
// model's context: the worker refuses it having tokenized about the
// limit's worth, as it would the same words in one string, rather than
// the whole prompt's 20,000 tokens. Work is counted in tokens encoded,
// which the refusal reports, not in time.
func TestAChatOfContentPartsStopsTokenizingAtTheLimit(t *testing.T) {
	p := fast()
	p.MaxModelLen = 1024
	_, srv, _ := newTestServer(t, p)
	parts := make([]map[string]string, 1000) // with the message, within the 1,024 pieces a chat may have
	for i := range parts {
		parts[i] = map[string]string{"type": "text", "text": strings.Repeat("abcdefghij", 10)}
	}
	body, _ := json.Marshal(map[string]any{"max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": parts}}})
	status, raw := call(t, srv, "POST", "/v1/chat/completions", string(body))
	m := regexp.MustCompile(`tokenizing stopped at (\d+)`).FindSubmatch(raw)
	if status != 400 || m == nil {
		t.Fatalf("got %d %s, want a 400 saying where tokenizing stopped", status, raw)
	}
	// EncodeLimit works in pieces of 4 KiB, which hold fewer tokens than
	// bytes: it may pass the limit by one piece, no more.
	if at, _ := strconv.Atoi(string(m[1])); at > p.MaxModelLen+4096 {
		t.Fatalf("tokenizing stopped at %d tokens, past the limit of %d by more than a piece", at, p.MaxModelLen)
	}
}
