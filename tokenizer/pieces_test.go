package tokenizer

import (
	"bytes"
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
// messages and content parts that are objects, the pieces that cost a
// decode, than the limit.
func FuzzCheckPieces(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"},{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`), 3)
	f.Add([]byte(`{"messages":[{},{},{}],"messages":[{}]}`), 2)
	f.Add([]byte(`{"messages":[{"content":null},{"content":{"x":[1]}}]}`), 1)
	f.Add([]byte(`{"messages":[null,null,null]}`), 2)
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		if limit < 0 || limit > 64 {
			return
		}
		err := CheckPieces(body, limit)
		// What costs a decode is an object: count the messages and the
		// content parts that are.
		var raw struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(body, &raw) != nil {
			return
		}
		isObject := func(r json.RawMessage) bool { return len(bytes.TrimSpace(r)) > 0 && bytes.TrimSpace(r)[0] == '{' }
		n := 0
		for _, m := range raw.Messages {
			if !isObject(m) {
				continue
			}
			n++
			var msg struct {
				Content []json.RawMessage `json:"content"`
			}
			if json.Unmarshal(m, &msg) == nil {
				for _, p := range msg.Content {
					if isObject(p) {
						n++
					}
				}
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
