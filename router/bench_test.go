package router

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/tokenizer"
)

// The benchmark fleet: 64 workers and 1,000,000 distinct indexed blocks, as
// 2,500 prompts of 400 blocks (12,800 tokens at B=32), each held by two
// workers.
const (
	benchWorkers = 64
	benchPrompts = 2500
	benchBlocks  = 400
	benchB       = 32
)

func benchNames() []string {
	n := make([]string, benchWorkers)
	for i := range n {
		n[i] = fmt.Sprintf("w%02d", i)
	}
	return n
}

// benchPrompt returns prompt p's token ids, distinct from every other's.
func benchPrompt(p int) []uint32 {
	t := make([]uint32, benchBlocks*benchB)
	for i := range t {
		t[i] = uint32(p*len(t) + i)
	}
	return t
}

func fillBenchIndex(apply func(worker string, ev kvevents.Event) error) {
	names := benchNames()
	hashes := make([]uint64, benchBlocks)
	for p := range benchPrompts {
		tokens := benchPrompt(p)
		for i := range hashes {
			hashes[i] = uint64(p*benchBlocks + i + 1)
		}
		ev := &kvevents.BlockStored{BlockHashes: hashes, TokenIDs: tokens, BlockSize: benchB}
		apply(names[p%benchWorkers], ev)
		apply(names[(p+7)%benchWorkers], ev)
	}
}

var (
	benchIndexOnce sync.Once
	benchIndex     *Index
)

func sharedBenchIndex(b *testing.B) *Index {
	benchIndexOnce.Do(func() {
		benchIndex = NewIndex(benchB, 0)
		fillBenchIndex(benchIndex.Apply)
	})
	if pairs, distinct := benchIndex.Size(); distinct != benchPrompts*benchBlocks {
		b.Fatalf("index holds %d distinct blocks (%d pairs), want %d", distinct, pairs, benchPrompts*benchBlocks)
	}
	return benchIndex
}

// reportPercentiles adds p50 and p99 of d, in µs, to the benchmark's output.
func reportPercentiles(b *testing.B, prefix string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / 1e3 }
	b.ReportMetric(at(0.50), prefix+"p50-µs")
	b.ReportMetric(at(0.99), prefix+"p99-µs")
}

// BenchmarkFindMatches looks up a 400-block prompt that two of 64 workers
// hold in full, so every block is visited, in an index of 1,000,000 blocks.
func BenchmarkFindMatches(b *testing.B) {
	benchLookups(b, sharedBenchIndex(b))
}

// benchLookups looks up every benchmark prompt in turn in x, and reports the
// percentiles of one lookup's time.
func benchLookups(b *testing.B, x *Index) {
	names := benchNames()
	// Every prompt in turn, in a scattered order, so that lookups do not
	// find a few prompts warm in the cache.
	chains := make([][]uint64, benchPrompts)
	for i := range chains {
		chains[i] = benchChain(i * 37 % benchPrompts)
	}
	dst := make([]int, len(names))
	lat := make([]time.Duration, 0, b.N)
	runtime.GC() // the build's garbage is not the lookup's cost
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := chains[i%len(chains)]
		t0 := time.Now()
		dst = x.FindMatches(c, names, dst)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	if d := x.FindMatches(chains[0], names, nil); d[0] != benchBlocks || d[7] != benchBlocks || d[1] != 0 {
		b.Fatalf("prompt 0 matched %v; want 400 on w00 and w07", d[:8])
	}
	reportPercentiles(b, "", lat)
}

func benchChain(p int) []uint64 {
	return (&Router{blockSize: benchB}).Hash(benchPrompt(p))
}

// BenchmarkFindMatchesFragmented is BenchmarkFindMatches on indexes whose
// prompts were stored a few blocks at a time, all 2,500 prompts interleaved,
// as turns of many conversations arrive: a prompt's blocks are scattered
// through memory instead of laid out in order. In "8-block" each event
// stores 8 blocks; in "1-block" each stores one, as vLLM publishes the blocks
// of generated tokens while a batch decodes.
func BenchmarkFindMatchesFragmented(b *testing.B) {
	for _, step := range []int{8, 1} {
		b.Run(fmt.Sprintf("%d-block", step), func(b *testing.B) { benchFragmented(b, step) })
	}
}

func benchFragmented(b *testing.B, step int) {
	x := NewIndex(benchB, 0)
	names := benchNames()
	prompts := make([][]uint32, benchPrompts)
	for p := range prompts {
		prompts[p] = benchPrompt(p)
	}
	for s := 0; s < benchBlocks; s += step {
		for p := range benchPrompts {
			ev := &kvevents.BlockStored{BlockHashes: ids(p*benchBlocks+s+1, step), TokenIDs: prompts[p][s*benchB : (s+step)*benchB], BlockSize: benchB}
			if s > 0 {
				ev.Parent, ev.HasParent = uint64(p*benchBlocks+s), true
			}
			for _, w := range []string{names[p%benchWorkers], names[(p+7)%benchWorkers]} {
				if err := x.Apply(w, ev); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	prompts = nil
	benchLookups(b, x)
}

// BenchmarkApply feeds block events to an index already holding 1,000,000
// blocks: each of 64 workers stores a 400-block prompt in events of 8 blocks
// and then evicts it, again and again. Decoding is not included.
func BenchmarkApply(b *testing.B) {
	x := NewIndex(benchB, 0)
	fillBenchIndex(x.Apply)
	names := benchNames()
	var evs []kvevents.Event
	var owners []string
	const step = 8
	for w := range benchWorkers {
		tokens := benchPrompt(benchPrompts + w)
		for s := 0; s < benchBlocks; s += step {
			ev := &kvevents.BlockStored{BlockHashes: ids(1<<40+w*1000+s, step), TokenIDs: tokens[s*benchB : (s+step)*benchB], BlockSize: benchB}
			if s > 0 {
				ev.Parent, ev.HasParent = uint64(1<<40+w*1000+s-1), true
			}
			evs, owners = append(evs, ev), append(owners, names[w])
		}
		for s := benchBlocks - step; s >= 0; s -= step {
			evs, owners = append(evs, &kvevents.BlockRemoved{BlockHashes: ids(1<<40+w*1000+s, step)}), append(owners, names[w])
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		j := i % len(evs)
		if err := x.Apply(owners[j], evs[j]); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*step)/el.Seconds(), "blocks/s")
	if st := x.Stats(); st["BlockStored"][OutcomeUnknownParent] != 0 || st["BlockRemoved"][OutcomeUnknownBlock] != 0 {
		b.Fatalf("events were dropped: %v", st)
	}
}

// BenchmarkIndexMemory measures the heap the 1,000,000-block index takes,
// per (worker, block) pair.
func BenchmarkIndexMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := NewIndex(benchB, 0)
		fillBenchIndex(x.Apply)
		runtime.GC()
		runtime.ReadMemStats(&after)
		pairs, distinct := x.Size()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(pairs), "B/pair")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB")
		b.ReportMetric(float64(distinct), "blocks")
		runtime.KeepAlive(x)
	}
}

// BenchmarkDecide is a full routing decision over 64 workers and the
// 1,000,000-block index: hashing 12,800 tokens, lookup, scoring and booking.
// Tokenization is excluded; BenchmarkPromptTokens measures it.
func BenchmarkDecide(b *testing.B) {
	for _, name := range []string{"kv", "dynamo", "kv_approx"} {
		b.Run(name, func(b *testing.B) {
			x := sharedBenchIndex(b)
			var ws []*Worker
			for _, n := range benchNames() {
				w, _ := parseWorker(0, n+"=http://"+n+":8000,events=tcp://"+n+":5557")
				ws = append(ws, w)
			}
			p, _ := NewPolicy(name)
			rt := NewRouter(NewPool(ws), p, Config{BlockSize: benchB})
			rt.index = x // share the big index; the router only reads it
			prompts := make([][]uint32, 16)
			for i := range prompts {
				prompts[i] = benchPrompt(i * 101)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				bk, err := rt.Decide(&Request{TokenIDs: prompts[i%len(prompts)]}, nil)
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				bk.Release()
			}
			b.StopTimer()
			reportPercentiles(b, "", lat)
		})
	}
}

// BenchmarkPromptTokens is the tokenization the proxy adds before a decision,
// for a chat of about 12,800 tokens: "cold" tokenizes all of it (a prompt
// never seen), "follow-up" a conversation whose history earlier turns
// already tokenized, plus a new question.
func BenchmarkPromptTokens(b *testing.B) {
	history := longChatBody(12800)
	var req struct {
		Messages []tokenizer.Message `json:"messages"`
	}
	if err := json.Unmarshal(history, &req); err != nil {
		b.Fatal(err)
	}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for i := 0; i < b.N; i++ {
			n = len(tokenizer.Encode(tokenizer.RenderChat(req.Messages)))
		}
		b.ReportMetric(float64(n), "tokens")
	})
	b.Run("follow-up", func(b *testing.B) {
		PromptTokens("/v1/chat/completions", history)
		bodies := make([][]byte, b.N)
		for i := range bodies {
			msgs := append(slices.Clone(req.Messages), tokenizer.Message{Role: "user", Content: fmt.Sprintf("And question %d?", i)})
			bodies[i], _ = json.Marshal(map[string]any{"model": "m", "messages": msgs})
		}
		b.ReportAllocs()
		b.ResetTimer()
		n := 0
		for i := 0; i < b.N; i++ {
			n = len(PromptTokens("/v1/chat/completions", bodies[i]))
		}
		b.ReportMetric(float64(n), "tokens")
	})
}

func longChatBody(tokens int) []byte {
	var sb strings.Builder
	words := []string{"paged", "attention", "splits", "the", "cache", "into", "blocks", "of", "thirty-two", "tokens"}
	for i := 0; tokenizer.Count(sb.String()) < tokens; i++ {
		for j := range 100 {
			sb.WriteString(words[(i*7+j)%len(words)])
			sb.WriteByte(' ')
		}
	}
	return fmt.Appendf(nil, `{"model":"m","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":%q}]}`, sb.String())
}

// BenchmarkProxyTTFT measures the time to first SSE chunk from a worker that
// answers at once, called directly and through the proxy, alternating in the
// same run; added-p99 is the proxy's cost at the 99th percentile. Each
// request is new: "cold" prompts share nothing with earlier ones, so the
// proxy tokenizes all of them; a "follow-up" repeats a conversation's
// history and adds a new question, as a chat's next turn does. The garbage
// collector runs at the target the kvlens binary sets (loadgen.TuneGC).
func BenchmarkProxyTTFT(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(loadgen.MeasuringGCPercent))
	for _, tc := range []struct {
		name    string
		tokens  int
		history bool
	}{{"cold-200", 200, false}, {"cold-2000", 2000, false}, {"follow-up-2000", 2000, true}} {
		b.Run(tc.name, func(b *testing.B) {
			proxyRuns++
			salt := proxyRuns * 1_000_003
			wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n")
			}))
			defer wk.Close()
			ws, _ := ParseWorkers([]string{"a=" + wk.URL, "b=" + wk.URL, "c=" + wk.URL})
			kv, _ := NewPolicy("kv")
			px := httptest.NewServer(NewProxy(NewRouter(NewPool(ws), kv, Config{})))
			defer px.Close()
			history := string(longChatText(tc.tokens, 0))
			body := func(i int) string {
				q := fmt.Sprintf("Question %d: and what happens to the cache when request %d arrives?", i, i)
				if tc.history {
					return fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":%q},{"role":"assistant","content":"Noted."},{"role":"user","content":%q}]}`, history, q)
				}
				return fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":%q}]}`, q+" "+string(longChatText(tc.tokens, salt+i+1)))
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			ttft := func(base, body string) time.Duration {
				t0 := time.Now()
				resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				line, _ := bufio.NewReader(resp.Body).ReadString('\n')
				d := time.Since(t0)
				if !strings.HasPrefix(line, "data: ") {
					b.Fatalf("first line %q", line)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return d
			}
			bodies := make([]string, b.N)
			for i := range bodies {
				bodies[i] = body(i)
			}
			ttft(px.URL, body(-1)) // warm the connections (and, for follow-ups, the history)
			ttft(wk.URL, body(-1))
			direct := make([]time.Duration, 0, b.N)
			proxied := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				direct = append(direct, ttft(wk.URL, bodies[i]))
				proxied = append(proxied, ttft(px.URL, bodies[i]))
				time.Sleep(proxyGap)
			}
			b.StopTimer()
			reportPercentiles(b, "direct-", direct)
			reportPercentiles(b, "proxy-", proxied)
			b.ReportMetric((float64(proxied[len(proxied)*99/100])-float64(direct[len(direct)*99/100]))/1e3, "added-p99-µs")
		})
	}
}

// proxyGap separates the requests of BenchmarkProxyTTFT, as independent
// clients' requests are: work a request leaves behind (the rest of a long
// prompt's tokens, the stream's end) then does not land on the next one's
// clock. Back to back, the benchmark would measure the router's throughput
// on 2 cores, not the latency it adds to one request.
const proxyGap = 2 * time.Millisecond

// proxyRuns salts BenchmarkProxyTTFT's prompts, so that no run (of -count)
// finds an earlier run's prompts in the token cache.
var proxyRuns int

// longChatText is about n tokens of prose, varied by seed.
func longChatText(n, seed int) []byte {
	words := []string{"paged", "attention", "splits", "the", "cache", "into", "blocks", "of", "thirty-two", "tokens", "and", "evicts"}
	var sb strings.Builder
	for i := 0; i < n*3/4; i++ {
		sb.WriteString(words[(i*7+seed*13+i/len(words))%len(words)])
		sb.WriteByte(' ')
	}
	fmt.Fprintf(&sb, "(%d)", seed)
	return []byte(sb.String())
}
