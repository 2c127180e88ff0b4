package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// fakeClock is a settable clock for window tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func ok(ttft, e2e time.Duration, osl int) Result {
	return Result{TTFT: ttft, E2E: e2e, OSL: osl, ISL: 1000, CachedTokens: 900}
}

func TestResultTPOT(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		want time.Duration
		ok   bool
	}{
		// 100 ms to first token, 10 s in all, 100 tokens => 9.9 s / 99 gaps
		{"one token per chunk divides by OSL-1", Result{TTFT: 100 * time.Millisecond, E2E: 10 * time.Second, OSL: 100}, 100 * time.Millisecond, true},
		// first chunk carried 4 tokens => 9.9 s / 96
		{"a multi-token first chunk divides by OSL-k", Result{TTFT: 100 * time.Millisecond, E2E: 10 * time.Second, OSL: 100, FirstChunkTokens: 4}, 9900 * time.Millisecond / 96, true},
		{"a single-token answer has no TPOT", Result{TTFT: time.Second, E2E: time.Second, OSL: 1}, 0, false},
		{"a failed request has no TPOT", Result{OSL: 50, Err: errors.New("x")}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.r.TPOT()
			if got != tt.want || ok != tt.ok {
				t.Fatalf("TPOT = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestWindowRatesDivideByCoveredTime(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	// 10 s after start, 5 requests of 200 tokens each: 0.5 req/s, 100 tok/s,
	// not the 1/6 of that a fixed 60 s divisor would give.
	clk.add(10 * time.Second)
	for range 5 {
		w.ObserveDone(ok(100*time.Millisecond, 5*time.Second, 200))
	}
	s := w.Stats()
	if s.Covered != 10*time.Second {
		t.Fatalf("covered = %v, want 10s", s.Covered)
	}
	if s.RequestsPerSec != 0.5 || s.OutputTokensPerSec != 100 {
		t.Fatalf("rates = %v req/s, %v tok/s; want 0.5 and 100", s.RequestsPerSec, s.OutputTokensPerSec)
	}
	if math.Abs(s.KVHitRate-0.9) > 1e-9 {
		t.Fatalf("KV hit rate = %v, want 0.9", s.KVHitRate)
	}
}

func TestWindowErrorsAreInTheDenominator(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	for range 3 {
		w.ObserveDone(ok(100*time.Millisecond, time.Second, 10))
	}
	w.ObserveDone(Result{Err: errors.New("503"), Class: ErrHTTP503})
	s := w.Stats()
	if s.Errors != 1 || s.Completed != 3 || s.ErrorRate != 0.25 {
		t.Fatalf("errors %d, completed %d, rate %v; want 1, 3, 0.25", s.Errors, s.Completed, s.ErrorRate)
	}
}

func TestWindowForgetsOldSamples(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	w.ObserveFirstToken("", 5*time.Second) // slow, early
	clk.add(30 * time.Second)
	w.ObserveFirstToken("", 100*time.Millisecond)
	if got := w.Stats().TTFT.Count; got != 2 {
		t.Fatalf("after 30 s the window holds %d TTFTs, want 2", got)
	}
	clk.add(40 * time.Second) // the first sample is now 70 s old
	s := w.Stats()
	if s.TTFT.Count != 1 || math.Abs(s.TTFT.P95-100) > 1 {
		t.Fatalf("after 70 s: count %d, p95 %v ms; want 1 sample of 100 ms", s.TTFT.Count, s.TTFT.P95)
	}
	if s.Covered > 60*time.Second || s.Covered < 55*time.Second {
		t.Fatalf("covered = %v, want the window length less at most one step", s.Covered)
	}
}

func TestWindowQuantilesWithinSketchAccuracy(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	for i := 1; i <= 1000; i++ { // 1..1000 ms
		w.ObserveFirstToken("", time.Duration(i)*time.Millisecond)
	}
	q := w.Stats().TTFT
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", q.P50, 500}, {"p95", q.P95, 950}, {"p99", q.P99, 990}, {"mean", q.Mean, 500.5}} {
		if math.Abs(c.got-c.want)/c.want > 0.02 {
			t.Errorf("%s = %v, want %v within 2%%", c.name, c.got, c.want)
		}
	}
}

func TestWindowReset(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	w.ObserveFirstToken("", time.Second)
	clk.add(5 * time.Second)
	w.Reset()
	clk.add(2 * time.Second)
	s := w.Stats()
	if s.TTFT.Count != 0 || s.Covered != 2*time.Second {
		t.Fatalf("after reset: %d samples over %v; want 0 over 2s", s.TTFT.Count, s.Covered)
	}
}

func TestWindowAdjustedPercentiles(t *testing.T) {
	fail := Result{Err: errors.New("503"), Class: ErrHTTP503}
	tests := []struct {
		name                string
		good, failed        int
		wantP50, wantP95inf bool // P50 finite; P95 infinite
		wantP99inf          bool
	}{
		{"no failures leave the percentiles finite", 100, 0, true, false, false},
		{"4% failures reach p99 but not p95", 96, 4, true, false, true},
		{"6% failures make p95 infinite", 94, 6, true, true, true},
		{"a majority of failures makes even p50 infinite", 40, 60, false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			w := NewWindow(time.Minute, DefaultSLO, clk.now)
			for i := range tt.good {
				w.ObserveDone(ok(100*time.Millisecond, time.Duration(1000+i)*time.Millisecond, 10))
			}
			for range tt.failed {
				w.ObserveDone(fail)
			}
			a := w.Stats().AdjE2E
			if a.Count != tt.good+tt.failed {
				t.Fatalf("count %d, want %d", a.Count, tt.good+tt.failed)
			}
			if a.P50.IsInf() == tt.wantP50 || a.P95.IsInf() != tt.wantP95inf || a.P99.IsInf() != tt.wantP99inf {
				t.Fatalf("p50 %v, p95 %v, p99 %v", a.P50, a.P95, a.P99)
			}
		})
	}
}

func TestAdjustedPercentilesSitAboveThePlainOnes(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(time.Minute, DefaultSLO, clk.now)
	for i := 1; i <= 100; i++ {
		w.ObserveDone(ok(100*time.Millisecond, time.Duration(i)*10*time.Millisecond, 10))
	}
	w.ObserveDone(Result{Err: errors.New("cut"), Class: ErrStream})
	w.ObserveDone(Result{Err: errors.New("cut"), Class: ErrStream})
	s := w.Stats()
	// 2 failures among 102: the p95 rank is 0.95 × 101 = 95.95, which among
	// the 100 finite values 10..1000 ms is about 960 ms, against the plain
	// p95 at rank 0.95 × 99 = 94.05, about 950 ms.
	if !(float64(s.AdjE2E.P95) > s.E2E.P95) || math.Abs(float64(s.AdjE2E.P95)-960) > 5 {
		t.Fatalf("adjusted p95 %v, plain p95 %v; want about 960 above about 950", s.AdjE2E.P95, s.E2E.P95)
	}
	if s.ErrorsByClass[ErrStream] != 2 {
		t.Fatalf("errors by class %v, want 2 broken_stream", s.ErrorsByClass)
	}
}

func TestAdjustedInfinityIsNullInJSON(t *testing.T) {
	a := Adjusted{Count: 10, P50: 5, P95: InfMs(math.Inf(1)), P99: InfMs(math.Inf(1)), Infinite: []string{"p95", "p99"}}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"count":10,"p50":5,"p95":null,"p99":null,"infinite":["p95","p99"]}`; string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
	var back Adjusted
	if err := json.Unmarshal(b, &back); err != nil || !back.P95.IsInf() || back.P50 != 5 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestGoodputAndSLOAttainment(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(time.Minute, SLO{TTFT: 600 * time.Millisecond, TPOT: 60 * time.Millisecond}, clk.now)
	clk.add(10 * time.Second)
	w.ObserveDone(ok(500*time.Millisecond, 500*time.Millisecond+99*50*time.Millisecond, 100)) // good: TPOT 50 ms
	w.ObserveDone(ok(700*time.Millisecond, 700*time.Millisecond+99*50*time.Millisecond, 100)) // TTFT misses
	w.ObserveDone(ok(500*time.Millisecond, 500*time.Millisecond+99*70*time.Millisecond, 100)) // TPOT misses
	w.ObserveDone(ok(600*time.Millisecond, 600*time.Millisecond, 1))                          // good: no TPOT, TTFT on the line
	w.ObserveDone(Result{Err: errors.New("429"), Class: ErrHTTP429})                          // failure
	s := w.Stats()
	if s.Good != 2 || s.SLOAttainment != 2.0/5 || s.GoodputPerSec != 0.2 {
		t.Fatalf("good %d, attainment %v, goodput %v/s; want 2, 0.4, 0.2", s.Good, s.SLOAttainment, s.GoodputPerSec)
	}
}

func TestWindowPerWorker(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(time.Minute, DefaultSLO, clk.now)
	clk.add(10 * time.Second)
	w.ObserveFirstToken("w1", 100*time.Millisecond)
	w.ObserveFirstToken("w2", 300*time.Millisecond)
	r1 := ok(100*time.Millisecond, time.Second, 10)
	r1.Worker = "w1"
	r2 := ok(300*time.Millisecond, time.Second, 10)
	r2.Worker, r2.CachedTokens = "w2", 0
	w.ObserveDone(r1)
	w.ObserveDone(r2)
	w.ObserveDone(Result{Worker: "w2", Err: errors.New("503"), Class: ErrHTTP503})
	w.ObserveDone(Result{Err: errors.New("refused"), Class: ErrConnect}) // no worker
	total, per := w.Summary(InFlight{})
	if total.Completed != 2 || total.Errors != 2 || len(per) != 2 {
		t.Fatalf("total %d ok %d errors, %d workers; want 2, 2, 2", total.Completed, total.Errors, len(per))
	}
	if w1, w2 := per["w1"], per["w2"]; w1.KVHitRate != 0.9 || w2.KVHitRate != 0 || w2.ErrorRate != 0.5 || math.Abs(w2.TTFT.P50-300) > 1 || w1.RequestsPerSec != 0.1 {
		t.Fatalf("w1 %+v\nw2 %+v", w1, w2)
	}
	if got := Workers(per); len(got) != 2 || got[0] != "w1" {
		t.Fatalf("Workers = %v", got)
	}
}

func TestWindowBoundsTheWorkersItTracks(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(time.Minute, DefaultSLO, clk.now)
	for i := range 1000 {
		r := ok(100*time.Millisecond, time.Second, 10)
		r.Worker = fmt.Sprint("w", i)
		w.ObserveDone(r)
	}
	total, per := w.Summary(InFlight{})
	if len(per) != maxWorkers+1 || per[OtherWorkers].Completed != 1000-maxWorkers || total.Completed != 1000 {
		t.Fatalf("%d workers tracked, %d under %s, %d in total; want %d, %d, 1000", len(per), per[OtherWorkers].Completed, OtherWorkers, total.Completed, maxWorkers+1, 1000-maxWorkers)
	}
}

func TestWindowBeginCountsOnlyRequestsSentAfterIt(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	sentAt := func(d time.Duration) Result {
		r := ok(100*time.Millisecond, 2*time.Second, 100)
		r.Start = clk.t.Add(d)
		return r
	}
	clk.add(10 * time.Second)
	w.Begin()
	clk.add(time.Second)
	tests := []struct {
		name    string
		observe func()
		counted bool
	}{
		// sent 3 s ago, 2 s before Begin: it was routed under the old setting
		{"a request sent before Begin and finishing after is not counted", func() { w.ObserveDone(sentAt(-3 * time.Second)) }, false},
		{"a failure sent before Begin is not counted", func() { w.ObserveDone(Result{Start: clk.t.Add(-3 * time.Second), Err: errors.New("x")}) }, false},
		{"a request sent after Begin is counted", func() { w.ObserveDone(sentAt(-500 * time.Millisecond)) }, true},
		{"a result without a send time (virtual time) is counted", func() { w.ObserveDone(ok(time.Millisecond, time.Second, 10)) }, true},
		// a first token 4 s after its send, 1 s after Begin: sent before it
		{"a first token of a request sent before Begin is not counted", func() { w.ObserveFirstToken("", 4*time.Second) }, false},
		{"a first token of a request sent after Begin is counted", func() { w.ObserveFirstToken("", 200*time.Millisecond) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// What the window holds, by end time: in a window this young its
			// TTFT shows only once a step of sends has had first tokens
			// (Stats.FirstTokens).
			held := func() int {
				all, _ := merged(w.buckets)
				return int(all.ttft.GetCount()) + all.completed + all.errors
			}
			before := held()
			tt.observe()
			counted := held() > before
			if counted != tt.counted {
				t.Fatalf("counted = %v, want %v", counted, tt.counted)
			}
		})
	}
	// The rates count the request sent before Begin: 3 completed, of 100,
	// 100 and 10 tokens, over the 1 s the window has covered.
	if s := w.Stats(); s.Completed != 2 || s.RequestsPerSec != 3 || s.OutputTokensPerSec != 210 {
		t.Fatalf("after Begin: %d completed, %v req/s, %v tok/s; want 2 counted, the rates of all 3", s.Completed, s.RequestsPerSec, s.OutputTokensPerSec)
	}
	// A plain Reset forgets Begin: the sweep's warmup flush counts everything.
	w.Reset()
	w.ObserveDone(sentAt(-time.Hour))
	if w.Stats().Completed != 1 {
		t.Fatal("after Reset a request sent long ago is not counted")
	}
}

// TestWindowAnswerFiguresWaitForEveryRequestSentBeforeThem plays one young
// window after Begin, 60 s long in 5 s steps: the figures read at an
// answer's end count a request only once every request sent before it has
// ended, so that the short answers and failures that end first do not
// stand for all; the counts report at once.
func TestWindowAnswerFiguresWaitForEveryRequestSentBeforeThem(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	w.Begin()
	t0 := clk.t
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// done ends, now, a request sent at s seconds after Begin with cached
	// of its 1,000 prompt tokens on worker w0; cached < 0 makes it fail.
	done := func(s, cached int) func() {
		return func() {
			r := Result{Start: at(s), TTFT: 100 * time.Millisecond, E2E: clk.t.Sub(at(s)), OSL: 100, ISL: 1000, CachedTokens: cached, Worker: "w0"}
			if cached < 0 {
				r = Result{Start: at(s), Err: errors.New("503"), Worker: "w0"}
			}
			w.ObserveDone(r)
		}
	}
	none := time.Time{}
	tests := []struct {
		name        string
		now         int       // seconds after Begin
		observe     func()    // what ends at now, before the check
		oldest      time.Time // the oldest request still in flight
		answered    time.Duration
		answers     int
		hit         float64
		errorRate   float64
		ended       int // completed and failed, counted at once
		workerCount int // w0's answers
	}{
		{"a short answer waits for the longer request sent before it", 10, done(1, 1000), at(2), 0, 0, 0, 0, 1, 0},
		{"a failure, which ends at once, waits too", 15, done(12, -1), at(2), 0, 0, 0, 0, 2, 0},
		// B (sent at 2 s, half cached) ends; D (sent at 20 s) is in flight.
		{"answers sent before the oldest in flight count, with the failure among them", 40, done(2, 500), at(20), 20 * time.Second, 3, 0.75, 1.0 / 3, 3, 3},
		{"a short answer sent after the oldest in flight is left out", 41, done(22, 1000), at(20), 20 * time.Second, 3, 0.75, 1.0 / 3, 4, 3},
		{"a request in flight longer than the window holds back nothing sent a window ago", 85, func() {}, at(20), 25 * time.Second, 4, 2500.0 / 3000, 0.25, 2, 4},
		// D ends at 100 s; from 60 s of answered send time on, the window
		// counts by end time: D alone ended in the last 60 s.
		{"once every request of a window's length has ended, the window counts by end time", 130, func() { clk.t = at(100); done(20, 0)() }, none, 60 * time.Second, 1, 0, 0, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if at(tt.now).After(clk.t) {
				clk.t = at(tt.now)
			}
			tt.observe()
			clk.t = at(tt.now)
			s, per := w.Summary(InFlight{Oldest: tt.oldest})
			if s.Answered != tt.answered || s.Answers != tt.answers || math.Abs(s.KVHitRate-tt.hit) > 1e-9 || math.Abs(s.ErrorRate-tt.errorRate) > 1e-9 {
				t.Fatalf("answered %v over %d answers, hit %.4f, error rate %.4f; want %v, %d, %.4f, %.4f", s.Answered, s.Answers, s.KVHitRate, s.ErrorRate, tt.answered, tt.answers, tt.hit, tt.errorRate)
			}
			if s.Completed+s.Errors != tt.ended {
				t.Fatalf("%d ended; want the %d that did, counted at once", s.Completed+s.Errors, tt.ended)
			}
			if got := per["w0"].Answers; got != tt.workerCount {
				t.Fatalf("w0 has %d answers, want %d", got, tt.workerCount)
			}
		})
	}
}

// TestWindowSendTimePastNowCountsAsNow: a result stamped by another clock
// ahead of the window's lands in the current step, not in a send-time
// tally stretched an hour ahead.
func TestWindowSendTimePastNowCountsAsNow(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	w.Begin()
	clk.add(12 * time.Second)
	r := ok(100*time.Millisecond, time.Second, 10)
	r.Start = clk.t.Add(time.Hour)
	w.ObserveDone(r)
	if n := len(w.bySend); n != 3 {
		t.Fatalf("%d send-time steps after a result stamped an hour ahead, 12 s in; want 3", n)
	}
	clk.add(3 * time.Second)
	if s := w.Stats(); s.Answers != 1 {
		t.Fatalf("15 s in, nothing in flight: %d answers, want the 1", s.Answers)
	}
}

// TestWindowTTFTWaitsForEveryFirstTokenSentBeforeIt: after Begin, TTFT
// counts a request once every request sent before it has had its first
// token, so that a young window's TTFT does not leave out the slow first
// tokens still to come (after a cache reset, several seconds each).
func TestWindowTTFTWaitsForEveryFirstTokenSentBeforeIt(t *testing.T) {
	clk := newFakeClock()
	w := NewWindow(60*time.Second, DefaultSLO, clk.now)
	w.Begin()
	t0 := clk.t
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// first records, at ms, the first token of a request sent at sent ms.
	first := func(sent, ms int) func() {
		return func() { clk.t = at(ms); w.ObserveFirstToken("w0", at(ms).Sub(at(sent))) }
	}
	// failed records, at ms, a request sent at sent ms that failed before
	// its first token: AdjTTFT counts it as +Inf.
	failed := func(sent, ms int) func() {
		return func() {
			clk.t = at(ms)
			w.ObserveDone(Result{Worker: "w0", Start: at(sent), Err: errors.New("503"), Class: ErrHTTP503})
		}
	}
	tests := []struct {
		name    string
		observe func()
		now     int       // ms after Begin
		waiting time.Time // the oldest request still without its first token
		span    time.Duration
		count   int
		mean    float64 // ms
		adj     int     // AdjTTFT's count: TTFTs and failures before one
	}{
		{"a quick first token waits for the slow one sent before it", first(1000, 2000), 8000, at(1500), 0, 0, 0, 0},
		{"once the slow one comes, both count", first(1500, 9000), 10000, time.Time{}, 10 * time.Second, 2, 4250, 2},
		{"a quick first token sent after the oldest waiting is left out", first(11000, 11200), 16000, at(10500), 10 * time.Second, 2, 4250, 2},
		{"so is a failure before its first token, in the error-adjusted TTFT", failed(11500, 12000), 17000, at(10500), 10 * time.Second, 2, 4250, 2},
		{"once the oldest has its first token, both join", first(10500, 18000), 21000, time.Time{}, 20 * time.Second, 4, 4050, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.observe()
			clk.t = at(tt.now)
			s, per := w.Summary(InFlight{Waiting: tt.waiting})
			if s.FirstTokens != tt.span || s.TTFT.Count != tt.count || math.Abs(s.TTFT.Mean-tt.mean) > 1e-6 {
				t.Fatalf("first-token span %v, %d TTFTs, mean %.0f ms; want %v, %d, %.0f", s.FirstTokens, s.TTFT.Count, s.TTFT.Mean, tt.span, tt.count, tt.mean)
			}
			if per["w0"].TTFT.Count != tt.count {
				t.Fatalf("w0 has %d TTFTs, want %d", per["w0"].TTFT.Count, tt.count)
			}
			if s.AdjTTFT.Count != tt.adj || per["w0"].AdjTTFT.Count != tt.adj {
				t.Fatalf("error-adjusted TTFT counts %d (w0 %d), want %d", s.AdjTTFT.Count, per["w0"].AdjTTFT.Count, tt.adj)
			}
		})
	}
}
