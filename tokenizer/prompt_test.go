package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCompletionPrompt(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		wantText string
		wantIDs  []uint32
		wantOK   bool
	}{
		{"a string is the prompt's text", `"Once upon a time"`, "Once upon a time", nil, true},
		{"a list of ids is the prompt's tokens", `[1,2,3]`, "", []uint32{1, 2, 3}, true},
		{"a list of one string is that string", `["Once"]`, "Once", nil, true},
		{"a list of one list of ids is those ids", `[[5,6,7]]`, "", []uint32{5, 6, 7}, true},
		{"an empty string is read, for the caller to judge", `""`, "", nil, true},
		// sad path
		{"a batch of several strings is not one prompt", `["a","b"]`, "", nil, false},
		{"a batch of several id lists is not one prompt", `[[1],[2]]`, "", nil, false},
		{"no ids at all are no prompt", `[]`, "", nil, false},
		{"one empty id list is no prompt", `[[]]`, "", nil, false},
		{"a negative id is not a token id", `[1,-2]`, "", nil, false},
		{"an id past 32 bits is not a token id", `[4294967296]`, "", nil, false},
		{"a fractional id is not a token id", `[1.5]`, "", nil, false},
		{"strings and ids mixed are no prompt", `["a",1]`, "", nil, false},
		{"an object is no prompt", `{"x":1}`, "", nil, false},
		{"a missing prompt is no prompt", ``, "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, ids, ok := CompletionPrompt(json.RawMessage(tt.raw))
			if text != tt.wantText || !slices.Equal(ids, tt.wantIDs) || ok != tt.wantOK || (ok && (ids == nil) != (tt.wantIDs == nil)) {
				t.Fatalf("CompletionPrompt(%s) = %q, %v, %v; want %q, %v, %v", tt.raw, text, ids, ok, tt.wantText, tt.wantIDs, tt.wantOK)
			}
		})
	}
}

func TestCheckIDs(t *testing.T) {
	if err := CheckIDs([]uint32{1, 2, 3}, 3); err != nil {
		t.Fatalf("three ids under a limit of 3: %v", err)
	}
	err := CheckIDs([]uint32{1, 2, 3, 4}, 3)
	var tl *TooLongError
	if !errors.As(err, &tl) || tl.AtLeast != 4 || tl.Limit != 3 {
		t.Fatalf("four ids under a limit of 3: %v", err)
	}
	// Ids are counted, not tokenized: the message says so by giving the
	// exact length, and no "tokenizing stopped".
	if msg := err.Error(); !strings.Contains(msg, "has 4 tokens") || strings.Contains(msg, "tokenizing") {
		t.Fatalf("message %q", msg)
	}
}
