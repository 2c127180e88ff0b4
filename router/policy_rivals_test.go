package router

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/tokenizer"
)

// picks runs p over cs n times and counts the picks.
func picks(p Policy, r *Request, cs []Candidate, n int) map[int]int {
	counts := map[int]int{}
	for range n {
		counts[p.Pick(r, cs)]++
	}
	return counts
}

func TestDynamoLatestPolicy(t *testing.T) {
	// 320 tokens at B=32 => 10 blocks.
	r := &Request{Tokens: 320, BlockSize: 32, Chain: make([]uint64, 10)}
	tests := []struct {
		name    string
		policy  string
		set     func(cs []Candidate)
		allowed []int // picks the policy may make over 200 tries, each of which must occur
	}{
		{"defaults take the cheapest worker, as Dynamo 0.9", "dynamo_latest", func(cs []Candidate) { cs[2].Overlap = 4 }, []int{2}},
		{"equal costs go to the smallest tree, overlap or not", "dynamo_latest", func(cs []Candidate) {
			cs[0].IndexBlocks, cs[1].IndexBlocks, cs[2].IndexBlocks = 50, 10, 30
		}, []int{1}},
		{"equal costs and equal trees are broken at random", "dynamo_latest", func(cs []Candidate) {}, []int{0, 1, 2}},
		{"defaults ignore how many requests a worker runs", "dynamo_latest", func(cs []Candidate) {
			// a: 3 requests sharing 10 active blocks; b: none but 11 active blocks.
			cs[0].InFlight, cs[0].ActiveBlocks = 3, 10
			cs[1].ActiveBlocks = 11
			cs[2].ActiveBlocks = 12
		}, []int{0}},
		{"the tuned decode weight charges each active request", "dynamo_tuned", func(cs []Candidate) {
			cs[0].InFlight, cs[0].ActiveBlocks = 3, 10
			cs[1].ActiveBlocks = 11
			cs[2].ActiveBlocks = 12
		}, []int{1}},
		{"the tuned credit decay discounts a cache hit behind a prefill queue", "dynamo_tuned", func(cs []Candidate) {
			// a: 8 blocks cached but 40 blocks of prefill queued: credit 8/(1+4) = 1.6,
			// cost 40+10−1.6 + 10 = 58.4. b: 30 queued, no cache: 30+10 + 10 = 50.
			cs[0].Overlap, cs[0].PrefillTokens = 8, 40*32
			cs[1].PrefillTokens = 30 * 32
			cs[2].PrefillTokens = 60 * 32
		}, []int{1}},
		{"without decay the same cache hit wins", "dynamo_latest", func(cs []Candidate) {
			// a: 40+10−8 + 10 = 52 < b's 50? no: 52 > 50, so a hit of 8 is not enough...
			cs[0].Overlap, cs[0].PrefillTokens = 8, 40*32
			cs[1].PrefillTokens = 33 * 32 // b: 33+10 + 10 = 53
			cs[2].PrefillTokens = 60 * 32
		}, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicyWith(tt.policy, Knobs{Weight: 1, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			cs := cands(fleet(3))
			tt.set(cs)
			counts := picks(p, r, cs, 200)
			for i := range counts {
				if !containsInt(tt.allowed, i) {
					t.Fatalf("picked %d; allowed %v (counts %v)", i, tt.allowed, counts)
				}
			}
			if len(counts) != len(tt.allowed) {
				t.Fatalf("picks %v never covered all of %v", counts, tt.allowed)
			}
		})
	}
}

func TestDynamoLatestCost(t *testing.T) {
	r := &Request{Tokens: 320, BlockSize: 32, Chain: make([]uint64, 10)}
	tests := []struct {
		name string
		p    DynamoLatest
		c    Candidate
		want float64
	}{
		// 10 prompt blocks, 4 cached => 6 to prefill; 10 to decode.
		{"defaults give Dynamo 0.9's cost", DynamoLatest{Credit: 1, PrefillScale: 1}, Candidate{Overlap: 4}, 16},
		// Credit 1/(1+1·(20/10)) = 1/3 of 6 cached blocks = 2: 20+10−2 = 28, plus 10.
		{"decay shrinks the credit with the queued prefill", DynamoLatest{Credit: 1, CreditDecay: 1, PrefillScale: 1}, Candidate{Overlap: 6, PrefillTokens: 640}, 38},
		// 10 prefill + 10 decode + 2·64.
		{"each active request costs the decode weight", DynamoLatest{Credit: 1, PrefillScale: 1, RequestWeight: 64}, Candidate{InFlight: 2}, 148},
		// (10−20) clamps to 0 prefill.
		{"a credit above the prefill load never goes negative", DynamoLatest{Credit: 2, PrefillScale: 1}, Candidate{Overlap: 10}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Cost(r, &tt.c); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("Cost = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestSGLangPolicy(t *testing.T) {
	chain := func(hs ...uint64) []uint64 { return hs }
	tests := []struct {
		name string
		// sent are earlier prompts: each a chain and the worker it went to.
		sent []struct {
			chain  []uint64
			worker int
		}
		inflight []int
		req      []uint64 // 32-token blocks
		want     int
	}{
		{
			name: "a prompt matched above 30% goes to the worker it was sent to",
			sent: []struct {
				chain  []uint64
				worker int
			}{{chain(1, 2, 3, 4), 2}},
			inflight: []int{0, 0, 5},
			req:      chain(1, 2, 3, 9, 9, 9), // 3 of 6 blocks => 50%
			want:     2,
		},
		{
			name: "a match of 30% or less goes to the least loaded, not the smallest tree",
			sent: []struct {
				chain  []uint64
				worker int
			}{{chain(1, 2, 3, 4), 0}, {chain(7, 8), 2}},
			inflight: []int{3, 5, 2},          // b's tree is empty, c is the least loaded
			req:      chain(1, 5, 6, 9, 9, 9), // 1 of 6 => 17%
			want:     2,
		},
		{
			name: "equal loads below the threshold go to the earlier worker",
			sent: []struct {
				chain  []uint64
				worker int
			}{{chain(1, 2, 3, 4), 0}},
			inflight: []int{4, 2, 2},
			req:      chain(5, 6, 7),
			want:     1,
		},
		{
			name: "an imbalanced fleet sends to the least loaded, match or not",
			sent: []struct {
				chain  []uint64
				worker int
			}{{chain(1, 2, 3, 4), 0}},
			inflight: []int{100, 30, 31}, // 100−30 > 64 and 100 > 1.5·30
			req:      chain(1, 2, 3, 4),
			want:     1,
		},
		{
			name: "a spread over 64 that is not 1.5 times the minimum is balanced",
			sent: []struct {
				chain  []uint64
				worker int
			}{{chain(1, 2, 3, 4), 0}},
			inflight: []int{200, 135, 136}, // 200−135 > 64 but 200 < 1.5·135
			req:      chain(1, 2, 3, 4),
			want:     0,
		},
		{
			name: "equal matches go to the earlier worker",
			sent: []struct {
				chain  []uint64
				worker int
			}{{chain(1, 2), 2}, {chain(1, 2), 1}},
			inflight: []int{0, 0, 0},
			req:      chain(1, 2, 3),
			want:     1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewSGLang(32)
			cs := cands(fleet(3))
			for _, s := range tt.sent {
				p.tree.insert(cs[s.worker].Worker.Name, s.chain)
			}
			for i, n := range tt.inflight {
				cs[i].InFlight = n
			}
			r := &Request{Tokens: 32 * len(tt.req), BlockSize: 32, Chain: tt.req}
			if got := p.Pick(r, cs); got != tt.want {
				t.Fatalf("picked %d, want %d", got, tt.want)
			}
			if m := p.tree.match(cs[tt.want].Worker.Name, tt.req); m != len(tt.req) {
				t.Fatalf("the chosen worker's tree matches %d of %d blocks after the pick: the prompt was not inserted", m, len(tt.req))
			}
		})
	}
}

func TestSentIndexEvictsTailsFirst(t *testing.T) {
	s := newSentIndex(4)
	s.insert("a", []uint64{1, 2, 3})
	s.insert("a", []uint64{7, 8})
	// 5 blocks in a cap of 4: the least recent is 3, the tail of the first prompt.
	if got := s.match("a", []uint64{1, 2, 3}); got != 2 {
		t.Fatalf("match after eviction = %d, want 2 (the head survives)", got)
	}
	if got := s.match("a", []uint64{7, 8}); got != 2 {
		t.Fatalf("match of the latest prompt = %d, want 2", got)
	}
	if got := s.match("b", []uint64{1}); got != 0 {
		t.Fatalf("a worker sent nothing matches %d blocks, want 0", got)
	}
}

// blockText is n blocks of llm-d's text hashing at kvlens's block size
// (32 tokens, 128 bytes), block i filled with the letter 'a'+ids[i].
func blockText(ids ...int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strings.Repeat(string(rune('a'+id)), 4*32))
	}
	return b.String()
}

func TestLLMDPolicy(t *testing.T) {
	tests := []struct {
		name     string
		sent     map[int]string // worker => prompt sent there
		inflight []int
		active   []int // active blocks, of 1000 KV blocks
		req      string
		allowed  []int
	}{
		{
			name: "the prefix scorer (weight 3) outweighs a fuller cache (weight 2)",
			// a: 3·1 + 2·1 + 2·(1−0.4) = 6.2; b, c: 0 + 2 + 2 = 4.
			sent: map[int]string{0: blockText(1, 2, 3, 4)}, inflight: []int{0, 0, 0}, active: []int{400, 0, 0},
			req: blockText(1, 2, 3, 4), allowed: []int{0},
		},
		{
			name: "a full queue outweighs half a prefix",
			// a: 3·0.5 + 2·0 + 2 = 3.5 (4 waiting); b: 0 + 2·1 + 2 = 4; c: 0 + 2·0.5 + 2 = 3.
			sent: map[int]string{0: blockText(1, 2)}, inflight: []int{68, 64, 66}, active: []int{0, 0, 0},
			req: blockText(1, 2, 3, 4), allowed: []int{1},
		},
		{
			// Every score is 0 + 2 + 2, so the picks are at random.
			name: "requests within the batch capacity do not count as queued",
			sent: map[int]string{}, inflight: []int{60, 10, 0}, active: []int{0, 0, 0},
			req: blockText(1, 2), allowed: []int{0, 1, 2},
		},
		{
			// c: 3·0.5 + 2 + 2 = 5.5; a (block 9 is no prefix): 4; b: 2 + 2·0.5 = 3.
			name: "half a prefix beats no prefix",
			sent: map[int]string{0: blockText(9), 2: blockText(1, 2)}, inflight: []int{0, 0, 0}, active: []int{0, 500, 0},
			req: blockText(1, 2, 3, 4), allowed: []int{2},
		},
		{
			// b was sent this very prompt, a another that shares its first
			// 256 blocks; past 256 the scorer reads nothing, so both score
			// 3 + 2 and a's emptier cache wins: 7 against 3 + 2 + 1.99.
			// Were the 257th block read, b's 3 would beat a's 3·256/257 by
			// more than a's cache makes up.
			name:     "past 256 blocks two prompts look the same",
			sent:     map[int]string{0: blockText(append(make([]int, 256), 5)...), 1: blockText(append(make([]int, 256), 6)...)},
			inflight: []int{0, 0, 0}, active: []int{0, 5, 0},
			req: blockText(append(make([]int, 256), 6)...), allowed: []int{0},
		},
		{
			// Every score is 0 + 2 + 2: no whole block, no prefix.
			name: "a prompt shorter than one block matches nothing",
			sent: map[int]string{0: blockText(1)}, inflight: []int{0, 0, 0}, active: []int{0, 0, 0},
			req: blockText(1)[:127], allowed: []int{0, 1, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := cands(fleet(3))
			for i := range cs {
				cs[i].InFlight, cs[i].ActiveBlocks = tt.inflight[i], tt.active[i]
			}
			r := &Request{Path: "/v1/completions", Body: completionBody(tt.req), BlockSize: 32}
			counts := map[int]int{}
			for seed := range 100 {
				p := &LLMD{PrefixWeight: 3, QueueWeight: 2, KVWeight: 2, KVBlocks: 1000, rng: newRand(uint64(seed + 1))}
				for w, text := range tt.sent {
					sent := &Request{Path: "/v1/completions", Body: completionBody(text), BlockSize: 32}
					only := []Candidate{cs[w]}
					p.Pick(sent, only)
				}
				counts[p.Pick(r, cs)]++
			}
			for i := range counts {
				if !containsInt(tt.allowed, i) {
					t.Fatalf("picked %d; allowed %v (counts %v)", i, tt.allowed, counts)
				}
			}
			if len(counts) != len(tt.allowed) {
				t.Fatalf("picks %v never covered all of %v", counts, tt.allowed)
			}
		})
	}
}

func completionBody(prompt string) []byte {
	b, _ := json.Marshal(map[string]string{"prompt": prompt})
	return b
}

func TestPromptText(t *testing.T) {
	tests := []struct {
		name string
		r    Request
		want string // "" means nil
	}{
		{"a chat's messages are compact JSON", Request{Path: "/v1/chat/completions",
			Body: []byte(`{"model":"m", "messages": [ {"role":"user", "content":"hi"} ]}`)}, `[{"role":"user","content":"hi"}]`},
		{"parsed messages give the same JSON as the body", Request{Path: "/v1/chat/completions",
			Messages: []tokenizer.Message{{Role: "user", Content: "hi"}}}, `[{"role":"user","content":"hi"}]`},
		{"a completion's prompt is its text", Request{Path: "/v1/completions", Body: []byte(`{"prompt":"a\u00e9b"}`)}, "a\u00e9b"},
		{"several prompts are joined by newlines", Request{Path: "/v1/completions", Body: []byte(`{"prompt":["a","b"]}`)}, "a\nb"},
		// Sad paths: nothing to match.
		{"a body that is not JSON", Request{Path: "/v1/chat/completions", Body: []byte(`{"messages":`)}, ""},
		{"messages that are not a list", Request{Path: "/v1/chat/completions", Body: []byte(`{"messages":{"role":"user"}}`)}, ""},
		{"a prompt of token ids", Request{Path: "/v1/completions", Body: []byte(`{"prompt":[1,2,3]}`)}, ""},
		{"a chat path without messages", Request{Path: "/v1/chat/completions", Body: []byte(`{"prompt":"x"}`)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PromptText(&tt.r)
			if (got == nil) != (tt.want == "") || string(got) != tt.want {
				t.Fatalf("PromptText = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzPromptText feeds PromptText any body: it never panics, and a chat's
// text, when there is one, is a JSON list.
func FuzzPromptText(f *testing.F) {
	f.Add("/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Add("/v1/completions", []byte(`{"prompt":["a","b"]}`))
	f.Add("/v1/completions", []byte(`{"prompt":"x"}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		got := PromptText(&Request{Path: path, Body: body})
		if got != nil && strings.HasSuffix(path, "/chat/completions") {
			var list []json.RawMessage
			if json.Unmarshal(got, &list) != nil {
				t.Fatalf("chat text %q is not a JSON list", got)
			}
		}
	})
}

func TestSGLangEventsPolicy(t *testing.T) {
	tests := []struct {
		name     string
		overlap  []int
		inflight []int
		index    []int
		tokens   int
		want     int
	}{
		{"the most cached blocks win, even on the busiest worker", []int{2, 5, 1}, []int{1, 40, 0}, nil, 320, 1},
		{"any cached block beats none, with no threshold", []int{0, 1, 0}, []int{0, 9, 0}, nil, 3200, 1},
		{"equal overlaps go to the less loaded", []int{4, 4, 0}, []int{7, 3, 0}, nil, 320, 1},
		{"equal overlaps and loads go to the smaller index", []int{4, 4, 4}, []int{2, 2, 2}, []int{90, 30, 60}, 320, 1},
		{"ties in every figure go to the later worker", []int{4, 4, 0}, []int{2, 2, 0}, []int{10, 10, 0}, 320, 1},
		{"no worker holding a block sends to the least loaded, the earlier of equals", []int{0, 0, 0}, []int{5, 2, 2}, nil, 320, 1},
		{"an imbalanced fleet sends to the least loaded, cache or not", []int{9, 0, 0}, []int{100, 30, 31}, nil, 320, 1},
		{"a spread over 64 that is not 1.5 times the minimum is balanced", []int{9, 0, 0}, []int{200, 135, 136}, nil, 320, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy("sglang_events")
			if err != nil {
				t.Fatal(err)
			}
			cs := cands(fleet(3))
			for i := range cs {
				cs[i].Overlap, cs[i].InFlight = tt.overlap[i], tt.inflight[i]
				if tt.index != nil {
					cs[i].IndexBlocks = tt.index[i]
				}
			}
			r := &Request{Tokens: tt.tokens, BlockSize: 32, Chain: make([]uint64, tt.tokens/32)}
			if got := p.Pick(r, cs); got != tt.want {
				t.Fatalf("picked %d, want %d", got, tt.want)
			}
		})
	}
}
