package router

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/clock"
)

// DefaultBlockSize is tokens per KV block: the seeds' TensorRT-LLM setting.
const DefaultBlockSize = 32

// Admission policies.
const (
	// AdmitQueue never sheds: every request goes to a worker.
	AdmitQueue = "queue"
	// AdmitShed refuses a request with 503 when every worker is busy: see
	// ShedRule.
	AdmitShed = "shed"
)

// ShedRule says, for help texts and reports, which shedding rule
// AdmitShed follows and whose it is.
const ShedRule = "shed refuses a request (503) only when every worker is busy, a worker being busy when its in-flight requests reach the busy threshold (serve's --busy-threshold, default 1) × its batch capacity. " +
	"Refusing only when all are busy is newer Dynamo's rule (PR #7615, March 2026); its busy test differs (pending prefill tokens or active KV blocks over thresholds, off by default from about v1.3). " +
	"Dynamo 0.9 with default flags never sheds in KV mode"

// Config configures a Router. The zero value takes every default.
type Config struct {
	// BlockSize is tokens per block; 0 means DefaultBlockSize.
	BlockSize int
	// Clock times bookings and predictions; nil means the wall clock.
	Clock clock.Clock
	// Knobs tune the cost-based policies; the zero value means DefaultKnobs.
	Knobs *Knobs
	// Admission is AdmitQueue (the default) or AdmitShed.
	Admission string
	// BusyThreshold makes a worker busy, for shedding, when its in-flight
	// requests reach BusyThreshold × its capacity; 0 means 1.
	BusyThreshold float64
	// MaxIndexBlocks bounds the event index; 0 means DefaultMaxIndexBlocks.
	MaxIndexBlocks int
	// StaleBooking frees bookings older than this; 0 means
	// DefaultStaleBooking.
	StaleBooking time.Duration
	// Registerer receives the router's metrics; nil registers none.
	Registerer prometheus.Registerer
	// MaxModelLen is the context length to enforce, in tokens, when no
	// worker reports one; 0 means DefaultMaxModelLen. See
	// Router.MaxModelLen.
	MaxModelLen int
}

// Settings are the router's run-time switches, as the admin API shows them.
type Settings struct {
	// Policy is the active policy's name.
	Policy string `json:"policy"`
	// Weight and Temperature are the cost-based policies' knobs.
	Weight      float64 `json:"weight"`
	Temperature float64 `json:"temperature"`
	// Admission is queue or shed.
	Admission string `json:"admission"`
	// BusyThreshold is the fraction of batch capacity at which a worker is
	// busy for shedding.
	BusyThreshold float64 `json:"busy_threshold"`
}

// Router decides which worker serves each request and tracks what every
// worker has in flight. It is safe for concurrent use.
type Router struct {
	pool      *Pool
	index     *Index
	approx    *Approx
	oracle    *Oracle
	clk       clock.Clock
	blockSize int
	stale     time.Duration
	metrics   *Metrics
	// maxModelLen is Config.MaxModelLen, in tokens.
	maxModelLen int

	policy atomic.Pointer[policyBox]

	// mu is the decision lock: candidates are read, the policy picks and
	// the request is booked under it, so the next decision sees the booking.
	mu         sync.Mutex
	settings   Settings
	bookings   map[*Booking]struct{}
	cands      []Candidate // reused by every decision
	lastSweep  time.Time
	staleFreed int64
	shed       int64
	retries    atomic.Int64
	last       Decision // the latest decision, for the dashboard's worked example

	blind detector // predicted against reported cached tokens (blind.go)
}

type policyBox struct{ Policy }

// NewRouter returns a router over pool that starts with policy p.
func NewRouter(pool *Pool, p Policy, cfg Config) *Router {
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Knobs == nil {
		k := DefaultKnobs()
		cfg.Knobs = &k
	}
	if cfg.Admission == "" {
		cfg.Admission = AdmitQueue
	}
	if cfg.BusyThreshold <= 0 {
		cfg.BusyThreshold = 1
	}
	if cfg.StaleBooking <= 0 {
		cfg.StaleBooking = DefaultStaleBooking
	}
	r := &Router{
		pool:      pool,
		index:     NewIndex(cfg.BlockSize, cfg.MaxIndexBlocks),
		approx:    NewApprox(cfg.Clock, 0, 0),
		oracle:    NewOracle(0),
		clk:       cfg.Clock,
		blockSize: cfg.BlockSize,
		stale:     cfg.StaleBooking,
		bookings:  map[*Booking]struct{}{},
		lastSweep: cfg.Clock.Now(),
		settings: Settings{
			Policy: p.Name(), Weight: cfg.Knobs.Weight, Temperature: cfg.Knobs.Temperature,
			Admission: cfg.Admission, BusyThreshold: cfg.BusyThreshold,
		},
	}
	r.maxModelLen = cfg.MaxModelLen
	r.index.SetOracle(r.oracle)
	// What the index predicted before a clear says nothing of what it
	// predicts after, so a worker's blindness window starts again.
	r.index.OnClear(r.blind.reset)
	r.metrics = NewMetrics(cfg.Registerer, r.index)
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(workerCollector{r})
	}
	r.policy.Store(&policyBox{p})
	pool.OnLeave(func(w *Worker) {
		r.index.RemoveWorker(w.Name)
		r.approx.RemoveWorker(w.Name)
	})
	return r
}

// Index is the KV-event index, which the event subscriber feeds.
func (r *Router) Index() *Index { return r.index }

// Approx is the predicted index.
func (r *Router) Approx() *Approx { return r.approx }

// Oracle is the run's best achievable hit rate.
func (r *Router) Oracle() *Oracle { return r.oracle }

// Pool is the worker set.
func (r *Router) Pool() *Pool { return r.pool }

// Metrics are the router's metrics.
func (r *Router) Metrics() *Metrics { return r.metrics }

// BlockSize is tokens per block.
func (r *Router) BlockSize() int { return r.blockSize }

// Policy returns the active policy.
func (r *Router) Policy() Policy { return r.policy.Load().Policy }

// SetPolicy switches the active policy. Requests already routed keep their
// worker and their booking; the next decision uses p.
func (r *Router) SetPolicy(p Policy) {
	r.mu.Lock()
	r.settings.Policy = p.Name()
	r.mu.Unlock()
	r.policy.Store(&policyBox{p})
}

// Settings returns the run-time switches.
func (r *Router) Settings() Settings {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.settings
}

// maxKnob bounds the policy knobs the admin API takes.
const maxKnob = 100

// Apply switches to s: a new policy built with its knobs, and its admission.
func (r *Router) Apply(s Settings) error {
	if s.Admission != AdmitQueue && s.Admission != AdmitShed {
		return fmt.Errorf("admission %q: want %s or %s", s.Admission, AdmitQueue, AdmitShed)
	}
	if !(s.BusyThreshold > 0) || math.IsInf(s.BusyThreshold, 0) {
		return fmt.Errorf("busy_threshold %g: want a positive number", s.BusyThreshold)
	}
	// Dynamo's overlap credit is 1 by default and its temperature 0 to a
	// few; a knob past maxKnob is a slip, and would make every cost the
	// overlap alone, or every choice random.
	if s.Weight > maxKnob || s.Temperature > maxKnob {
		return fmt.Errorf("weight %g and temperature %g: want each from 0 to %d", s.Weight, s.Temperature, maxKnob)
	}
	p, err := NewPolicyWith(s.Policy, Knobs{Weight: s.Weight, Temperature: s.Temperature})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.settings = s
	r.policy.Store(&policyBox{p})
	r.mu.Unlock()
	return nil
}

// SequenceGap records that worker's KV events skipped sequence numbers and
// clears its index, which rebuilds from the events that follow.
func (r *Router) SequenceGap(worker string) {
	r.metrics.SequenceGaps.WithLabelValues(worker).Inc()
	r.index.ClearWorker(worker)
}

// Hash returns the block-hash chain of tokens at the router's block size.
func (r *Router) Hash(tokens []uint32) []uint64 { return blockhash.Chain(tokens, r.blockSize) }

// Decide picks a worker for req among the healthy workers not in exclude,
// and books req on it. It fails with ErrNoWorker when no worker is left and
// ErrBusy when the admission policy sheds the request.
func (r *Router) Decide(req *Request, exclude []*Worker) (*Booking, error) {
	start := time.Now()
	req.BlockSize = r.blockSize
	if req.Chain == nil && len(req.TokenIDs) > 0 {
		req.Chain = blockhash.Extend(make([]uint64, 0, len(req.TokenIDs)/r.blockSize), req.TokenIDs, r.blockSize)
	}
	if req.Tokens == 0 {
		req.Tokens = len(req.TokenIDs)
	}
	r.adapt(req)
	hashed := time.Now()

	var wbuf [64]*Worker
	var nbuf [64]string
	var pbuf [64]int
	workers, names, pos := wbuf[:0], nbuf[:0], pbuf[:0]
	for i, w := range r.pool.Workers() {
		if w.Healthy() && !slices.Contains(exclude, w) {
			workers = append(workers, w)
			names = append(names, w.Name)
			pos = append(pos, i)
		}
	}
	if len(workers) == 0 {
		return nil, ErrNoWorker
	}
	p := r.Policy()
	var obuf, sbuf [64]int
	var overlap, sizes []int
	if usesPrediction(p) {
		overlap = r.approx.FindMatches(req.Chain, names, obuf[:0])
		sizes = r.approx.Sizes(names, sbuf[:0])
	} else {
		overlap = r.index.FindMatches(req.Chain, names, obuf[:0])
		sizes = r.index.Sizes(names, sbuf[:0])
	}
	oracle := r.oracle.Match(req.Chain, req.Tokens, r.blockSize)
	looked := time.Now()

	r.mu.Lock()
	cands := r.cands[:0]
	now := r.clk.Now()
	r.sweepLocked(now)
	busy := 0
	for i, w := range workers {
		l := &w.load
		capacity, _ := w.BatchCapacity()
		c := Candidate{
			Worker: w, Position: pos[i], Overlap: overlap[i], IndexBlocks: sizes[i],
			InFlight: l.inflight, PrefillTokens: l.prefillTokens, ContextTokens: l.contextTokens,
			ActiveBlocks: l.blocks.len(), ActiveDepth: l.depth(req.Chain), Capacity: max(1, capacity),
		}
		if r.settings.Admission != AdmitShed {
			// Shed admission refuses rather than queues: no worker counts
			// as freeing slots, so kv queues nothing on a full worker.
			c.RecentlyFreed = l.freedSince(now.Add(-FreedWindow))
		}
		if float64(c.InFlight) >= r.settings.BusyThreshold*float64(c.Capacity) {
			busy++
		}
		cands = append(cands, c)
	}
	if r.settings.Admission == AdmitShed && busy == len(cands) {
		r.shed++
		r.mu.Unlock()
		r.metrics.Shed.Inc()
		return nil, ErrBusy
	}
	i := p.Pick(req, cands)
	if i < 0 || i >= len(cands) {
		// A policy's bug must not panic under the decision lock, which
		// would hold every later decision: this request fails alone.
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: policy %s picked candidate %d of %d", ErrNoWorker, p.Name(), i, len(cands))
	}
	c := cands[i]
	r.cands = cands
	// Keep the decision for display: a copy of a few small structs, reusing
	// the same backing array every time.
	r.last.Policy, r.last.Chosen = p.Name(), i
	r.last.Request = Request{Tokens: req.Tokens, Chain: req.Chain, BlockSize: req.BlockSize}
	r.last.Candidates = append(r.last.Candidates[:0], cands...)
	b := &Booking{
		Worker: c.Worker, Overlap: c.Overlap, Policy: p.Name(), r: r,
		chain: req.Chain, isl: req.Tokens, seqs: sequences(req, &c), prefill: uncachedTokens(req, &c), at: now,
		oracle: oracle,
	}
	c.Worker.load.add(b)
	r.bookings[b] = struct{}{}
	r.mu.Unlock()
	done := time.Now()

	// The predicted index learns from decisions for workers that publish no
	// events, and from every decision while kv_approx is live.
	if c.Worker.Events == "" || usesPrediction(p) {
		b.predicted = true
		r.approx.Insert(c.Worker.Name, req.Chain)
	}
	c.Worker.routed.Add(1)
	c.Worker.predictedHit.Add(int64(min(req.Tokens, c.Overlap*r.blockSize)))
	m := r.metrics
	m.Decisions.WithLabelValues(c.Worker.Name, b.Policy).Inc()
	m.OverlapBlocks.Observe(float64(c.Overlap))
	m.hashing.Observe(hashed.Sub(start).Seconds())
	m.lookup.Observe(looked.Sub(hashed).Seconds())
	m.scoring.Observe(done.Sub(looked).Seconds())
	m.total.Observe(done.Sub(start).Seconds())
	return b, nil
}

// Reaches reports whether a decision could see past the end of chain: some
// worker holds its last block, in the index the policy reads or among its
// requests in flight. When none does, no worker holds any later block of the
// same prompt as part of a matched prefix, so every overlap and active depth
// a decision would compute is the same for chain as for the whole prompt.
// An empty chain always reaches further.
func (r *Router) Reaches(chain []uint64) bool {
	if len(chain) == 0 {
		return true
	}
	h := chain[len(chain)-1]
	if usesPrediction(r.Policy()) {
		if r.approx.Held(h) {
			return true
		}
	} else if r.index.Held(h) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.pool.Workers() {
		if w.load.blocks.get(h) > 0 {
			return true
		}
	}
	return false
}

// Complete gives a booking decided on the head of a prompt (see Reaches)
// the whole prompt, once it is tokenized: the worker's load then counts the
// request's true length and blocks, and the predicted index its whole chain.
func (r *Router) Complete(b *Booking, ids []uint32) {
	r.mu.Lock()
	if n := len(b.chain); !b.done && n*r.blockSize <= len(ids) {
		l := &b.Worker.load
		l.remove(b)
		b.chain = blockhash.Extend(b.chain[:n:n], ids[n*r.blockSize:], r.blockSize)
		b.isl = len(ids)
		b.prefill = max(0, len(ids)-b.Overlap*r.blockSize)
		b.oracle = r.oracle.Match(b.chain, b.isl, r.blockSize)
		l.add(b)
		if b.prefilled {
			l.prefillDone(b)
		}
	}
	chain, predicted := b.chain, b.predicted
	r.mu.Unlock()
	if predicted {
		r.approx.Insert(b.Worker.Name, chain)
	}
}

func (r *Router) releaseLocked(b *Booking) {
	if b.done {
		return
	}
	b.done = true
	b.Worker.load.remove(b)
	b.Worker.load.freed(r.clk.Now(), b.seqs)
	delete(r.bookings, b)
}

// sweepLocked frees bookings older than the stale limit, at most once every
// tenth of that limit, so that a lost release cannot hold a worker forever.
func (r *Router) sweepLocked(now time.Time) {
	if now.Sub(r.lastSweep) < r.stale/10 {
		return
	}
	r.lastSweep = now
	for b := range r.bookings {
		if now.Sub(b.at) >= r.stale {
			r.releaseLocked(b)
			r.staleFreed++
		}
	}
}

// WorkerState is one worker as the admin API shows it.
type WorkerState struct {
	Name    string `json:"name"`
	URL     string `json:"url"`
	Events  string `json:"events,omitempty"`
	Healthy bool   `json:"healthy"`
	// EventStream is the worker's KV-event stream; absent when no events
	// are read from it.
	EventStream *StreamState `json:"event_stream,omitempty"`
	// Capacity is the batch capacity, in requests.
	Capacity int `json:"capacity"`
	// CapacitySource says where Capacity came from: "flag" (the worker's
	// capacity= option or --max-batch-size), "worker" (what the worker
	// reports) or "default".
	CapacitySource string `json:"capacity_source"`
	// CapacityReported is the batch capacity the worker last reported, in
	// requests; 0 before it has reported one.
	CapacityReported int `json:"capacity_reported"`
	// CapacityReportFailures counts asks that got no usable batch capacity.
	CapacityReportFailures int64 `json:"capacity_report_failures"`
	// CapacityReportError is why the latest ask failed; empty after a good
	// one.
	CapacityReportError string `json:"capacity_report_error,omitempty"`
	// TokenizerProbe is what --tokenizer auto's latest probe of the worker
	// found: ProbeMatches, ProbeDiffers or ProbeFailed; absent when it was
	// never probed.
	TokenizerProbe string `json:"tokenizer_probe,omitempty"`
	// TokenizerProbeFailures counts its probes that failed.
	TokenizerProbeFailures int64 `json:"tokenizer_probe_failures,omitempty"`
	// TokenizerProbeError is why the latest probe failed; empty after a
	// good one.
	TokenizerProbeError string `json:"tokenizer_probe_error,omitempty"`
	// TokenizerProbeRetry is the wait before a failed probe is tried
	// again, in seconds; absent when no retry is pending.
	TokenizerProbeRetry float64 `json:"tokenizer_probe_retry_s,omitempty"`
	// InFlight counts requests booked and not finished.
	InFlight int `json:"in_flight"`
	// ActivePrefillTokens sums uncached prompt tokens of requests without a
	// first token, in tokens.
	ActivePrefillTokens int `json:"active_prefill_tokens"`
	// ActiveBlocks counts distinct prompt blocks of booked requests.
	ActiveBlocks int `json:"active_blocks"`
	// IndexedBlocks counts blocks the event index holds for the worker.
	IndexedBlocks int `json:"indexed_blocks"`
	// PredictedBlocks counts blocks the predicted index holds for it.
	PredictedBlocks int `json:"predicted_blocks"`
	// Routed counts requests sent to the worker.
	Routed int64 `json:"requests_routed"`
	// PredictedHitTokens sums overlap·B at decision time, in tokens.
	PredictedHitTokens int64 `json:"predicted_hit_tokens"`
	// ActualHitTokens sums the cached_tokens the worker reported, in tokens.
	ActualHitTokens int64 `json:"actual_hit_tokens"`
	// Errors counts requests that failed at the worker.
	Errors int64 `json:"errors"`
}

// Workers returns every worker's state.
func (r *Router) Workers() []WorkerState {
	ws := r.pool.Workers()
	out := make([]WorkerState, 0, len(ws))
	for _, w := range ws {
		capacity, source := w.BatchCapacity()
		w.learn.mu.Lock()
		reportErr := w.learn.lastErr
		w.learn.mu.Unlock()
		probe, probeFailures, probeErr, probeWait := w.autoProbe.snapshot()
		out = append(out, WorkerState{
			Name: w.Name, URL: w.URL.String(), Events: w.Events, Healthy: w.Healthy(), EventStream: w.EventStream(),
			Capacity: capacity, CapacitySource: source, CapacityReported: int(w.learn.reported.Load()),
			CapacityReportFailures: w.learn.failures.Load(), CapacityReportError: reportErr,
			IndexedBlocks: r.index.Blocks(w.Name), PredictedBlocks: r.approx.Blocks(w.Name),
			Routed: w.routed.Load(), PredictedHitTokens: w.predictedHit.Load(),
			ActualHitTokens: w.actualHit.Load(), Errors: w.errors.Load(),
			TokenizerProbe: probe, TokenizerProbeFailures: probeFailures, TokenizerProbeError: probeErr,
			TokenizerProbeRetry: probeWait.Seconds(),
		})
	}
	r.mu.Lock()
	for i, w := range ws {
		out[i].InFlight = w.load.inflight
		out[i].ActivePrefillTokens = w.load.prefillTokens
		out[i].ActiveBlocks = w.load.blocks.len()
	}
	r.mu.Unlock()
	return out
}

// Decision is one routing decision as the policy saw it.
type Decision struct {
	// Policy is the name of the policy that decided.
	Policy string
	// Request holds the request's prompt length, block chain and block size.
	Request Request
	// Candidates are the healthy workers with the terms the policy scored.
	Candidates []Candidate
	// Chosen indexes Candidates: the worker picked.
	Chosen int
}

// LastDecision returns the most recent routing decision, and false before
// the first one.
func (r *Router) LastDecision() (Decision, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.last
	d.Candidates = slices.Clone(d.Candidates)
	return d, len(d.Candidates) > 0
}

// Counts are the router's totals.
type Counts struct {
	// InFlight counts open bookings.
	InFlight int `json:"in_flight"`
	// Shed counts requests refused because every worker was busy.
	Shed int64 `json:"shed"`
	// Retries counts requests retried after a connect failure.
	Retries int64 `json:"retries"`
	// StaleFreed counts bookings freed by the stale-booking expiry.
	StaleFreed int64 `json:"stale_freed"`
	// Oracle is the best achievable hit rate since the router started.
	Oracle OracleStats `json:"oracle"`
}

// Counts returns the router's totals.
func (r *Router) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Counts{InFlight: len(r.bookings), Shed: r.shed, Retries: r.retries.Load(), StaleFreed: r.staleFreed, Oracle: r.oracle.Stats()}
}
