package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
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

func TestCutSplitsOnlyWhereNoPieceSpans(t *testing.T) {
	tests := []struct {
		name string
		text string
		n    int
		want []string
	}{
		{"one part leaves the text whole", "alpha beta gamma", 1, []string{"alpha beta gamma"}},
		{"two parts cut at the first space past the middle", "alpha beta gamma delta", 2, []string{"alpha beta gamma", " delta"}},
		{"three parts cut at the spaces nearest each third", "aa bb cc dd ee ff", 3, []string{"aa bb", " cc dd", " ee ff"}},
		{"digits and punctuation are never cut points", "12 34 56, 78 !! 90", 2, []string{"12 34 56, 78 !! 90"}},
		{"a double space is not a cut point", "ab  cd  ef  gh", 2, []string{"ab  cd  ef  gh"}},
		{"no cut point past the middle keeps the tail whole", "alpha beta 1 2 3 4 5 6 7 8", 2, []string{"alpha beta 1 2 3 4 5 6 7 8"}},
		{"a newline after a letter is a cut point, as content parts are joined", "alpha\nbeta\ngamma\ndelta", 2, []string{"alpha\nbeta\ngamma", "\ndelta"}},
		{"a newline after a digit is a cut point", "12\n34\n56\n78", 2, []string{"12\n34", "\n56\n78"}},
		{"a newline after punctuation is not, as the punctuation takes it", "ab.\ncd.\nef.\ngh.", 2, []string{"ab.\ncd.\nef.\ngh."}},
		{"a newline after a newline is not", "ab\n\n\n\n\n\n\n\ncd", 2, []string{"ab\n\n\n\n\n\n\n\ncd"}},
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
		"alpha\nbeta\n12\n\n  gamma\n.\ndelta's\n\t\nx\r\ny 7\n",
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

// whole tokenizes text in one call to the BPE, as Encode did before it
// worked in pieces.
func whole(text string) []uint32 { return encode(text, nil) }

func TestEncodeInPiecesMatchesOneCall(t *testing.T) {
	prose := strings.Repeat("The KV cache keeps every key and value, so a prefix is computed once. ", 400)
	tests := []struct {
		name string
		text string
	}{
		{"long prose cut into many pieces tokenizes as one call does", prose},
		{"a long run of spaces, which cannot be cut, tokenizes as one call does", strings.Repeat(" ", 3*pieceBytes)},
		{"non-ASCII text between the cut points tokenizes as one call does", strings.Repeat("café naïve 東京 ", 2000)},
		{"text shorter than a piece is one call", "short"},
		{"lines of words, digits and punctuation, cut at newlines, tokenize as one call does", strings.Repeat("word\n12\n.\n \nfoo's\n\n  bar\r\nbaz\t\nQux7\n東京\n", 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := Encode(tt.text), whole(tt.text); !slices.Equal(got, want) {
				t.Fatalf("Encode gave %d tokens, one call %d", len(got), len(want))
			}
		})
	}
}

func TestEncodeLimit(t *testing.T) {
	prose := strings.Repeat("The KV cache keeps every key and value. ", 2000)
	n := len(whole(prose))
	tests := []struct {
		name      string
		text      string
		limit     int
		wantErr   bool
		wantBytes bool // refused on its bytes, before tokenizing
	}{
		{"a text within the limit gives all its tokens", prose, n + 1, false, false},
		{"a text of exactly the limit gives all its tokens", prose, n, false, false},
		// sad path
		{"a text one token over the limit is refused", prose, n - 1, true, false},
		{"a text far over the limit, but not by its bytes, is refused once tokenizing passes it", prose, 700, true, false},
		{"a text longer than limit tokens of the longest token is refused on its bytes", strings.Repeat("a", 10*MaxTokenBytes+1), 10, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids, err := EncodeLimit(tt.text, tt.limit)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("EncodeLimit: %v", err)
				}
				if !slices.Equal(ids, whole(tt.text)) {
					t.Fatalf("EncodeLimit gave %d tokens, Encode %d", len(ids), n)
				}
				return
			}
			var tl *TooLongError
			if !errors.As(err, &tl) {
				t.Fatalf("EncodeLimit error = %v, want a *TooLongError", err)
			}
			if tl.AtLeast <= tt.limit || tl.Limit != tt.limit || (tl.Bytes > 0) != tt.wantBytes {
				t.Fatalf("TooLongError = %+v, limit %d, want refused on bytes %v", tl, tt.limit, tt.wantBytes)
			}
			if !tt.wantBytes && tl.AtLeast > tt.limit+pieceBytes {
				t.Fatalf("tokenizing went on to %d tokens, far past the limit %d", tl.AtLeast, tt.limit)
			}
			if strings.Contains(tl.Error(), "\n") || !strings.Contains(tl.Error(), strconv.Itoa(tt.limit)) {
				t.Fatalf("message %q is not one line naming the limit", tl.Error())
			}
		})
	}
}

func TestLongestTokenIsMaxTokenBytes(t *testing.T) {
	// CheckBytes and BodyLimit rest on this: no cl100k token is longer.
	longest := 0
	for id := range uint32(200_000) {
		longest = max(longest, len(Decode([]uint32{id})))
	}
	if longest != MaxTokenBytes {
		t.Fatalf("the longest token has %d bytes, MaxTokenBytes says %d", longest, MaxTokenBytes)
	}
}

func FuzzEncodeMatchesOneCall(f *testing.F) {
	f.Add("The KV cache keeps every key and value.", 3)
	f.Add(strings.Repeat("ab cd ", 100), 7)
	f.Add("x \xff\xfe y z", 2)
	f.Add(strings.Repeat(" ", 300)+"a b", 4)
	f.Fuzz(func(t *testing.T, text string, n int) {
		n = n%64 + 1
		var ids []uint32
		for _, p := range Cut(text, n) {
			ids = encode(p, ids)
		}
		if want := whole(text); !slices.Equal(ids, want) {
			t.Fatalf("%d pieces gave %d tokens, one call %d", n, len(ids), len(want))
		}
		limit := len(ids)
		if CheckBytes(len(text), limit) != nil {
			// The byte bound assumes every byte is encoded, but the embedded
			// cl100k drops DEL (0x7f): "\x7f" is no token at all. Such a
			// text is refused by its bytes, which is the safe side.
			return
		}
		if got, err := EncodeLimit(text, limit); err != nil || !slices.Equal(got, ids) {
			t.Fatalf("EncodeLimit at its own length: %v", err)
		}
		if limit > 0 {
			if _, err := EncodeLimit(text, limit-1); err == nil {
				t.Fatal("EncodeLimit one under its length did not refuse")
			}
		}
	})
}

func TestChatBytesIsTheRenderedLength(t *testing.T) {
	tests := []struct {
		name string
		msgs []Message
	}{
		{"no messages is the assistant header alone", nil},
		{"one message counts its role, content and markup", []Message{{"user", "hi"}}},
		{"several messages add up, non-ASCII in bytes", []Message{{"system", "Be brief."}, {"user", "東京は?"}, {"assistant", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := ChatBytes(tt.msgs), len(RenderChat(tt.msgs)); got != want {
				t.Fatalf("ChatBytes = %d, len(RenderChat) = %d", got, want)
			}
		})
	}
}

// TestEncodeLimitStopsEarlyOnContentParts checks the work EncodeLimit does
// on a chat whose content came as a list of parts, one word each: the
// parts are joined with newlines, and tokenizing must stop a piece past
// the limit, as it does for the same words joined with spaces, not
// tokenize all 40,000 tokens first. Work is counted in tokens encoded
// (TooLongError.AtLeast says where tokenizing stopped), not in time.
func TestEncodeLimitStopsEarlyOnContentParts(t *testing.T) {
	parts := make([]map[string]string, 2000)
	for i := range parts {
		parts[i] = map[string]string{"type": "text", "text": strings.Repeat("abcdefghij", 10)}
	}
	body, _ := json.Marshal(map[string]any{"role": "user", "content": parts})
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	const limit = 4000
	tests := []struct {
		name string
		text string
	}{
		{"text parts joined with newlines", RenderChat([]Message{m})},
		{"the same words joined with spaces", RenderChat([]Message{{Role: "user", Content: strings.ReplaceAll(m.Content, "\n", " ")}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total := len(Encode(tt.text))
			_, err := EncodeLimit(tt.text, limit)
			var tl *TooLongError
			if !errors.As(err, &tl) || tl.Bytes > 0 {
				t.Fatalf("EncodeLimit = %v, want a TooLongError once tokenizing passed %d", err, limit)
			}
			// A piece has pieceBytes of text, so no more tokens than that.
			if tl.AtLeast > limit+pieceBytes {
				t.Fatalf("tokenizing stopped at %d of the text's %d tokens, want within a piece of the limit %d", tl.AtLeast, total, limit)
			}
		})
	}
}
