package loadgen

import (
	"encoding/json"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// windowBuckets is how many sub-windows a rolling window is cut into. The
// window slides one sub-window at a time: 12 gives 5 s steps over 60 s.
const windowBuckets = 12

// sketchAccuracy is the relative accuracy of every quantile: 0.2%, so a 200 ms
// TTFT is reported within ±0.4 ms, inside the 1 ms the accuracy test demands.
const sketchAccuracy = 0.002

// SLO is the service-level objective a request must meet, in full, to count
// towards goodput.
type SLO struct {
	// TTFT is the most time to first token a good request may take.
	TTFT time.Duration `json:"ttft_ns"`
	// TPOT is the most time per output token a good request may take; a
	// request with no TPOT (OSL − k < 1) is judged on TTFT alone.
	TPOT time.Duration `json:"tpot_ns"`
}

// DefaultSLO is seed 003's objective: TTFT ≤ 600 ms and TPOT ≤ 60 ms.
var DefaultSLO = SLO{TTFT: 600 * time.Millisecond, TPOT: 60 * time.Millisecond}

func (s SLO) met(r Result) bool {
	if r.Err != nil || r.TTFT > s.TTFT {
		return false
	}
	tpot, ok := r.TPOT()
	return !ok || tpot <= s.TPOT
}

// Quantiles summarises one metric over a window: in milliseconds for times,
// in tokens for ISL and OSL.
type Quantiles struct {
	// Count is how many requests (or, for chunk gaps, gaps) the figures cover.
	Count int `json:"count"`
	// P50 is the median; 0 when Count is 0.
	P50 float64 `json:"p50"`
	// P95 is the 95th percentile.
	P95 float64 `json:"p95"`
	// P99 is the 99th percentile.
	P99 float64 `json:"p99"`
	// Mean is the arithmetic mean, exact (the sketch keeps the exact sum).
	Mean float64 `json:"mean"`
}

// InfMs is a time in milliseconds that may be +Inf. JSON has no infinity, so
// +Inf is written as null.
type InfMs float64

// IsInf reports whether m is +Inf.
func (m InfMs) IsInf() bool { return math.IsInf(float64(m), 1) }

// MarshalJSON writes +Inf as null.
func (m InfMs) MarshalJSON() ([]byte, error) {
	if m.IsInf() {
		return []byte("null"), nil
	}
	return json.Marshal(float64(m))
}

// UnmarshalJSON reads null as +Inf.
func (m *InfMs) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = InfMs(math.Inf(1))
		return nil
	}
	return json.Unmarshal(b, (*float64)(m))
}

// Adjusted are error-adjusted percentiles (AIPerf's adj_): every failed
// request counts as +Inf, so a shed rate cannot hide behind a good-looking
// latency. A percentile is +Inf once failures exceed the share above it,
// for example p95 once more than 5% failed.
type Adjusted struct {
	// Count is the successes plus failures the figures cover.
	Count int `json:"count"`
	// P50 is the error-adjusted median, in ms; null in JSON when +Inf.
	P50 InfMs `json:"p50"`
	// P95 is the error-adjusted 95th percentile, in ms; null when +Inf.
	P95 InfMs `json:"p95"`
	// P99 is the error-adjusted 99th percentile, in ms; null when +Inf.
	P99 InfMs `json:"p99"`
	// Infinite names the percentiles that are +Inf ("p50", "p95", "p99"), so
	// a JSON reader need not guess what null means.
	Infinite []string `json:"infinite,omitempty"`
}

// Stats is everything a rolling window knows, as defined in
// shared/reference/metrics.md, for all workers or for one.
type Stats struct {
	// Covered is how much time the window spans: its full length once it has
	// run that long, less right after start or reset. Rates divide by it.
	Covered time.Duration `json:"covered_ns"`
	// TTFT is time to first token, ms: send to the first chunk with content,
	// recorded as soon as that chunk arrives.
	TTFT Quantiles `json:"ttft"`
	// TPOT is time per output token (ITL), ms: (E2E − TTFT)/(OSL − k), where
	// k is the first chunk's tokens, for OSL − k ≥ 1.
	TPOT Quantiles `json:"tpot"`
	// E2E is end-to-end latency, ms: send to the last content chunk.
	E2E Quantiles `json:"e2e"`
	// InterChunk is the raw gap between consecutive content chunks, ms; it
	// is not ITL when chunks carry several tokens.
	InterChunk Quantiles `json:"inter_chunk"`
	// ISL is the prompt length of completed requests, in tokens.
	ISL Quantiles `json:"isl"`
	// OSL is the output length of completed requests, in tokens.
	OSL Quantiles `json:"osl"`
	// AdjTTFT is TTFT with each failure that never got a first token as
	// +Inf, over the same requests as TTFT (FirstTokens).
	AdjTTFT Adjusted `json:"adj_ttft"`
	// AdjTPOT is TPOT with each failure as +Inf.
	AdjTPOT Adjusted `json:"adj_tpot"`
	// AdjE2E is E2E with each failure as +Inf.
	AdjE2E Adjusted `json:"adj_e2e"`
	// Completed counts requests that finished successfully.
	Completed int `json:"completed"`
	// Errors counts failed requests, of every class.
	Errors int `json:"errors"`
	// ErrorsByClass counts failed requests by class; nil when there are none.
	ErrorsByClass map[ErrorClass]int `json:"errors_by_class,omitempty"`
	// ErrorRate is Errors / (Completed + Errors), from 0 to 1.
	ErrorRate float64 `json:"error_rate"`
	// Good counts completed requests that met every SLO.
	Good int `json:"good"`
	// GoodputPerSec is Good divided by Covered, requests per second.
	GoodputPerSec float64 `json:"goodput_per_sec"`
	// SLOAttainment is Good / (Completed + Errors), from 0 to 1.
	SLOAttainment float64 `json:"slo_attainment"`
	// RequestsPerSec is Completed divided by Covered.
	RequestsPerSec float64 `json:"requests_per_sec"`
	// OutputTokensPerSec is the sum of completed requests' OSL divided by
	// Covered, tokens per second.
	OutputTokensPerSec float64 `json:"output_tokens_per_sec"`
	// KVHitRate is Σ cached prompt tokens / Σ prompt tokens, from 0 to 1,
	// over the completed requests whose usage reported cached tokens.
	KVHitRate float64 `json:"kv_hit_rate"`
	// KVHitRequests counts those requests. With none, KVHitRate is not
	// known (it reads 0): the workers report no cached tokens.
	KVHitRequests int `json:"kv_hit_requests"`
	// OracleHitRate is the best achievable KVHitRate over the same
	// requests: Σ oracle tokens / Σ prompt tokens of those whose router
	// reported an oracle, from 0 to 1; absent when none did. A request's
	// oracle tokens are the larger of the router's oracle at routing time
	// and the tokens it got from cache.
	OracleHitRate *float64 `json:"oracle_hit_rate,omitempty"`
	// Answered is how far from its start, in send time, the window holds
	// every request sent: all of them have ended. The figures read at an
	// answer's end (TPOT, E2E, InterChunk, ISL, OSL, AdjTPOT, AdjE2E,
	// ErrorRate, SLOAttainment and the hit rates) count only requests sent
	// within it, so that a young window's figures do not lean towards the
	// requests that end first, the short ones and the failures. It trails
	// Covered by about a request's length in the first minutes after
	// Window.Begin, and equals Covered otherwise.
	Answered time.Duration `json:"answered_ns"`
	// Answers counts the requests those figures cover, completed or failed.
	Answers int `json:"answers"`
	// FirstTokens is the same span for TTFT: how far from the window's
	// start, in send time, every request sent has had its first token or
	// failed. TTFT and AdjTTFT count only requests sent within it, so
	// that a young window's TTFT does not lean towards the requests whose
	// first token comes first. It trails Covered by about a TTFT (and a 5 s
	// step) after Window.Begin, and equals Covered otherwise.
	FirstTokens time.Duration `json:"first_tokens_ns"`
}

// InFlight is what a window needs to know of the requests still in flight
// to hold back its figures in the first minutes after Window.Begin (see
// Stats.Answered and Stats.FirstTokens); zero times when there are none.
type InFlight struct {
	// Oldest is the send time of the oldest request in flight.
	Oldest time.Time
	// Waiting is the send time of the oldest request still waiting for its
	// first token.
	Waiting time.Time
}

// withAnswers returns s with the figures read at an answer's end taken
// from a, a tally of the requests sent within the answered span (see
// Stats.Answered). Counts and rates stay s's: they report what ended in
// the window, at once.
func (s Stats) withAnswers(a Stats, answered time.Duration) Stats {
	s.TPOT, s.E2E, s.InterChunk, s.ISL, s.OSL = a.TPOT, a.E2E, a.InterChunk, a.ISL, a.OSL
	s.AdjTPOT, s.AdjE2E = a.AdjTPOT, a.AdjE2E
	s.ErrorRate, s.SLOAttainment = a.ErrorRate, a.SLOAttainment
	s.KVHitRate, s.KVHitRequests, s.OracleHitRate = a.KVHitRate, a.KVHitRequests, a.OracleHitRate
	s.Answered, s.Answers = answered, a.Answers
	return s
}

// withFirstTokens returns s with TTFT and AdjTTFT taken from a, a tally of
// the requests sent within the first-token span (see Stats.FirstTokens):
// each of them has had its first token or failed.
func (s Stats) withFirstTokens(a Stats, span time.Duration) Stats {
	s.TTFT, s.AdjTTFT, s.FirstTokens = a.TTFT, a.AdjTTFT, span
	return s
}

// tally is one sub-window's figures for all workers or one.
type tally struct {
	ttft, tpot, e2e, gaps, isl, osl *ddsketch.DDSketchWithExactSummaryStatistics
	completed, errors, good         int
	errorsBeforeFirst               int // failures that never had a first token
	byClass                         map[ErrorClass]int
	outputTokens                    int
	// promptTokens and cachedPromptTokens are of hitRequests, the
	// completed requests that reported cached tokens.
	promptTokens, cachedPromptTokens, hitRequests int
	oraclePromptTokens, oracleTokens              int // of results with an oracle
	// carried counts requests sent before Window.Begin that completed in
	// the window, with their good ones and output tokens: the window's
	// rates count them, its per-request figures do not.
	carried, carriedGood, carriedTokens int
}

func newSketch() *ddsketch.DDSketchWithExactSummaryStatistics {
	s, err := ddsketch.NewDefaultDDSketchWithExactSummaryStatistics(sketchAccuracy)
	if err != nil {
		panic(err) // only for an accuracy outside (0, 1)
	}
	return s
}

func newTally() *tally {
	return &tally{ttft: newSketch(), tpot: newSketch(), e2e: newSketch(), gaps: newSketch(), isl: newSketch(), osl: newSketch()}
}

func (t *tally) merge(o *tally) {
	for _, p := range [][2]*ddsketch.DDSketchWithExactSummaryStatistics{{t.ttft, o.ttft}, {t.tpot, o.tpot}, {t.e2e, o.e2e}, {t.gaps, o.gaps}, {t.isl, o.isl}, {t.osl, o.osl}} {
		p[0].MergeWith(p[1])
	}
	t.completed += o.completed
	t.errors += o.errors
	t.good += o.good
	t.errorsBeforeFirst += o.errorsBeforeFirst
	for c, n := range o.byClass {
		if t.byClass == nil {
			t.byClass = map[ErrorClass]int{}
		}
		t.byClass[c] += n
	}
	t.outputTokens += o.outputTokens
	t.promptTokens += o.promptTokens
	t.cachedPromptTokens += o.cachedPromptTokens
	t.hitRequests += o.hitRequests
	t.oraclePromptTokens += o.oraclePromptTokens
	t.oracleTokens += o.oracleTokens
	t.carried += o.carried
	t.carriedGood += o.carriedGood
	t.carriedTokens += o.carriedTokens
}

// carry counts a completed request sent before Window.Begin in the rates
// only.
func (t *tally) carry(r Result, slo SLO) {
	if r.Err != nil {
		return
	}
	t.carried++
	t.carriedTokens += r.OSL
	if slo.met(r) {
		t.carriedGood++
	}
}

func (t *tally) done(r Result, slo SLO) {
	if r.Err != nil {
		t.errors++
		if r.TTFT == 0 {
			t.errorsBeforeFirst++
		}
		if t.byClass == nil {
			t.byClass = map[ErrorClass]int{}
		}
		t.byClass[r.Class]++
		return
	}
	t.completed++
	if slo.met(r) {
		t.good++
	}
	t.outputTokens += r.OSL
	if !r.NoCacheReport {
		t.promptTokens += r.ISL
		t.cachedPromptTokens += r.CachedTokens
		t.hitRequests++
	}
	if r.HasOracle {
		t.oraclePromptTokens += r.ISL
		// What a request got is achievable by definition; it can exceed
		// the oracle at routing time when another request's prefill stored
		// a shared prefix before this one was admitted.
		t.oracleTokens += max(min(r.OracleTokens, r.ISL), r.CachedTokens)
	}
	t.e2e.Add(ms(r.E2E))
	t.isl.Add(float64(r.ISL))
	t.osl.Add(float64(r.OSL))
	if tpot, ok := r.TPOT(); ok {
		t.tpot.Add(ms(tpot))
	}
	for _, g := range r.ChunkGaps {
		t.gaps.Add(ms(g))
	}
}

type bucket struct {
	start   time.Time
	total   *tally
	workers map[string]*tally
}

// maxWorkers bounds the per-worker tallies of one sub-window, so that an
// endpoint naming a new "worker" in every response cannot grow memory
// without bound; the rest are tallied together under OtherWorkers.
const maxWorkers = 64

// OtherWorkers is the per-worker key for workers beyond the first 64 seen in
// a sub-window.
const OtherWorkers = "(other)"

func (b *bucket) worker(name string) *tally {
	t, ok := b.workers[name]
	if !ok && len(b.workers) >= maxWorkers {
		name = OtherWorkers
		t, ok = b.workers[name]
	}
	if !ok {
		t = newTally()
		b.workers[name] = t
	}
	return t
}

func newBucket(start time.Time) *bucket {
	return &bucket{start: start, total: newTally(), workers: map[string]*tally{}}
}

// Window is a rolling time window of request metrics, for all workers and
// per worker. It is safe for concurrent use.
type Window struct {
	length time.Duration
	step   time.Duration
	slo    SLO
	now    func() time.Time

	mu      sync.Mutex
	reset   time.Time
	buckets []*bucket // oldest first; the last one is current
	// since, when not zero, is when Begin last ran: requests sent before it
	// are not counted, whenever they finish.
	since time.Time
	// bySend, from Begin until the answered span reaches the window's
	// length, tallies the requests sent since Begin by the step of their
	// send time; nil otherwise (see Stats.Answered).
	bySend []*bucket
}

// NewWindow returns a window of the given length that judges goodput by slo
// and reads time from now.
func NewWindow(length time.Duration, slo SLO, now func() time.Time) *Window {
	w := &Window{length: length, step: length / windowBuckets, slo: slo, now: now}
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
	w.since = time.Time{}
	w.bySend = nil
}

// Begin empties the window and from now on counts, in every per-request
// figure (TTFT, TPOT, E2E, hit rate, errors), only requests sent after this
// moment: a request in flight across a change (a new routing policy, a new
// concurrency) was routed before it, so the new window never mixes the two.
// The rates (requests/s, output tokens/s, goodput) count every request that
// completes in the window, as the fleet's output: counting only those sent
// after Begin would read low, and start at zero, until a whole answer's
// time had passed.
func (w *Window) Begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reset = w.now()
	w.buckets = []*bucket{newBucket(w.reset)}
	w.since = w.reset
	w.bySend = []*bucket{}
}

// Since is when Begin last ran, zero when it has not since the last Reset:
// requests sent before it are not counted.
func (w *Window) Since() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since
}

// before reports whether a request sent at start was sent before Begin.
// The caller holds mu. A result without a send time (a discrete-event
// transport's) is counted.
func (w *Window) before(start time.Time) bool {
	return !w.since.IsZero() && !start.IsZero() && start.Before(w.since)
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
// the dashboard shows TTFT long before the first answer completes. worker may
// be "" when the server does not say.
func (w *Window) ObserveFirstToken(worker string, ttft time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.before(now.Add(-ttft)) {
		return
	}
	record(worker, func(t *tally) { t.ttft.Add(ms(ttft)) }, w.current(now), w.sentIn(now.Add(-ttft), now))
}

// record applies add to each bucket's tally for all workers and for worker
// ("" for none); a nil bucket is skipped.
func record(worker string, add func(*tally), buckets ...*bucket) {
	for _, b := range buckets {
		if b == nil {
			continue
		}
		add(b.total)
		if worker != "" {
			add(b.worker(worker))
		}
	}
}

// ObserveDone records a finished request.
func (w *Window) ObserveDone(r Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.before(r.Start) {
		record(r.Worker, func(t *tally) { t.carry(r, w.slo) }, w.current(now))
		return
	}
	record(r.Worker, func(t *tally) { t.done(r, w.slo) }, w.current(now), w.sentIn(r.Start, now))
}

// sentIn returns the send-time bucket of a request sent at start, or nil
// when the window keeps none or the request has no send time. A send time
// past now (another clock's) counts as now. The caller holds mu.
func (w *Window) sentIn(start, now time.Time) *bucket {
	if w.bySend == nil || start.IsZero() {
		return nil
	}
	if start.After(now) {
		start = now
	}
	i := int(start.Sub(w.since) / w.step)
	for len(w.bySend) <= i {
		w.bySend = append(w.bySend, newBucket(w.since.Add(time.Duration(len(w.bySend))*w.step)))
	}
	return w.bySend[i]
}

// Stats summarises the window, for all workers, as of now, with nothing
// known to be in flight (see Summary).
func (w *Window) Stats() Stats {
	total, _ := w.Summary(InFlight{})
	return total
}

// Summary summarises the window as of now, for all workers and for each
// worker that served a request in it (keyed by the worker header). After
// Begin, its figures wait for the requests in flight (Stats.Answered,
// Stats.FirstTokens), though never for longer than the window's length.
func (w *Window) Summary(in InFlight) (total Stats, workers map[string]Stats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	w.current(now)
	all, per := merged(w.buckets)
	// Buckets sit on a grid of steps from the reset, and one that straddles
	// the window's start is kept whole, so the data span from the grid line
	// at or before now − length.
	from := w.reset
	if cut := now.Add(-w.length); cut.After(from) {
		from = from.Add(cut.Sub(from).Truncate(w.step))
	}
	covered := now.Sub(from)
	total = all.stats(covered)
	if len(per) > 0 {
		workers = make(map[string]Stats, len(per))
		for name, t := range per {
			workers[name] = t.stats(covered)
		}
	}
	if w.bySend == nil {
		return total, workers
	}
	// span is how far, on the step grid, every request sent has passed a
	// point whose oldest laggard was sent at oldest (zero: none lags). A
	// request in flight for longer than the window (a stalled stream) holds
	// nothing back.
	span := func(oldest time.Time) time.Duration {
		h := now
		if !oldest.IsZero() && oldest.Before(h) {
			h = oldest
		}
		if cut := now.Add(-w.length); h.Before(cut) {
			h = cut
		}
		return max(0, h.Sub(w.since).Truncate(w.step))
	}
	answered := span(in.Oldest)
	if answered >= w.length {
		// The window now counts, by end time, only requests sent long
		// enough after Begin that every length of request had time to end:
		// it leans no more, and the send-time tally is done.
		w.bySend = nil
		return total, workers
	}
	within := func(span time.Duration) (*tally, map[string]*tally) {
		return merged(w.bySend[:min(len(w.bySend), int(span/w.step))])
	}
	first := span(in.Waiting)
	sent, sentPer := within(answered)
	firsts, firstsPer := within(first)
	total = total.withAnswers(sent.stats(covered), answered).withFirstTokens(firsts.stats(covered), first)
	for name, s := range workers {
		t, f := sentPer[name], firstsPer[name]
		if t == nil {
			t = newTally()
		}
		if f == nil {
			f = newTally()
		}
		workers[name] = s.withAnswers(t.stats(covered), answered).withFirstTokens(f.stats(covered), first)
	}
	return total, workers
}

// merged adds up buckets, for all workers and per worker.
func merged(buckets []*bucket) (all *tally, per map[string]*tally) {
	all, per = newTally(), map[string]*tally{}
	for _, b := range buckets {
		all.merge(b.total)
		for name, t := range b.workers {
			if per[name] == nil {
				per[name] = newTally()
			}
			per[name].merge(t)
		}
	}
	return all, per
}

func (t *tally) stats(covered time.Duration) Stats {
	s := Stats{
		Covered:   covered,
		TTFT:      summarise(t.ttft),
		TPOT:      summarise(t.tpot),
		E2E:       summarise(t.e2e),
		ISL:       summarise(t.isl),
		OSL:       summarise(t.osl),
		Completed: t.completed,
		Errors:    t.errors,
		Good:      t.good,
	}
	s.InterChunk = summarise(t.gaps)
	s.AdjTTFT = adjust(t.ttft, t.errorsBeforeFirst)
	s.AdjTPOT = adjust(t.tpot, t.errors)
	s.AdjE2E = adjust(t.e2e, t.errors)
	if len(t.byClass) > 0 {
		s.ErrorsByClass = make(map[ErrorClass]int, len(t.byClass))
		for c, n := range t.byClass {
			s.ErrorsByClass[c] = n
		}
	}
	s.Answered, s.Answers, s.FirstTokens = covered, s.Completed+s.Errors, covered
	if n := s.Completed + s.Errors; n > 0 {
		s.ErrorRate = float64(s.Errors) / float64(n)
		s.SLOAttainment = float64(s.Good) / float64(n)
	}
	if secs := covered.Seconds(); secs > 0 {
		s.RequestsPerSec = float64(s.Completed+t.carried) / secs
		s.OutputTokensPerSec = float64(t.outputTokens+t.carriedTokens) / secs
		s.GoodputPerSec = float64(s.Good+t.carriedGood) / secs
	}
	if t.promptTokens > 0 {
		s.KVHitRate = float64(t.cachedPromptTokens) / float64(t.promptTokens)
	}
	s.KVHitRequests = t.hitRequests
	if t.oraclePromptTokens > 0 {
		v := float64(t.oracleTokens) / float64(t.oraclePromptTokens)
		s.OracleHitRate = &v
	}
	return s
}

var adjustedQuantiles = []struct {
	q    float64
	name string
}{{0.5, "p50"}, {0.95, "p95"}, {0.99, "p99"}}

// adjust places failures failures at +Inf above the finite values in s. With
// the sketch's rank convention (the q-quantile of n values sits at rank
// q·(n−1)), the q-quantile of all n = finite + failures values is +Inf when
// q·(n−1) passes the last finite rank, finite−1, and otherwise the finite
// values' quantile at the same rank. With no failures it equals the plain one.
func adjust(s *ddsketch.DDSketchWithExactSummaryStatistics, failures int) Adjusted {
	finite := s.GetCount()
	n := finite + float64(failures)
	a := Adjusted{Count: int(math.Round(n))}
	if n == 0 {
		return a
	}
	out := []*InfMs{&a.P50, &a.P95, &a.P99}
	for i, aq := range adjustedQuantiles {
		rank := aq.q * (n - 1)
		q := 0.0
		if finite > 1 {
			q = rank / (finite - 1)
		}
		if finite == 0 || rank > finite-1 {
			*out[i] = InfMs(math.Inf(1))
			a.Infinite = append(a.Infinite, aq.name)
			continue
		}
		v, err := s.GetValueAtQuantile(q)
		if err != nil {
			v = 0
		}
		*out[i] = InfMs(v)
	}
	return a
}

func summarise(s *ddsketch.DDSketchWithExactSummaryStatistics) Quantiles {
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

// Workers returns the names in a per-worker map, sorted.
func Workers(m map[string]Stats) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
