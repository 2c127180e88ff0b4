package tokenizer

import (
	"slices"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"plain English prose survives a round trip", "The KV cache stores keys and values."},
		{"empty text has no tokens", ""},
		{"punctuation and digits survive", "p95 TTFT <= 600 ms, TPOT <= 60 ms!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := Encode(tt.text)
			if got := Decode(ids); got != tt.text {
				t.Fatalf("Decode(Encode(%q)) = %q", tt.text, got)
			}
			if got := Count(tt.text); got != len(ids) {
				t.Fatalf("Count = %d, len(Encode) = %d", got, len(ids))
			}
		})
	}
}

func TestEncodeInvalidUTF8DoesNotFail(t *testing.T) {
	// A worker must tokenize whatever a client sends; bad bytes become U+FFFD.
	if ids := Encode("ok \xff\xfe ok"); len(ids) == 0 {
		t.Fatal("invalid UTF-8 produced no tokens")
	}
}

func TestRenderChatPrefixGrowsTurnByTurn(t *testing.T) {
	// Prefix caching depends on this: turn n+1's rendered prompt, minus the
	// open assistant header, starts with turn n's prompt plus its answer.
	turn1 := []Message{{"system", "You are helpful."}, {"user", "Explain caching."}}
	turn2 := append(slices.Clone(turn1), Message{"assistant", "Caching keeps work."}, Message{"user", "Why?"})
	p1 := Encode(RenderChat(turn1))
	p2 := Encode(RenderChat(turn2))
	if len(p2) <= len(p1) {
		t.Fatalf("turn 2 prompt (%d tokens) not longer than turn 1 (%d)", len(p2), len(p1))
	}
	// Tokens may merge at the boundary, so compare all but the last token.
	if !slices.Equal(p1[:len(p1)-1], p2[:len(p1)-1]) {
		t.Fatal("turn 2 prompt does not start with turn 1 prompt")
	}
}
