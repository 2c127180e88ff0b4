package router

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/tokenizer"
)

func TestChatUntilStopsOnlyWhereAsked(t *testing.T) {
	msgs := []tokenizer.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: string(longChatText(2000, 1))},
		{Role: "assistant", Content: "Noted."},
		{Role: "user", Content: string(longChatText(2000, 2))},
	}
	want := tokenizer.Encode(tokenizer.RenderChat(msgs))
	tests := []struct {
		name   string
		cached int // leading messages already in the cache
		stopAt int // more says no once it is shown this many tokens or more; 0 never
	}{
		{"asked always to go on, it tokenizes the whole prompt and leaves no rest", 0, 0},
		{"stopped inside the first long message, rest completes the prompt", 0, 300},
		{"stopped inside the second long message", 0, 2000},
		{"cached messages are taken without asking", 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTokenCache()
			if tt.cached > 0 {
				c.chat(msgs[:tt.cached])
			}
			asked := 0
			more := func(ids []uint32) bool {
				asked++
				if !slices.Equal(ids, want[:len(ids)]) {
					t.Fatalf("more was shown %d tokens that are not the prompt's head", len(ids))
				}
				return tt.stopAt == 0 || len(ids) < tt.stopAt
			}
			head, estimate, rest, _ := c.chatUntil(msgs, more, 0)
			if !slices.Equal(head, want[:len(head)]) {
				t.Fatalf("the %d tokens returned are not the prompt's head", len(head))
			}
			if tt.stopAt == 0 {
				if rest != nil || estimate != len(want) || len(head) != len(want) {
					t.Fatalf("never stopped: got %d tokens, estimate %d, rest %v; want all %d, exact, nil", len(head), estimate, rest != nil, len(want))
				}
				return
			}
			if rest == nil {
				t.Fatalf("stopped at %d tokens but returned no rest", len(head))
			}
			if tt.cached > 0 {
				n := 0
				for _, m := range msgs[:tt.cached] {
					n += len(tokenizer.Encode(segment(m)))
				}
				if len(head) != n || asked != 1 {
					t.Fatalf("asked %d times and stopped at %d tokens; want once, after the %d tokens of the cached messages", asked, len(head), n)
				}
			}
			if off := float64(estimate-len(want)) / float64(len(want)); off < -0.15 || off > 0.15 {
				t.Fatalf("estimate %d is %.0f%% off the prompt's %d tokens", estimate, 100*off, len(want))
			}
			if all := rest(); !slices.Equal(all, want) {
				t.Fatalf("rest gave %d tokens that differ from the prompt's %d", len(all), len(want))
			}
			asked = 0
			if got, _, rest, _ := c.chatUntil(msgs, func([]uint32) bool { asked++; return false }, 0); rest != nil || asked != 0 || !slices.Equal(got, want) {
				t.Fatalf("after rest, a second pass asked %d times and left rest %v; want every message cached", asked, rest != nil)
			}
		})
	}
}

// headRouter is a router over workers a and b with blocks of 32 tokens.
func headRouter(p Policy) *Router {
	ws, _ := ParseWorkers([]string{"a=http://a:8000", "b=http://b:8000"})
	return NewRouter(NewPool(ws), p, Config{BlockSize: 32})
}

// store records that worker holds the full blocks of tokens.
func store(t *testing.T, rt *Router, worker string, tokens []uint32) {
	t.Helper()
	n := len(tokens) / 32
	ev := &kvevents.BlockStored{BlockHashes: ids(1, n), TokenIDs: tokens[:n*32], BlockSize: 32}
	if err := rt.Index().Apply(worker, ev); err != nil {
		t.Fatal(err)
	}
}

func TestReachesAsksWhetherAnyWorkerHoldsTheLastBlock(t *testing.T) {
	prompt := tokenizer.Encode(string(longChatText(533, 3)))
	chain := blockhash.Chain(prompt, 32)
	tests := []struct {
		name  string
		setup func(t *testing.T, rt *Router)
		chain []uint64
		want  bool
	}{
		{"an empty chain always reaches further", func(*testing.T, *Router) {}, nil, true},
		{"nobody holds anything", func(*testing.T, *Router) {}, chain[:4], false},
		{"a worker's cache holds the last block", func(t *testing.T, rt *Router) { store(t, rt, "b", prompt[:4*32]) }, chain[:4], true},
		{"the cache holds only an earlier block", func(t *testing.T, rt *Router) { store(t, rt, "b", prompt[:3*32]) }, chain[:4], false},
		{"a request in flight holds the last block", func(t *testing.T, rt *Router) {
			if _, err := rt.Decide(&Request{TokenIDs: prompt[:6*32]}, nil); err != nil {
				t.Fatal(err)
			}
		}, chain[:4], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := headRouter(&KV{Weight: 1})
			tt.setup(t, rt)
			if got := rt.Reaches(tt.chain); got != tt.want {
				t.Fatalf("Reaches = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("kv_approx reads the predicted index, not the event index", func(t *testing.T) {
		p, _ := NewPolicy("kv_approx")
		rt := headRouter(p)
		store(t, rt, "b", prompt[:4*32])
		if rt.Reaches(chain[:4]) {
			t.Fatal("kv_approx reached through the event index")
		}
		b, _ := rt.Decide(&Request{TokenIDs: prompt[:4*32]}, nil)
		b.Release()
		if !rt.Reaches(chain[:4]) {
			t.Fatal("kv_approx did not see its own prediction")
		}
	})
}

func TestCompleteBooksTheWholePrompt(t *testing.T) {
	prompt := tokenizer.Encode(string(longChatText(533, 4)))
	head := prompt[:3*32+5]
	tests := []struct {
		name  string
		first bool // the first token arrives before the rest is tokenized
	}{
		{"completed while prefilling", false},
		{"completed after the first token", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := headRouter(&KV{Weight: 1})
			wb, _ := whole.Decide(&Request{TokenIDs: prompt}, nil)
			rt := headRouter(&KV{Weight: 1})
			b, _ := rt.Decide(&Request{TokenIDs: head, Tokens: 300}, nil)
			if tt.first {
				b.FirstToken()
				wb.FirstToken()
			}
			if b.Worker.Name != wb.Worker.Name {
				t.Fatalf("the head went to %s, the whole prompt to %s", b.Worker.Name, wb.Worker.Name)
			}
			rt.Complete(b, prompt)
			for i, got := range rt.Workers() {
				want := whole.Workers()[i]
				if got.InFlight != want.InFlight || got.ActivePrefillTokens != want.ActivePrefillTokens || got.ActiveBlocks != want.ActiveBlocks {
					t.Fatalf("%s after completing: in flight %d, prefill %d, blocks %d; a decision on the whole prompt books %d, %d, %d",
						got.Name, got.InFlight, got.ActivePrefillTokens, got.ActiveBlocks, want.InFlight, want.ActivePrefillTokens, want.ActiveBlocks)
				}
			}
			b.Release()
			if st := rt.Workers()[0]; st.InFlight != 0 || st.ActivePrefillTokens != 0 || st.ActiveBlocks != 0 {
				t.Fatalf("after release: %+v; want nothing left", st)
			}
		})
	}
	t.Run("a booking released first stays released", func(t *testing.T) {
		rt := headRouter(&KV{Weight: 1})
		b, _ := rt.Decide(&Request{TokenIDs: head, Tokens: 300}, nil)
		b.Release()
		rt.Complete(b, prompt)
		if st := rt.Workers()[0]; st.InFlight != 0 || st.ActiveBlocks != 0 {
			t.Fatalf("a late completion booked again: %+v", st)
		}
	})
}

// gatedSSE streams a role chunk, waits on first, streams one content chunk,
// waits on last, and ends.
func gatedSSE(first, last chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(s string) {
			io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
		send("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
		for _, gate := range []chan struct{}{first, last} {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
			send("data: {\"choices\":[{\"delta\":{\"content\":\"Paged\"}}]}\n\n")
		}
		send("data: [DONE]\n\n")
	}
}

// headRuns numbers TestProxyDecidesOnThePromptHead's runs in this process,
// so that each asks a question the proxy's token cache (one per process,
// chatTokens) has never seen: under -count=2 the second run's question was
// already tokenized, and its whole prompt was known before the decision.
var headRuns atomic.Int64

func TestProxyDecidesOnThePromptHead(t *testing.T) {
	first, last := make(chan struct{}), make(chan struct{})
	open := func(gate chan struct{}) {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}
	wk := httptest.NewServer(gatedSSE(first, last))
	t.Cleanup(wk.Close)
	px, srv := newTestProxy(t, &KV{Weight: 1}, Config{}, "a="+wk.URL, "b="+wk.URL)
	t.Cleanup(func() { open(first); open(last) }) // a failed test must not leave the worker waiting
	rt := px.Router()

	// b holds all of a long document; a new question about it must still
	// find all of it there.
	doc := tokenizer.Message{Role: "user", Content: string(longChatText(2000, 5))}
	store(t, rt, "b", chatTokens.chat([]tokenizer.Message{doc})[:1400])
	post := func(msgs []tokenizer.Message) *http.Response {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": msgs})
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	question := tokenizer.Message{Role: "user", Content: string(longChatText(2000, 1000+int(headRuns.Add(1))))}
	resp := post([]tokenizer.Message{doc, question})
	if w, o := resp.Header.Get(HeaderWorker), resp.Header.Get(HeaderOverlap); w != "b" || o != "43" {
		t.Fatalf("routed to %s with %s overlap blocks; want b with all 43 blocks it holds", w, o)
	}
	br := bufio.NewReader(resp.Body)
	br.ReadString('\n')
	whole := chatTokens.chat([]tokenizer.Message{doc, question})
	if st := rt.Workers()[1]; st.ActiveBlocks >= len(whole)/32 {
		t.Fatalf("before the first token the booking holds %d blocks, the whole prompt's %d: the rest was tokenized first", st.ActiveBlocks, len(whole)/32)
	}
	open(first)
	waitFor(t, func() bool { return rt.Workers()[1].ActiveBlocks == len(whole)/32 })
	open(last)
	io.ReadAll(br)
	resp.Body.Close()
	waitFor(t, func() bool { return rt.Counts().InFlight == 0 })
	if st := rt.Workers()[1]; st.ActiveBlocks != 0 || st.ActivePrefillTokens != 0 {
		t.Fatalf("after the stream: %+v; want nothing booked", st)
	}
}
