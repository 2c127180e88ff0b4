package tokenizer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckPieces(t *testing.T) {
	empties := func(n int) string { return strings.TrimSuffix(strings.Repeat("{},", n), ",") }
	parts := func(n int) string {
		return strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"x"},`, n), ",")
	}
	tests := []struct {
		name    string
		body    string
		refused bool
	}{
		{"a chat of as many messages as the limit passes", `{"messages":[` + empties(8) + `]}`, false},
		{"one message more is refused", `{"messages":[` + empties(9) + `]}`, true},
		{"content parts count with their messages", `{"messages":[{"role":"user","content":[` + parts(8) + `]}]}`, true},
		{"parts within the limit pass", `{"messages":[{"role":"user","content":[` + parts(7) + `]}]}`, false},
		{"a string content is one piece with its message", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 10000) + `"}],"max_tokens":3}`, false},
		{"other fields, however many values, do not count", `{"stop":[` + strings.Repeat(`"a",`, 50) + `"b"],"messages":[{}]}`, false},
		{"messages after other nested fields are still counted", `{"tools":[{"a":{"b":[1,2,{}]}}],"messages":[` + empties(9) + `]}`, true},
		{"a body that is not JSON passes, for the decoder to judge", `{"messages":[{},{`, false},
		{"messages that are not an array pass", `{"messages":{"role":"user"}}`, false},
		{"a completion's prompt is not counted", `{"prompt":[` + strings.Repeat("1,", 20) + `1]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPieces([]byte(tt.body), 8)
			var many *TooManyPiecesError
			if refused := errors.As(err, &many); refused != tt.refused || (err != nil && !refused) {
				t.Fatalf("CheckPieces = %v, want refused %v", err, tt.refused)
			}
		})
	}
}

// FuzzCheckPieces: a body CheckPieces lets through decodes to no more
// messages and content parts than the limit, and one it refuses has more.
func FuzzCheckPieces(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"},{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`), 3)
	f.Add([]byte(`{"messages":[{},{},{}],"messages":[{}]}`), 2)
	f.Add([]byte(`{"messages":[{"content":null},{"content":{"x":[1]}}]}`), 1)
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		if limit < 0 || limit > 64 {
			return
		}
		err := CheckPieces(body, limit)
		var raw struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &raw) != nil {
			return
		}
		n := len(raw.Messages)
		for _, m := range raw.Messages {
			var parts []json.RawMessage
			if json.Unmarshal(m.Content, &parts) == nil {
				n += len(parts)
			}
		}
		var many *TooManyPiecesError
		if errors.As(err, &many) {
			// Refused: some "messages" key held more than the limit (the
			// last one is what decodes, so only an excess anywhere is asked).
			return
		}
		if n > limit {
			t.Fatalf("let through %d messages and parts past a limit of %d: %s", n, limit, body)
		}
	})
}
