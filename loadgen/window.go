package loadgen

import (
	"math"
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// windowBuckets is how many sub-windows a rolling window is cut into. The
// window slides one sub-window at a time: 12 gives 5 s steps over 60 s.
const windowBuckets = 12

// sketchAccuracy is the relative accuracy of every quantile: 1%, so a 600 ms
// p95 is reported within ±6 ms.
const sketchAccuracy = 0.01

// Quantiles summarises one metric over a window, in milliseconds.
type Quantiles struct {
	// Count is how many requests the figures cover.
	Count int `json:"count"`
	// P50 is the median, in ms; NaN-free: 0 when Count is 0.
	P50 float64 `json:"p50"`
	// P95 is the 95th percentile, in ms.
	P95 float64 `json:"p95"`
	// P99 is the 99th percentile, in ms.
	P99 float64 `json:"p99"`
	// Mean is the arithmetic mean, in ms.
	Mean float64 `json:"mean"`
}

// Stats is everything a rolling window knows, as defined in
// shared/reference/metrics.md.
type Stats struct {
	// Covered is how much time the window spans: its full length once it has
	// run that long, less right after start or reset. Rates divide by it.
	Covered time.Duration `json:"covered_ns"`
	// TTFT is time to first token: send to the first chunk with content.
	TTFT Quantiles `json:"ttft"`
	// TPOT is time per output token, (E2E − TTFT)/(OSL − 1), for OSL ≥ 2.
	TPOT Quantiles `json:"tpot"`
	// E2E is end-to-end latency: send to the last content chunk.
	E2E Quantiles `json:"e2e"`
	// Completed counts requests that finished successfully.
	Completed int `json:"completed"`
	// Errors counts failed requests, of every class.
	Errors int `json:"errors"`
	// ErrorRate is Errors / (Completed + Errors), from 0 to 1.
	ErrorRate float64 `json:"error_rate"`
	// RequestsPerSec is Completed divided by Covered.
	RequestsPerSec float64 `json:"requests_per_sec"`
	// OutputTokensPerSec is the sum of completed requests' OSL divided by Covered.
	OutputTokensPerSec float64 `json:"output_tokens_per_sec"`
	// KVHitRate is Σ cached prompt tokens / Σ prompt tokens, from 0 to 1.
	KVHitRate float64 `json:"kv_hit_rate"`
}

type bucket struct {
	start              time.Time
	ttft, tpot, e2e    *ddsketch.DDSketch
	completed, errors  int
	outputTokens       int
	promptTokens       int
	cachedPromptTokens int
}

func newSketch() *ddsketch.DDSketch {
	s, err := ddsketch.NewDefaultDDSketch(sketchAccuracy)
	if err != nil {
		panic(err) // only for an accuracy outside (0, 1)
	}
	return s
}

func newBucket(start time.Time) *bucket {
	return &bucket{start: start, ttft: newSketch(), tpot: newSketch(), e2e: newSketch()}
}

// Window is a rolling time window of request metrics. It is safe for
// concurrent use.
type Window struct {
	length time.Duration
	step   time.Duration
	now    func() time.Time

	mu      sync.Mutex
	reset   time.Time
	buckets []*bucket // oldest first; the last one is current
}

// NewWindow returns a window of the given length that reads time from now.
func NewWindow(length time.Duration, now func() time.Time) *Window {
	w := &Window{length: length, step: length / windowBuckets, now: now}
	w.Reset()
	return w
}

// Length is the window's configured span.
func (w *Window) Length() time.Duration { return w.length }

// Reset empties the window.
func (w *Window) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reset = w.now()
	w.buckets = []*bucket{newBucket(w.reset)}
}

// current returns the bucket for now, dropping buckets that slid out.
// The caller holds mu.
func (w *Window) current(now time.Time) *bucket {
	last := w.buckets[len(w.buckets)-1]
	if now.Sub(last.start) >= w.step {
		// Align the new bucket to the step grid so buckets never overlap.
		start := last.start.Add(now.Sub(last.start).Truncate(w.step))
		last = newBucket(start)
		w.buckets = append(w.buckets, last)
	}
	cut := now.Add(-w.length)
	for len(w.buckets) > 1 && !w.buckets[0].start.Add(w.step).After(cut) {
		w.buckets = w.buckets[1:]
	}
	return last
}

// ObserveFirstToken records a time to first token as soon as it is known, so
// the dashboard shows TTFT long before the first answer completes.
func (w *Window) ObserveFirstToken(ttft time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.current(w.now())
	b.ttft.Add(ms(ttft))
}

// ObserveDone records a finished request.
func (w *Window) ObserveDone(r Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.current(w.now())
	if r.Err != nil {
		b.errors++
		return
	}
	b.completed++
	b.outputTokens += r.OSL
	b.promptTokens += r.ISL
	b.cachedPromptTokens += r.CachedTokens
	b.e2e.Add(ms(r.E2E))
	if tpot, ok := r.TPOT(); ok {
		b.tpot.Add(ms(tpot))
	}
}

// Stats summarises the window as of now.
func (w *Window) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	w.current(now)
	ttft, tpot, e2e := newSketch(), newSketch(), newSketch()
	var s Stats
	var out, prompt, cached int
	for _, b := range w.buckets {
		ttft.MergeWith(b.ttft)
		tpot.MergeWith(b.tpot)
		e2e.MergeWith(b.e2e)
		s.Completed += b.completed
		s.Errors += b.errors
		out += b.outputTokens
		prompt += b.promptTokens
		cached += b.cachedPromptTokens
	}
	// Buckets sit on a grid of steps from the reset, and one that straddles
	// the window's start is kept whole, so the data span from the grid line
	// at or before now − length.
	from := w.reset
	if cut := now.Add(-w.length); cut.After(from) {
		from = from.Add(cut.Sub(from).Truncate(w.step))
	}
	s.Covered = now.Sub(from)
	s.TTFT, s.TPOT, s.E2E = summarise(ttft), summarise(tpot), summarise(e2e)
	if n := s.Completed + s.Errors; n > 0 {
		s.ErrorRate = float64(s.Errors) / float64(n)
	}
	if secs := s.Covered.Seconds(); secs > 0 {
		s.RequestsPerSec = float64(s.Completed) / secs
		s.OutputTokensPerSec = float64(out) / secs
	}
	if prompt > 0 {
		s.KVHitRate = float64(cached) / float64(prompt)
	}
	return s
}

func summarise(s *ddsketch.DDSketch) Quantiles {
	if s.IsEmpty() {
		return Quantiles{}
	}
	q, _ := s.GetValuesAtQuantiles([]float64{0.5, 0.95, 0.99})
	n := s.GetCount()
	return Quantiles{
		Count: int(math.Round(n)),
		P50:   q[0], P95: q[1], P99: q[2],
		Mean: s.GetSum() / n,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
