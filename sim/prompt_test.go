package sim

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/tokenizer"
)

// TestACompletionPromptMayBeTokenIDs sends /v1/completions the prompt
// shapes vLLM serves: token ids are the prompt's tokens as they are, one
// per id, counted against the context length and checked against the
// vocabulary.
func TestACompletionPromptMayBeTokenIDs(t *testing.T) {
	p := fast()
	p.MaxModelLen = 64
	_, srv, _ := newTestServer(t, p)
	ids := func(n int) string { return strings.TrimSuffix(strings.Repeat("7,", n), ",") }
	tests := []struct {
		name string
		body string
		want int
		// wantIn is a piece of the answer; for a 200, wantTokens is its
		// prompt_tokens.
		wantIn     string
		wantTokens int
	}{
		{"a list of ids is served, one token per id", `{"prompt":[1,2,3],"max_tokens":1}`, 200, `"text_completion"`, 3},
		{"a list of one list of ids is served", `{"prompt":[[1,2,3,4]],"max_tokens":1}`, 200, `"text_completion"`, 4},
		{"cl100k's last special token is in the vocabulary", `{"prompt":[100276],"max_tokens":1}`, 200, `"text_completion"`, 1},
		{"ids filling the context but for max_tokens are served", `{"prompt":[` + ids(63) + `],"max_tokens":1}`, 200, `"text_completion"`, 63},
		// sad path
		{"an id past the vocabulary is a 400 in vLLM's words", `{"prompt":[1,100277],"max_tokens":1}`, 400, "Token id 100277 is out of vocabulary", 0},
		{"more ids than the context length is a 400", `{"prompt":[` + ids(65) + `],"max_tokens":1}`, 400, "You passed 65 input tokens and requested 1 output tokens. However, the model's context length is only 64 tokens, resulting in a maximum input length of 63 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=65)", 0},
		{"ids and max_tokens past the context length is a 400 in vLLM's words, with the ids' exact count", `{"prompt":[` + ids(64) + `],"max_tokens":1}`, 400, "You passed 64 input tokens and requested 1 output tokens. However, the model's context length is only 64 tokens, resulting in a maximum input length of 63 tokens.", 0},
		{"a negative id is a 400", `{"prompt":[1,-2],"max_tokens":1}`, 400, "list of token ids (whole numbers from 0)", 0},
		{"no ids is a 400", `{"prompt":[],"max_tokens":1}`, 400, "prompt must not be empty", 0},
		{"one empty list of ids is a 400", `{"prompt":[[]],"max_tokens":1}`, 400, "prompt must not be empty", 0},
		{"a batch of id lists is a 400, not one answered silently", `{"prompt":[[1],[2]],"max_tokens":1}`, 400, "a batch of 2 prompts", 0},
		{"a batch of strings is a 400", `{"prompt":["a","b","c"],"max_tokens":1}`, 400, "a batch of 3 prompts", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, "POST", "/v1/completions", tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantIn) || strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 {
				t.Fatalf("got %d %.300s, want %d containing %q on one line", status, raw, tt.want, tt.wantIn)
			}
			if tt.want != 200 {
				return
			}
			var got struct {
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(raw, &got); err != nil || got.Usage.PromptTokens != tt.wantTokens {
				t.Fatalf("prompt_tokens %d (%v), want %d", got.Usage.PromptTokens, err, tt.wantTokens)
			}
		})
	}
}

// TestATokenIDPromptIsCachedAndPublishedAsItsText sends one prompt as
// text to one worker and as its token ids to another: the two workers
// cache the same blocks and publish the same KV events, so a router
// indexes either the same way.
func TestATokenIDPromptIsCachedAndPublishedAsItsText(t *testing.T) {
	text := strings.Repeat("The paged KV cache stores keys and values in blocks. ", 20)
	toks := tokenizer.Encode(text)
	ids, _ := json.Marshal(toks)
	bs := fast().BlockSize
	full := len(toks) / bs // 7 blocks of 32, of 241 tokens
	run := func(prompt string) ([]kvevents.Event, string) {
		t.Helper()
		w, srv, ev := newTestServer(t, fast())
		body := fmt.Sprintf(`{"prompt":%s,"max_tokens":1,"temperature":0}`, prompt)
		var usages []string
		for range 2 { // the second is served from the cache
			status, raw := call(t, srv, "POST", "/v1/completions", body)
			if status != 200 {
				t.Fatalf("got %d %s", status, raw)
			}
			var got struct {
				Usage json.RawMessage `json:"usage"`
			}
			json.Unmarshal(raw, &got)
			usages = append(usages, string(got.Usage))
		}
		w.Runner().Stats() // a barrier: the last step's events are out
		ev.mu.Lock()
		defer ev.mu.Unlock()
		var all []kvevents.Event
		for _, b := range ev.batches {
			all = append(all, b.Events...)
		}
		return all, strings.Join(usages, " ")
	}
	fromText, textUsage := run(jsonString(text))
	fromIDs, idsUsage := run(string(ids))
	stored := 0
	for _, e := range fromText {
		if s, ok := e.(*kvevents.BlockStored); ok {
			stored += len(s.BlockHashes)
		}
	}
	if stored < full {
		t.Fatalf("the text prompt stored %d blocks, want its %d full ones at least", stored, full)
	}
	if !reflect.DeepEqual(fromText, fromIDs) {
		t.Fatalf("KV events differ:\ntext: %+v\nids:  %+v", fromText, fromIDs)
	}
	// The repeat finds every full block but one that ends the prompt,
	// whose last token must be computed again.
	cached := (len(toks) - 1) / bs * bs
	if textUsage != idsUsage || !strings.Contains(idsUsage, fmt.Sprintf(`"cached_tokens":%d}`, cached)) {
		t.Fatalf("usage for the text %s, for its ids %s; want the same, the repeat with %d tokens cached", textUsage, idsUsage, cached)
	}
}
