package loadgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/tokenizer"
	"github.com/zeebo/xxh3"
)

func TestBlockVocabIsSingleTokenWords(t *testing.T) {
	v := blockVocab()
	if len(v) != blockVocabSize {
		t.Fatalf("%d block words, want %d", len(v), blockVocabSize)
	}
	for _, w := range v[:50] {
		if n := tokenizer.Count(w); n != 1 {
			t.Fatalf("%q is %d tokens", w, n)
		}
	}
}

func TestTracePromptTokenization(t *testing.T) {
	recs := []TraceRecord{
		{Line: 1, InputLength: 3 * TraceBlockTokens, HashIDs: []int64{1, 2, 3}},
		{Line: 2, InputLength: 2*TraceBlockTokens + 100, HashIDs: []int64{1, 2, 4}},
		{Line: 3, InputLength: 700, HashIDs: []int64{9}}, // longer than its hash ids
		{Line: 4, InputLength: 5, HashIDs: []int64{1, 2}},
	}
	enc := make([][]uint32, len(recs))
	for i, r := range recs {
		p := TracePrompt(r)
		enc[i] = tokenizer.Encode(p)
		if len(enc[i]) != r.InputLength {
			t.Fatalf("record %d: prompt is %d tokens, want input_length %d", r.Line, len(enc[i]), r.InputLength)
		}
	}
	b := TraceBlockTokens
	t.Run("equal hash ids are identical token blocks", func(t *testing.T) {
		if !slices.Equal(enc[0][:2*b], enc[1][:2*b]) {
			t.Fatal("records sharing hash ids 1, 2 differ in their first two blocks")
		}
		if !slices.Equal(enc[3], enc[0][:5]) {
			t.Fatal("a 5-token prompt is not the first 5 tokens of its block")
		}
	})
	t.Run("different hash ids are different blocks", func(t *testing.T) {
		if slices.Equal(enc[0][2*b:2*b+100], enc[1][2*b:2*b+100]) || slices.Equal(enc[0][:b], enc[2][:b]) {
			t.Fatal("different hash ids gave equal blocks")
		}
	})
	t.Run("block boundaries survive the chat template", func(t *testing.T) {
		// The worker tokenizes the rendered chat: the prompt's tokens must
		// appear there unchanged, not merged with the template around them.
		ids := tokenizer.Encode(tokenizer.RenderChat([]tokenizer.Message{{Role: "user", Content: TracePrompt(recs[1])}}))
		if !containsRun(ids, enc[1]) {
			t.Fatal("the prompt's tokens changed inside the chat template")
		}
	})
	t.Run("a prompt is the same in every run and every build", func(t *testing.T) {
		// A trace replayed again, by another build or on another machine,
		// must send the same text, so the prompt is pinned by its hash.
		// When TracePrompt changes on purpose, put the new hash here.
		p := TracePrompt(recs[0])
		const wantStart, wantHash = " column opportunity wor turned strateg needs days class load", 0x40feadf10ad3cb58
		if !strings.HasPrefix(p, wantStart) || xxh3.HashString(p) != wantHash {
			t.Fatalf("TracePrompt(hash ids 1, 2, 3) starts %q and hashes to %#x, want %q and %#x", p[:min(60, len(p))], xxh3.HashString(p), wantStart, uint64(wantHash))
		}
	})
}

// containsRun reports whether sub occurs in s as a contiguous run.
func containsRun(s, sub []uint32) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if slices.Equal(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func TestFitTraceClipsRecordsPastTheContext(t *testing.T) {
	const limit = 16384
	budget := limit - chatTemplateTokens
	tests := []struct {
		name            string
		rec             TraceRecord
		wantIn, wantOut int
		wantHashes      int
		clipped         bool
	}{
		{"a record within the context is left alone", TraceRecord{InputLength: 8000, OutputLength: 500, HashIDs: make([]int64, 16)}, 8000, 500, 16, false},
		{"a record that just fits is left alone", TraceRecord{InputLength: budget - 100, OutputLength: 100, HashIDs: make([]int64, 32)}, budget - 100, 100, 32, false},
		// sad path
		{"a million-token prompt is clipped to the context less its output", TraceRecord{InputLength: 1 << 20, OutputLength: 200, HashIDs: make([]int64, 2048)}, budget - 200, 200, (budget - 200 + 511) / 512, true},
		{"an output that fills the context alone is halved", TraceRecord{InputLength: 100, OutputLength: 1 << 20, HashIDs: make([]int64, 1)}, budget - budget/2, budget / 2, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, msg := FitTrace([]TraceRecord{tt.rec, {InputLength: 10, OutputLength: 10}}, limit)
			r := recs[0]
			if r.InputLength != tt.wantIn || r.OutputLength != tt.wantOut || len(r.HashIDs) != tt.wantHashes {
				t.Fatalf("got input %d, output %d, %d hash_ids; want %d, %d, %d", r.InputLength, r.OutputLength, len(r.HashIDs), tt.wantIn, tt.wantOut, tt.wantHashes)
			}
			if (msg != "") != tt.clipped || strings.Contains(msg, "\n") {
				t.Fatalf("message %q, want one line only when a record was clipped", msg)
			}
			if tt.clipped && !strings.Contains(msg, "1 of 2 records") {
				t.Fatalf("message %q does not count the clipped record", msg)
			}
			prompt := tokenizer.RenderChat([]tokenizer.Message{{Role: "user", Content: TracePrompt(r)}})
			if n := len(tokenizer.Encode(prompt)); n+r.OutputLength > limit {
				t.Fatalf("the clipped prompt has %d tokens, with %d output past %d", n, r.OutputLength, limit)
			}
		})
	}
}
