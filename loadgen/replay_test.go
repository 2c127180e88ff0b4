package loadgen

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/tokenizer"
)

// syntheticTrace makes n records in the Mooncake shape: each belongs to one
// of 40 prefix families (two shared 512-token blocks) and adds up to two
// blocks of its own, with gaps of 0–maxGap ms, bursts included.
func syntheticTrace(n, maxGap int) []TraceRecord {
	rng := rand.New(rand.NewPCG(4, 4))
	recs := make([]TraceRecord, n)
	ts, next := int64(0), int64(1_000_000)
	for i := range recs {
		f := int64(rng.IntN(40))
		ids := []int64{f * 2, f*2 + 1}
		for range rng.IntN(3) {
			ids = append(ids, next)
			next++
		}
		recs[i] = TraceRecord{
			Timestamp:    ts,
			InputLength:  (len(ids)-1)*TraceBlockTokens + 1 + rng.IntN(TraceBlockTokens),
			OutputLength: 2,
			HashIDs:      ids,
			Line:         i + 1,
		}
		ts += int64(rng.IntN(maxGap + 1))
	}
	return recs
}

// replayAll replays trace against h and returns the final snapshot.
func replayAll(t *testing.T, trace []TraceRecord, h http.Handler) Snapshot {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Trace = trace
	g, err := New(NewOpenAIClient(srv.URL+"/v1", "m", ""), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	deadline := time.Now().Add(30 * time.Second)
	for g.Snapshot().Trace.Finished < len(trace) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d requests finished in 30 s", g.Snapshot().Trace.Finished, len(trace))
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.Stop()
	s := g.Snapshot()
	if s.Window.Errors != 0 || s.Trace.Sent != len(trace) {
		t.Fatalf("%d errors, %d sent", s.Window.Errors, s.Trace.Sent)
	}
	return s
}

// slowTrace answers every request on a virtual clock after a fixed delay,
// and records when each prompt was sent.
type slowTrace struct {
	loop  *des.Loop
	delay time.Duration
	sent  map[string][]time.Duration // prompt text → when it was sent, since the epoch
}

func (s *slowTrace) Start(req TurnRequest, _ func(string, time.Duration), done func(Result)) func(error) {
	now := s.loop.Now()
	prompt := req.Messages[len(req.Messages)-1].Content
	s.sent[prompt] = append(s.sent[prompt], now.Sub(des.Epoch))
	s.loop.AfterFunc(s.delay, func() {
		done(Result{Text: "ok", Start: now, TTFT: s.delay / 2, E2E: s.delay, OSL: 2, FirstChunkTokens: 1, Worker: "w"})
	})
	return func(error) {}
}

// TestTraceReplayKeepsItsSchedule replays 1,000 requests, some at the same
// millisecond, in virtual time against a server that takes 30 s to answer
// each, and requires every request to be sent at its own timestamp from the
// replay's start, to the nanosecond: a replay that waited for answers, paced itself, or slept the
// gaps cumulatively (drifting by each wake-up's delay) would miss. How late
// a replay is on the wall clock is BenchmarkTraceReplaySchedule's figure.
func TestTraceReplayKeepsItsSchedule(t *testing.T) {
	trace := syntheticTrace(1000, 4)
	loop := des.New(des.Epoch)
	tr := &slowTrace{loop: loop, delay: 30 * time.Second, sent: map[string][]time.Duration{}}
	cfg := DefaultConfig()
	cfg.Trace, cfg.Clock = trace, loop
	g, err := NewAsync(tr, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	last := time.Duration(trace[len(trace)-1].Timestamp) * time.Millisecond
	loop.Run(last + time.Minute)
	g.Stop()
	// The replay starts replayLead after Start, so that the first prompt is
	// synthesized ahead of its time as every other is.
	want := map[string][]time.Duration{}
	for _, r := range trace {
		p := TracePrompt(r)
		want[p] = append(want[p], replayLead+time.Duration(r.Timestamp)*time.Millisecond)
	}
	if len(tr.sent) != len(want) {
		t.Fatalf("%d distinct prompts sent, the trace has %d", len(tr.sent), len(want))
	}
	for p, at := range want {
		if !slices.Equal(tr.sent[p], at) {
			t.Fatalf("a prompt was sent at %v, its records say %v", tr.sent[p], at)
		}
	}
	if s := g.Snapshot(); s.Trace.Sent != len(trace) || s.Trace.Lag.P99 != 0 {
		t.Errorf("snapshot: %d sent, lag p99 %.3f ms; want %d and 0", s.Trace.Sent, s.Trace.Lag.P99, len(trace))
	}
}

// BenchmarkTraceReplaySchedule replays the 1,000-request trace and reports
// how late requests were sent: go test -run '^$' -bench TraceReplaySchedule -benchtime 1x ./loadgen
func BenchmarkTraceReplaySchedule(b *testing.B) {
	for range b.N {
		trace := syntheticTrace(1000, 4)
		srv := httptest.NewServer(streamServer(func(*http.Request) streamSpec {
			return streamSpec{ttft: time.Millisecond, itl: time.Millisecond, tokens: 2, perChunk: 1}
		}))
		cfg := DefaultConfig()
		cfg.Trace = trace
		g, err := New(NewOpenAIClient(srv.URL+"/v1", "m", ""), cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		g.Start()
		for g.Snapshot().Trace.Finished < len(trace) {
			time.Sleep(10 * time.Millisecond)
		}
		g.Stop()
		srv.Close()
		s := g.Snapshot()
		b.ReportMetric(s.Trace.Lag.P50, "lag_p50_ms")
		b.ReportMetric(s.Trace.Lag.P99, "lag_p99_ms")
		b.ReportMetric(float64(s.Window.Errors), "errors")
	}
}

// TestTraceReplayYieldsTheCachePatternOfItsHashIDs replays 1,000 requests
// against a server that computes cached tokens from the prompt's own tokens
// (cl100k, then Dynamo block hashes in a prefix set), and checks that each
// request's cached tokens are what its hash_ids imply.
func TestTraceReplayYieldsTheCachePatternOfItsHashIDs(t *testing.T) {
	n := 1000
	if raceEnabled {
		n = 200 // the race detector makes the server's tokenizer ~10× slower
	}
	trace := syntheticTrace(n, 2)
	line := map[string]int{}
	for i, r := range trace {
		line[TracePrompt(r)] = i
	}
	var mu sync.Mutex
	seen := map[uint64]bool{} // block hashes the server has cached
	var order []int           // record indexes in arrival order
	served := map[int]int{}   // record index -> cached tokens the server reported
	s := replayAll(t, trace, streamServer(func(*http.Request) streamSpec {
		return streamSpec{ttft: time.Millisecond, itl: time.Millisecond, tokens: 2, perChunk: 1, worker: "w",
			cached: func(req chatBody) (int, int) {
				content := req.Messages[0].Content
				tokens := tokenizer.Encode(content)
				chain := blockhash.Chain(tokens, TraceBlockTokens)
				mu.Lock()
				defer mu.Unlock()
				hit := 0
				for hit < len(chain) && seen[chain[hit]] {
					hit++
				}
				for _, h := range chain {
					seen[h] = true
				}
				i := line[content]
				order = append(order, i)
				served[i] = hit * TraceBlockTokens
				return len(tokens), hit * TraceBlockTokens
			}}
	}))
	t.Logf("KV hit rate %.3f", s.Window.KVHitRate)

	// The hash_ids alone, taken in the order the server saw the requests,
	// imply each request's cached tokens: its leading run of already-seen
	// full blocks.
	known := map[int64]bool{}
	var wantCached, prompt int
	for _, i := range order {
		r := trace[i]
		full := min(len(r.HashIDs), r.InputLength/TraceBlockTokens)
		hit := 0
		for hit < full && known[r.HashIDs[hit]] {
			hit++
		}
		for _, h := range r.HashIDs[:full] {
			known[h] = true
		}
		if served[i] != hit*TraceBlockTokens {
			t.Fatalf("record %d (hash_ids %v): server cached %d tokens, hash_ids imply %d", r.Line, r.HashIDs, served[i], hit*TraceBlockTokens)
		}
		wantCached += hit * TraceBlockTokens
		prompt += r.InputLength
	}
	if want := float64(wantCached) / float64(prompt); s.Window.KVHitRate < want-1e-9 || s.Window.KVHitRate > want+1e-9 {
		t.Fatalf("window KV hit rate %.4f, hash_ids imply %.4f", s.Window.KVHitRate, want)
	}
}
