package loadgen

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlens/kvlens/tokenizer"
)

// p99Abs returns the 99th percentile of |x| (nearest rank).
func p99Abs(xs []time.Duration) time.Duration { return quantileAbs(xs, 0.99) }

// quantileAbs returns the q-quantile of |x|, nearest rank.
func quantileAbs(xs []time.Duration, q float64) time.Duration {
	a := make([]time.Duration, len(xs))
	for i, x := range xs {
		a[i] = max(x, -x)
	}
	slices.Sort(a)
	return a[int(math.Ceil(q*float64(len(a))))-1]
}

// runStreams sends n requests, starting them evenly over spread, and returns
// their results. Real conversations are not phase-locked: spreading the
// starts keeps the test from measuring an artificial burst of n
// simultaneous first chunks, while all n streams still overlap.
func runStreams(c *OpenAIClient, n int, spread time.Duration) []Result {
	out := make([]Result, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(t0.Add(spread * time.Duration(i) / time.Duration(n))))
			req := TurnRequest{Messages: []tokenizer.Message{{Role: "user", Content: fmt.Sprint("stream ", i)}}, MaxTokens: 100}
			out[i] = c.Chat(context.Background(), req, nil)
		}()
	}
	wg.Wait()
	return out
}

const (
	accTTFT   = 200 * time.Millisecond
	accITL    = 20 * time.Millisecond
	accTokens = 30 // a whole number of 3-token chunks
)

// accuracy is what one accuracy run measured: p99 of |error| per request.
type accuracy struct {
	ttft, itl         time.Duration // p99, measured against when the server flushed
	ttftMed, itlMed   time.Duration // the same at p50
	late              time.Duration // server's flush against the nominal schedule
	window            Stats
	measuredTTFTp99Ms float64 // exact p99 of the measured TTFTs, ms
}

// measureAccuracy streams from a server that injects TTFT 200 ms and ITL
// 20 ms, perChunk tokens a chunk, over n concurrent streams. The truth for
// each request is when the server actually flushed its first and last chunk
// (same process, same monotonic clock); the server's own lateness against
// the nominal schedule is the machine's and is reported apart.
func measureAccuracy(tb testing.TB, n, perChunk int) accuracy {
	var warm atomic.Bool
	warm.Store(true)
	var mu sync.Mutex
	flushed := map[string][3]time.Time{}
	written := func(key string, firstFrom, firstTo, last time.Time) {
		mu.Lock()
		flushed[key] = [3]time.Time{firstFrom, firstTo, last}
		mu.Unlock()
	}
	srv := httptest.NewServer(streamServer(func(*http.Request) streamSpec {
		if warm.Load() {
			return streamSpec{tokens: 1, perChunk: 1}
		}
		return streamSpec{ttft: accTTFT, itl: accITL, tokens: accTokens, perChunk: perChunk, written: written}
	}))
	defer srv.Close()
	c := NewOpenAIClient(srv.URL+"/v1", "m", "")
	runStreams(c, n, 0) // open the connections first
	warm.Store(false)
	// Streams last 0.78 s and start within 100 ms: all n overlap.
	results := runStreams(c, n, 100*time.Millisecond)

	w := NewWindow(time.Minute, DefaultSLO, time.Now)
	var ttftErr, itlErr, late, measured []time.Duration
	for i, r := range results {
		if r.Err != nil {
			tb.Fatalf("request failed: %v", r.Err)
		}
		if r.OSL != accTokens || r.FirstChunkTokens != perChunk {
			tb.Fatalf("OSL %d, first chunk %d tokens; want %d and %d", r.OSL, r.FirstChunkTokens, accTokens, perChunk)
		}
		if want := (accTokens+perChunk-1)/perChunk - 1; len(r.ChunkGaps) != want {
			tb.Fatalf("%d chunk gaps, want %d", len(r.ChunkGaps), want)
		}
		f := flushed[fmt.Sprint("stream ", i)]
		tpot, _ := r.TPOT()
		// The first chunk reached the socket between f[0] and f[1]: an
		// arrival inside that interval is no error.
		got := r.Start.Add(r.TTFT)
		switch {
		case got.Before(f[0]):
			ttftErr = append(ttftErr, got.Sub(f[0]))
		case got.After(f[1]):
			ttftErr = append(ttftErr, got.Sub(f[1]))
		default:
			ttftErr = append(ttftErr, 0)
		}
		itlErr = append(itlErr, tpot-f[2].Sub(f[1])/time.Duration(accTokens-perChunk))
		late = append(late, f[0].Sub(r.Start)-accTTFT)
		measured = append(measured, r.TTFT)
		w.ObserveFirstToken(r.Worker, r.TTFT)
		w.ObserveDone(r)
	}
	slices.Sort(measured)
	return accuracy{
		ttft: p99Abs(ttftErr), itl: p99Abs(itlErr), late: p99Abs(late), window: w.Stats(),
		ttftMed: quantileAbs(ttftErr, 0.5), itlMed: quantileAbs(itlErr, 0.5),
		// the sketch's rank convention: the q-quantile sits at rank q·(n−1)
		measuredTTFTp99Ms: ms(measured[int(0.99*float64(len(measured)-1))]),
	}
}

// BenchmarkAccuracy500Streams measures the same at 500 concurrent streams and
// reports the p99 errors: go test -run '^$' -bench Accuracy500 -benchtime 1x ./loadgen
func BenchmarkAccuracy500Streams(b *testing.B) {
	defer TuneGC()() // as the kvlens binary runs
	for _, perChunk := range []int{1, 3} {
		b.Run(fmt.Sprintf("tokens_per_chunk=%d", perChunk), func(b *testing.B) {
			for range b.N {
				a := measureAccuracy(b, 500, perChunk)
				b.ReportMetric(float64(a.ttft)/1e6, "ttft_p99_err_ms")
				b.ReportMetric(float64(a.ttftMed)/1e6, "ttft_p50_err_ms")
				b.ReportMetric(float64(a.itl)/1e6, "itl_p99_err_ms")
				b.ReportMetric(float64(a.late)/1e6, "server_late_p99_ms")
				b.ReportMetric(a.window.TPOT.P99, "window_tpot_p99_ms")
			}
		})
	}
}
