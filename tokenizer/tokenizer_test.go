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

func TestCutSplitsOnlyBeforeASpaceBetweenLetters(t *testing.T) {
	tests := []struct {
		name string
		text string
		n    int
		want []string
	}{
		{"one part leaves the text whole", "alpha beta gamma", 1, []string{"alpha beta gamma"}},
		{"two parts cut at the first space past the middle", "alpha beta gamma delta", 2, []string{"alpha beta gamma", " delta"}},
		{"three parts", "aa bb cc dd ee ff", 3, []string{"aa bb", " cc dd", " ee ff"}},
		{"digits and punctuation are never cut points", "12 34 56, 78 !! 90", 2, []string{"12 34 56, 78 !! 90"}},
		{"a double space is not a cut point", "ab  cd  ef  gh", 2, []string{"ab  cd  ef  gh"}},
		{"no cut point past the middle keeps the tail whole", "alpha beta 1 2 3 4 5 6 7 8", 2, []string{"alpha beta 1 2 3 4 5 6 7 8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cut(tt.text, tt.n)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Cut(%q, %d) = %q, want %q", tt.text, tt.n, got, tt.want)
			}
		})
	}
}

// FuzzCutKeepsTokens checks that the parts Cut makes, encoded one by one,
// give the ids of the whole text, for any text and any number of parts.
func FuzzCutKeepsTokens(f *testing.F) {
	for _, s := range []string{
		"The KV cache stores keys and values. It's paged, and blocks are 32 tokens.",
		"don't stop   me now\n\n<|user|>\nhello world  \t tabs\r\nand CRLF",
		"naïve café résumé with accents and 数字 123456 and emoji 🎉 in between words",
		"a b c d e f g h i j k l m n o p q r s t u v w x y z",
	} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, text string, n uint8) {
		parts := Cut(text, int(n%8)+1)
		var got []uint32
		for _, p := range parts {
			got = append(got, Encode(p)...)
		}
		if whole := Encode(text); !slices.Equal(got, whole) {
			t.Fatalf("parts %q encode to %v, the whole text to %v", parts, got, whole)
		}
	})
}
