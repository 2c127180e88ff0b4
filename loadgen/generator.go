// Package loadgen plays many multi-turn chat conversations at once against an
// OpenAI-compatible endpoint, or replays a Mooncake trace, and measures them
// the way AIPerf does (shared/reference/metrics.md).
package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/tokenizer"
)

// MaxConcurrency bounds the target: one process drives hundreds of
// conversations, not millions.
const MaxConcurrency = 10000

// Config sets up a Generator.
type Config struct {
	// Concurrency is the initial number of simultaneous conversations.
	Concurrency int
	// MaxTokens caps each answer (conversations; a trace sets its own).
	MaxTokens int
	// Turns is the distribution of turns per conversation.
	Turns TurnDist
	// ThinkTime is the pause between a turn's answer and the next question,
	// or with ThinkDist ThinkExponential its mean.
	ThinkTime time.Duration
	// ThinkDist says how each pause is drawn; the zero value is ThinkFixed.
	ThinkDist ThinkDist
	// ReadingWPM is ThinkReading's reading speed, in words per minute.
	ReadingWPM float64
	// SystemPrompt opens every conversation; empty means the built-in
	// one-line prompt.
	SystemPrompt string
	// ToolTokens, when its Max is positive, makes every follow-up a tool
	// result of Min..Max tokens (uniform) instead of a question, as an
	// agent's loop feeds tool outputs back to the model.
	ToolTokens TokenRange
	// SessionLength, when positive, opens the loop: conversations arrive as
	// a Poisson process at Concurrency / SessionLength per second, whatever
	// those in flight are doing, so that by Little's law Concurrency of them
	// are in flight when a conversation lasts SessionLength on average.
	// See OpenLoopRate.
	SessionLength time.Duration
	// MaxContext, when positive, ends a conversation before a turn whose
	// prompt plus MaxTokens would pass it, in tokens, as a user starts a
	// new chat when the old one is full; Snapshot.ContextFull counts them.
	MaxContext int
	// StartRate paces new conversations, per second; 0 means unpaced.
	StartRate float64
	// InStep starts every conversation of a closed loop from its full turns,
	// even those a run starts at once or a higher level adds, as the
	// original demo's generator did. With equal turns they then end
	// together and keep the fleet in waves of first turns and follow-ups.
	// By default those are drawn part-way through instead (see run.warm).
	InStep bool
	// RequestTimeout bounds each request, send to last byte; 0 means none.
	RequestTimeout time.Duration
	// ErrorPause is how long a conversation that failed holds its place
	// before a new one replaces it, as a user waits before trying again;
	// 0 means DefaultErrorPause.
	ErrorPause time.Duration
	// Window is the length of the rolling metrics window.
	Window time.Duration
	// SLO judges goodput and SLO attainment.
	SLO SLO
	// Seed makes the choice of starters and questions reproducible.
	Seed uint64
	// Starters are the texts conversations open with.
	Starters []Starter
	// User writes follow-up questions; nil means UserModel if its URL is
	// set, else the built-in generator. When it fails, the built-in one
	// stands in and the fallback is counted.
	User UserSimulator
	// UserModel configures an OpenAI-compatible user model endpoint.
	UserModel UserModelConfig
	// Trace, when not empty, replaces the conversations with an open-loop
	// replay of these records on their own schedule.
	Trace []TraceRecord
	// Clock is the time source for pacing, think time, the trace schedule
	// and the windows; nil means the real clock.
	Clock clock.Clock
}

// DefaultErrorPause is Config.ErrorPause's default. Without a pause, a
// router that refuses every request at once would get an endless burst of
// new conversations, and in virtual time the clock would never move on.
const DefaultErrorPause = time.Second

// UserModelConfig points the user simulator at an OpenAI-compatible endpoint.
type UserModelConfig struct {
	// URL is the endpoint's base URL, ending in /v1; empty means none.
	URL string
	// Model is the model name to ask.
	Model string
	// Timeout bounds each question.
	Timeout time.Duration
}

// UserModelKeyEnv is the environment variable holding the user model's API
// key, kept out of flags so it never shows in a process list.
const UserModelKeyEnv = "KVLENS_USER_MODEL_KEY"

// DefaultConfig is the seeds' workload: 5 turns (the original demo's code
// ran exactly 5, and the seeds' baselines came from it; seed 003's text
// says 3–5), 1024 max tokens, a 60 s window, conversations started at up
// to 10 per second.
func DefaultConfig() Config {
	return Config{
		Concurrency:    60,
		MaxTokens:      1024,
		Turns:          UniformTurns(5, 5),
		StartRate:      10,
		RequestTimeout: 5 * time.Minute,
		Window:         60 * time.Second,
		SLO:            DefaultSLO,
		Seed:           1,
		UserModel:      UserModelConfig{Timeout: 10 * time.Second},
	}
}

// Snapshot is everything the load generator knows at one moment. The
// dashboard and the sweep runner read only this.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// Running says whether load is being generated.
	Running bool `json:"running"`
	// Workload is "conversations" or "trace".
	Workload string `json:"workload"`
	// Target is the concurrency asked for.
	Target int `json:"target"`
	// Live is the number of conversations running now (in trace replay, the
	// requests in flight).
	Live int `json:"live"`
	// InFlight is the number of requests awaiting or streaming an answer.
	InFlight int `json:"in_flight"`
	// SLO is the objective Window.Good and the goodput figures judge by.
	SLO SLO `json:"slo"`
	// Window holds the rolling-window metrics over all workers.
	Window Stats `json:"window"`
	// Workers holds the same metrics per worker, keyed by the worker header;
	// nil until a response named its worker.
	Workers map[string]Stats `json:"workers,omitempty"`
	// User counts follow-up questions by who wrote them.
	User UserStats `json:"user"`
	// Trace is the replay's progress; nil for conversations.
	Trace *TraceStats `json:"trace,omitempty"`
	// ArrivalRate is an open loop's conversation arrival rate, per second;
	// 0 for a closed loop or a trace.
	ArrivalRate float64 `json:"arrival_rate,omitempty"`
	// ContextFull counts conversations ended before their planned turns
	// because the next prompt would not fit Config.MaxContext.
	ContextFull int64 `json:"context_full,omitempty"`
}

// UserStats counts follow-up questions since the generator was made.
type UserStats struct {
	// Model says whether a user model is configured.
	Model bool `json:"model"`
	// ModelQuestions counts questions the user model wrote.
	ModelQuestions int64 `json:"model_questions"`
	// Builtin counts questions the built-in generator wrote by design.
	Builtin int64 `json:"builtin"`
	// Fallbacks counts questions the built-in generator wrote because the
	// user model failed.
	Fallbacks int64 `json:"fallbacks"`
	// LastError is the user model's latest failure; empty if none.
	LastError string `json:"last_error,omitempty"`
}

// TraceStats is a trace replay's progress.
type TraceStats struct {
	// Records is the trace's length.
	Records int `json:"records"`
	// Sent counts requests sent in the current (or last) run.
	Sent int `json:"sent"`
	// Finished counts requests that ended, successfully or not.
	Finished int `json:"finished"`
	// Lag is how late requests were sent against the trace's schedule, ms.
	Lag Quantiles `json:"lag"`
}

// Generator runs conversations. Its methods are safe for concurrent use.
//
// It is event-driven: a conversation is a state machine advanced by
// callbacks (the transport's done, and timers on the generator's clock for
// pacing, think time and request timeouts), never a goroutine blocked on a
// channel. So the same code runs in real time, where the clock's timers and
// the transport's streams fire from their own goroutines, and in virtual
// time, where a discrete-event loop fires every callback from one goroutine
// in a fixed order and the run is reproducible (package des).
type Generator struct {
	cfg       Config
	clk       clock.Clock
	transport AsyncTransport
	window    *Window
	metrics   *Metrics
	log       convLog

	// wakeups counts passes of the start logic (fill), so a test can tell
	// an idle generator from a spinning one.
	wakeups atomic.Int64

	mu        sync.Mutex
	target    int
	live      int
	inFlight  int
	run       *run // nil when stopped
	rng       *rand.Rand
	user      UserStats
	traceSent int
	traceDone int
	lag       *ddsketch.DDSketchWithExactSummaryStatistics
	full      int64 // conversations ended at MaxContext
	// held is what the requests Stop cancelled held back of the window's
	// figures (Snapshot): cancelled, they are never answered, and a window
	// that forgot them would count, of the requests sent just before the
	// stop, only those that ended early, the failures among them.
	held InFlight
}

// run is one Start..Stop period. Its fields are guarded by Generator.mu.
type run struct {
	// ctx ends when the run stops; only the user model's questions use it.
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed once the run is stopped and every conversation (or
	// trace request) has ended.
	done    chan struct{}
	closed  bool
	stopped bool
	// convs counts conversations, or trace requests, not yet ended.
	convs int
	// pacing says a timer will call fill when the next start is allowed.
	pacing bool
	// next is the earliest time the next conversation may start.
	next time.Time
	// waits are the run's pending timers; Stop cancels them.
	waits map[*wait]struct{}
	// turns are the requests in flight; Stop cancels them.
	turns map[*turn]struct{}
	// seq numbers waits and turns, so that Stop cancels them in the order
	// they began: a virtual-time run stays reproducible.
	seq uint64
	// warm counts conversations still to start part-way through: those a
	// run starts at once and those a higher level adds. Drawn so, their
	// ends are spread as a steady state's are, instead of all falling due
	// together and keeping the fleet in waves of first turns and
	// follow-ups. In an open loop they are the only conversations fill
	// starts; arrivals start the rest.
	warm int
	// arrival numbers an open loop's pending arrival; a change of rate
	// makes the pending one stale.
	arrival uint64
}

// wait is a pending timer of a run. cancelled, if not nil, runs instead of
// the timer's function when the run stops first.
type wait struct {
	seq       uint64
	t         clock.Timer
	cancelled func()
}

// turn is one request in flight.
type turn struct {
	seq uint64
	// sent is when the request was handed to the transport.
	sent time.Time
	// first says its first token has come.
	first atomic.Bool
	// mu guards cancel, which the transport returns only after it may
	// already have finished the turn, and early.
	mu     sync.Mutex
	cancel func(error)
	// early is an abort that came before the transport had started the
	// turn (Stop between registering the turn and starting it); the turn
	// is cancelled with it as soon as it starts.
	early    error
	timer    clock.Timer // request timeout, or nil
	timedOut atomic.Bool
}

// New returns a stopped generator over a blocking transport, each of whose
// turns runs in its own goroutine (see Async). metrics may be nil.
func New(t Transport, cfg Config, metrics *Metrics) (*Generator, error) {
	return NewAsync(Async(t), cfg, metrics)
}

// NewAsync returns a stopped generator over an asynchronous transport.
// metrics may be nil.
func NewAsync(t AsyncTransport, cfg Config, metrics *Metrics) (*Generator, error) {
	switch {
	case len(cfg.Starters) == 0 && len(cfg.Trace) == 0:
		return nil, errors.New("loadgen: no conversation starters")
	case cfg.MaxTokens < 1:
		return nil, fmt.Errorf("loadgen: max tokens %d: need at least 1", cfg.MaxTokens)
	case cfg.StartRate < 0 || math.IsNaN(cfg.StartRate) || math.IsInf(cfg.StartRate, 0):
		return nil, fmt.Errorf("loadgen: start rate %v: need 0 (unpaced) or a finite rate", cfg.StartRate)
	case cfg.Window < windowBuckets*time.Millisecond:
		return nil, fmt.Errorf("loadgen: window %v is too short", cfg.Window)
	case cfg.ThinkTime < 0 || cfg.RequestTimeout < 0 || cfg.ErrorPause < 0 || cfg.SessionLength < 0:
		return nil, fmt.Errorf("loadgen: think time %v, request timeout %v, error pause %v and session length %v must not be negative", cfg.ThinkTime, cfg.RequestTimeout, cfg.ErrorPause, cfg.SessionLength)
	case cfg.MaxContext < 0:
		return nil, fmt.Errorf("loadgen: max context %d: need 0 (none) or a positive number of tokens", cfg.MaxContext)
	case cfg.SLO.TTFT <= 0 || cfg.SLO.TPOT <= 0:
		return nil, fmt.Errorf("loadgen: SLO TTFT %v and TPOT %v must be positive", cfg.SLO.TTFT, cfg.SLO.TPOT)
	}
	if len(cfg.Trace) == 0 {
		if err := cfg.Turns.valid(); err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
		if err := cfg.checkThink(); err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
		if err := cfg.ToolTokens.valid(); err != nil {
			return nil, fmt.Errorf("loadgen: tool tokens: %w", err)
		}
	} else {
		blockVocab() // tens of ms, once: not at the first record's due time
	}
	if err := checkConcurrency(cfg.Concurrency); err != nil {
		return nil, err
	}
	if cfg.User == nil && cfg.UserModel.URL != "" {
		if cfg.UserModel.Model == "" || cfg.UserModel.Timeout <= 0 {
			return nil, fmt.Errorf("loadgen: user model at %s needs a model name and a positive timeout", cfg.UserModel.URL)
		}
		cfg.User = NewUserModel(cfg.UserModel.URL, cfg.UserModel.Model, os.Getenv(UserModelKeyEnv), cfg.UserModel.Timeout)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real
	}
	if cfg.ErrorPause == 0 {
		cfg.ErrorPause = DefaultErrorPause
	}
	g := &Generator{
		cfg:       cfg,
		clk:       clk,
		transport: t,
		window:    NewWindow(cfg.Window, cfg.SLO, clk.Now),
		metrics:   metrics,
		target:    cfg.Concurrency,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		lag:       newSketch(),
	}
	g.user.Model = cfg.User != nil
	return g, nil
}

func checkConcurrency(n int) error {
	if n < 0 || n > MaxConcurrency {
		return fmt.Errorf("loadgen: concurrency %d is outside 0..%d", n, MaxConcurrency)
	}
	return nil
}

// Start begins generating load. Starting a running generator does nothing.
func (g *Generator) Start() {
	g.mu.Lock()
	if g.run != nil {
		g.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{ctx: ctx, cancel: cancel, done: make(chan struct{}), waits: map[*wait]struct{}{}, turns: map[*turn]struct{}{}}
	g.run = r
	if len(g.cfg.Trace) > 0 {
		g.traceSent, g.traceDone = 0, 0
		g.lag = newSketch()
		start := g.clk.Now().Add(replayLead)
		g.afterLocked(r, 0, func() { g.dispatch(r, start, 0) }, nil)
		g.mu.Unlock()
		return
	}
	if g.partwayStarts() {
		r.warm = g.target
	}
	if g.cfg.SessionLength > 0 {
		g.scheduleArrivalLocked(r)
	}
	g.mu.Unlock()
	g.fill(r)
}

// Stop cancels every conversation and request in flight, and returns once
// none is left, so a Start right after never overlaps the old run. A
// transport driven by a discrete-event loop ends its turns as it is
// cancelled, so Stop then returns without the loop running.
func (g *Generator) Stop() {
	g.mu.Lock()
	r := g.run
	if r == nil {
		g.mu.Unlock()
		return
	}
	g.run = nil
	r.stopped = true
	// A timer that fired but has not yet taken the lock finds its wait
	// gone and does nothing, so exactly one of f and cancelled runs.
	waits := slices.SortedFunc(maps.Keys(r.waits), func(a, b *wait) int { return cmp.Compare(a.seq, b.seq) })
	var cancelled []func()
	for _, w := range waits {
		w.t.Stop()
		if w.cancelled != nil {
			cancelled = append(cancelled, w.cancelled)
		}
	}
	clear(r.waits)
	turns := slices.SortedFunc(maps.Keys(r.turns), func(a, b *turn) int { return cmp.Compare(a.seq, b.seq) })
	g.held = g.heldBackLocked(r, g.window.Since())
	g.closeIfDoneLocked(r)
	g.mu.Unlock()
	r.cancel()
	for _, f := range cancelled {
		f()
	}
	for _, t := range turns {
		t.abort(context.Canceled)
	}
	<-r.done
}

func (g *Generator) closeIfDoneLocked(r *run) {
	if r.stopped && r.convs == 0 && !r.closed {
		r.closed = true
		close(r.done)
	}
}

// afterLocked runs f after d on the generator's clock, unless r stops first;
// then cancelled runs instead, if not nil. g.mu is held.
func (g *Generator) afterLocked(r *run, d time.Duration, f, cancelled func()) {
	if r.stopped {
		if cancelled != nil {
			defer func() { g.mu.Unlock(); cancelled(); g.mu.Lock() }()
		}
		return
	}
	r.seq++
	w := &wait{seq: r.seq, cancelled: cancelled}
	r.waits[w] = struct{}{}
	w.t = g.clk.AfterFunc(d, func() {
		g.mu.Lock()
		_, ok := r.waits[w]
		delete(r.waits, w)
		g.mu.Unlock()
		if ok { // else Stop took it
			f()
		}
	})
}

// SetConcurrency changes the target number of conversations. Raising it
// starts conversations at once (paced by the start rate); lowering it lets
// the excess finish their current turn and end, never cutting a stream.
// A trace replay ignores it: the trace sets its own schedule.
func (g *Generator) SetConcurrency(n int) error {
	if err := checkConcurrency(n); err != nil {
		return err
	}
	g.mu.Lock()
	old := g.target
	g.target = n
	r := g.run
	if r != nil && len(g.cfg.Trace) == 0 {
		// A higher level starts its extra conversations part-way through,
		// as Start does; a lower one lets those in flight finish and starts
		// none part-way.
		if g.partwayStarts() {
			r.warm = min(r.warm+max(n-old, 0), n)
		}
		if g.cfg.SessionLength > 0 {
			// Arrivals are memoryless: the pending one is redrawn at the
			// new rate.
			g.scheduleArrivalLocked(r)
		}
	}
	g.mu.Unlock()
	if r != nil && len(g.cfg.Trace) == 0 {
		g.fill(r)
	}
	return nil
}

// Reset empties the rolling window.
func (g *Generator) Reset() { g.window.Reset() }

// BeginWindow empties the rolling window and counts in it only requests
// sent from now on (Window.Begin), for a dashboard that starts a window at
// every change.
func (g *Generator) BeginWindow() { g.window.Begin() }

// heldBackLocked returns the send times of the oldest requests the window
// counts (sent at or after since) that are in flight in r (nil: none) or
// were cancelled by the last Stop. g.mu is held.
func (g *Generator) heldBackLocked(r *run, since time.Time) InFlight {
	var in InFlight
	note := func(sent time.Time, waiting bool) {
		if sent.IsZero() || sent.Before(since) {
			return
		}
		if in.Oldest.IsZero() || sent.Before(in.Oldest) {
			in.Oldest = sent
		}
		if waiting && (in.Waiting.IsZero() || sent.Before(in.Waiting)) {
			in.Waiting = sent
		}
	}
	note(g.held.Oldest, false)
	note(g.held.Waiting, true)
	if r != nil {
		for t := range r.turns {
			note(t.sent, !t.first.Load())
		}
	}
	return in
}

// Target is the load level asked for, as Snapshot's Target, without the
// window's figures that a Snapshot computes.
func (g *Generator) Target() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.target
}

// Snapshot returns the current state and window metrics.
func (g *Generator) Snapshot() Snapshot {
	// The oldest requests in flight that the window counts hold back its
	// figures (Stats.Answered, Stats.FirstTokens).
	since := g.window.Since()
	g.mu.Lock()
	in := g.heldBackLocked(g.run, since)
	g.mu.Unlock()
	total, workers := g.window.Summary(in)
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Snapshot{
		Time:     g.clk.Now(),
		Running:  g.run != nil,
		Workload: "conversations",
		Target:   g.target,
		Live:     g.live,
		InFlight: g.inFlight,
		SLO:      g.cfg.SLO,
		Window:   total,
		Workers:  workers,
		User:     g.user,
	}
	s.ContextFull = g.full
	if g.cfg.SessionLength > 0 {
		s.ArrivalRate = OpenLoopRate(g.target, g.cfg.SessionLength)
	}
	if len(g.cfg.Trace) > 0 {
		s.ArrivalRate = 0
		s.Workload = "trace"
		s.Live = g.inFlight
		s.Trace = &TraceStats{Records: len(g.cfg.Trace), Sent: g.traceSent, Finished: g.traceDone, Lag: summarise(g.lag)}
	}
	return s
}

// Conversations lists the logged conversations (the last LogSize), newest
// first.
func (g *Generator) Conversations() []ConversationSummary { return g.log.list() }

// Conversation returns the logged conversation with the given id, with its
// turns' text and metrics; false when it is unknown or has left the log.
func (g *Generator) Conversation(id uint64) (ConversationLog, bool) { return g.log.get(id) }

// partwayStarts says whether the conversations a run starts at once are
// drawn part-way through (run.warm): always in an open loop, and in a
// closed one unless InStep.
func (g *Generator) partwayStarts() bool { return !g.cfg.InStep || g.cfg.SessionLength > 0 }

// fill starts conversations until the target is reached, paced by the start
// rate: when the next start is not yet allowed, it sets one timer that calls
// it again. It runs whenever the target may have been missed: at Start, when
// the target changes, when a conversation ends and when the pacing allows.
// The first r.warm it starts are drawn part-way through (see run.warm).
func (g *Generator) fill(r *run) {
	open := g.cfg.SessionLength > 0
	var interval time.Duration // between starts; 0 is unpaced
	if g.cfg.StartRate > 0 {
		interval = time.Duration(float64(time.Second) / g.cfg.StartRate)
	}
	for {
		g.wakeups.Add(1)
		g.mu.Lock()
		if !open && g.live >= g.target {
			r.warm = 0 // replacements start from their first turn
		}
		if r.stopped || r.pacing || (!open && g.live >= g.target) || (open && r.warm == 0) {
			g.mu.Unlock()
			return
		}
		if interval > 0 {
			now := g.clk.Now()
			if now.Before(r.next) {
				r.pacing = true
				g.afterLocked(r, r.next.Sub(now), func() {
					g.mu.Lock()
					r.pacing = false
					g.mu.Unlock()
					g.fill(r)
				}, nil)
				g.mu.Unlock()
				return
			}
			r.next = now.Add(interval)
		}
		g.live++
		r.convs++
		partway := r.warm > 0
		if partway {
			r.warm--
		}
		c := g.pickLocked(partway)
		g.mu.Unlock()
		g.begin(r, c)
	}
}

// pickLocked draws a new conversation's starter, turns and seed; partway
// says it is caught part-way through (see TurnDist.sampleRemaining). g.mu
// is held.
func (g *Generator) pickLocked(partway bool) *conversation {
	s := &g.cfg.Starters[g.rng.IntN(len(g.cfg.Starters))]
	var turns int
	if partway {
		turns = g.cfg.Turns.sampleRemaining(g.rng)
	} else {
		turns = g.cfg.Turns.sample(g.rng)
	}
	rng := rand.New(rand.NewPCG(g.rng.Uint64(), g.rng.Uint64()))
	return newConversation(s, turns, rng, g.cfg.SystemPrompt)
}

// begin sends a new conversation's opening turn.
func (g *Generator) begin(r *run, c *conversation) {
	c.log = g.log.open(c.starter, c.turns, g.clk.Now())
	c.question, c.source = openingQuestion(c.starter), "opening"
	g.log.ask(c.log, c.turn, c.question, c.source, g.clk.Now())
	g.send(r, TurnRequest{Messages: c.messages, MaxTokens: g.cfg.MaxTokens}, func(res Result, stopped bool) {
		g.answered(r, c, res, stopped)
	})
}

// scheduleArrivalLocked draws the time to an open loop's next arrival at
// the current target's rate, making any pending arrival stale. g.mu is held.
func (g *Generator) scheduleArrivalLocked(r *run) {
	r.arrival++
	rate := OpenLoopRate(g.target, g.cfg.SessionLength)
	if rate == 0 {
		return
	}
	seq := r.arrival
	gap := time.Duration(g.rng.ExpFloat64() / rate * float64(time.Second))
	g.afterLocked(r, gap, func() { g.arrive(r, seq) }, nil)
}

// arrive starts an open loop's arriving conversation, unless a change of
// rate made this arrival stale, and draws the next.
func (g *Generator) arrive(r *run, seq uint64) {
	g.mu.Lock()
	if r.stopped || seq != r.arrival {
		g.mu.Unlock()
		return
	}
	g.scheduleArrivalLocked(r)
	g.live++
	r.convs++
	c := g.pickLocked(false)
	g.mu.Unlock()
	g.begin(r, c)
}

// send starts one request, counting it in flight and bounding it by the
// request timeout. done gets the result, and whether the run stopped while
// the request was out (its result is then not the server's doing).
func (g *Generator) send(r *run, req TurnRequest, done func(res Result, stopped bool)) {
	t := &turn{}
	g.mu.Lock()
	if r.stopped {
		g.mu.Unlock()
		done(Result{Err: context.Canceled, Class: ErrCancelled}, true)
		return
	}
	g.inFlight++
	r.seq++
	t.seq, t.sent = r.seq, g.clk.Now()
	r.turns[t] = struct{}{}
	g.mu.Unlock()
	var once sync.Once
	finish := func(res Result) {
		once.Do(func() {
			t.mu.Lock()
			if t.timer != nil {
				t.timer.Stop()
			}
			t.mu.Unlock()
			g.mu.Lock()
			g.inFlight--
			delete(r.turns, t)
			stopped := r.stopped
			g.mu.Unlock()
			if res.Err != nil && t.timedOut.Load() {
				res.Class = ErrTimeout
				res.Err = fmt.Errorf("%w after %v: %w", errRequestTimeout, g.cfg.RequestTimeout, res.Err)
			}
			done(res, stopped)
		})
	}
	t.start(func() func(error) {
		if g.cfg.RequestTimeout > 0 {
			// The timeout runs on the generator's clock, so a virtual-time
			// run times out in virtual time.
			t.timer = g.clk.AfterFunc(g.cfg.RequestTimeout, func() {
				t.timedOut.Store(true)
				t.abort(errRequestTimeout)
			})
		}
		first := func(worker string, ttft time.Duration) {
			t.first.Store(true)
			g.window.ObserveFirstToken(worker, ttft)
		}
		return g.transport.Start(req, first, finish)
	})
}

// start runs begin with t.mu held, keeps the cancel it returns, and then
// applies an abort that came before it.
func (t *turn) start(begin func() func(error)) {
	t.mu.Lock()
	t.cancel = begin()
	early := t.early
	t.mu.Unlock()
	if early != nil {
		t.cancel(early)
	}
}

// abort cancels the turn; before the transport has started it, the turn is
// cancelled as soon as it starts.
func (t *turn) abort(cause error) {
	t.mu.Lock()
	cancel := t.cancel
	if cancel == nil && t.early == nil {
		t.early = cause
	}
	t.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

var errRequestTimeout = errors.New("request timeout")

// answered takes a conversation's answer and moves it on: to the next turn
// after the think time, or to its end.
func (g *Generator) answered(r *run, c *conversation, res Result, stopped bool) {
	if stopped {
		g.endConversation(r, c, false) // stopped by us: not the server's failure, not counted
		return
	}
	res.Turn = c.turn
	g.window.ObserveDone(res)
	g.metrics.observe(c.turn, res)
	g.log.addTurn(c.log, turnLog(c.turn, c.question, c.source, res))
	if res.Err != nil {
		// The conversation cannot go on without the answer. It holds its
		// place for the error pause before a new one takes it.
		g.log.end(c.log)
		g.mu.Lock()
		g.afterLocked(r, g.cfg.ErrorPause, func() { g.retire(r, false) }, func() { g.retire(r, false) })
		g.mu.Unlock()
		return
	}
	c.messages = append(c.messages, tokenizer.Message{Role: "assistant", Content: res.Text})
	c.turn++
	if c.turn >= c.turns {
		g.endConversation(r, c, false)
		return
	}
	next := func(question, source string) {
		c.question, c.source = question, source
		if g.cfg.MaxContext > 0 && res.ISL+res.OSL+tokenizer.Count(question)+contextMargin+g.cfg.MaxTokens > g.cfg.MaxContext {
			g.mu.Lock()
			g.full++
			g.mu.Unlock()
			g.endConversation(r, c, false)
			return
		}
		c.messages = append(c.messages, tokenizer.Message{Role: "user", Content: question})
		think := g.think(c, res)
		g.mu.Lock()
		g.afterLocked(r, think, func() { g.nextTurn(r, c) }, func() { g.endConversation(r, c, false) })
		g.mu.Unlock()
	}
	if g.cfg.User == nil || g.cfg.ToolTokens.Max > 0 {
		next(g.followUp(r.ctx, c))
		return
	}
	go func() { // the user model answers over HTTP
		q, source := g.followUp(r.ctx, c)
		if r.ctx.Err() != nil {
			g.endConversation(r, c, false)
			return
		}
		next(q, source)
	}()
}

// nextTurn sends a conversation's next question after its think time, unless
// it is surplus to the target.
func (g *Generator) nextTurn(r *run, c *conversation) {
	if g.cfg.SessionLength == 0 && g.leaveIfSurplus() {
		g.endConversation(r, c, true)
		return
	}
	g.log.ask(c.log, c.turn, c.question, c.source, g.clk.Now())
	g.send(r, TurnRequest{Messages: c.messages, MaxTokens: g.cfg.MaxTokens}, func(res Result, stopped bool) {
		g.answered(r, c, res, stopped)
	})
}

// endConversation closes a conversation; counted says leaveIfSurplus
// already counted it out of the live ones.
func (g *Generator) endConversation(r *run, c *conversation, counted bool) {
	g.log.end(c.log)
	g.retire(r, counted)
}

// retire frees an ended conversation's place and fills it.
func (g *Generator) retire(r *run, counted bool) {
	g.mu.Lock()
	if !counted {
		g.live--
	}
	r.convs--
	g.closeIfDoneLocked(r)
	g.mu.Unlock()
	g.fill(r)
}

// followUp asks the user simulator for the next question, falling back to the
// built-in generator, counted and never silently, when it fails.
func (g *Generator) followUp(ctx context.Context, c *conversation) (question, source string) {
	if g.cfg.ToolTokens.Max > 0 {
		g.mu.Lock()
		g.user.Builtin++
		g.mu.Unlock()
		return toolResult(g.cfg.ToolTokens, c.rng), "tool"
	}
	if g.cfg.User == nil {
		g.mu.Lock()
		g.user.Builtin++
		g.mu.Unlock()
		return followUp(*c.starter, c.headings, c.messages[len(c.messages)-1].Content, c.rng), "builtin"
	}
	q, err := g.cfg.User.FollowUp(ctx, *c.starter, c.messages)
	if ctx.Err() != nil {
		return "", "" // stopped: the conversation ends before its next turn
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		g.user.ModelQuestions++
		return q, "user_model"
	}
	g.user.Fallbacks++
	g.user.LastError = err.Error()
	g.metrics.fallback()
	return followUp(*c.starter, c.headings, c.messages[len(c.messages)-1].Content, c.rng), "fallback"
}

// leaveIfSurplus ends the caller's conversation if there are more live
// conversations than the target: it counts the caller out under the same lock
// as the check, so exactly the excess leaves even when many check at once.
func (g *Generator) leaveIfSurplus() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.live > g.target {
		g.live--
		return true
	}
	return false
}

// replayLead is how long before its due time each trace request's prompt is
// synthesized, in its own timer callback, which then waits for the due time
// itself: no request waits behind another's synthesis, and a dispatcher
// descheduled for a moment still has every request on time.
const replayLead = 100 * time.Millisecond

// dispatch handles trace record i at its due time less replayLead after
// start (an open loop: nothing waits for earlier answers): it schedules the
// next record's dispatch, synthesizes this one's prompt and sends it at its
// due time.
func (g *Generator) dispatch(r *run, start time.Time, i int) {
	trace := g.cfg.Trace
	origin := trace[0].Timestamp
	due := func(i int) time.Time { return start.Add(time.Duration(trace[i].Timestamp-origin) * time.Millisecond) }
	rec := &trace[i]
	g.mu.Lock()
	if i+1 < len(trace) {
		g.afterLocked(r, due(i+1).Add(-replayLead).Sub(g.clk.Now()), func() { g.dispatch(r, start, i+1) }, nil)
	}
	if r.stopped {
		g.mu.Unlock()
		return
	}
	r.convs++
	g.mu.Unlock()
	req := TurnRequest{
		Messages:  []tokenizer.Message{{Role: "user", Content: TracePrompt(*rec)}},
		MaxTokens: rec.OutputLength,
	}
	ended := func() {
		g.mu.Lock()
		r.convs--
		g.closeIfDoneLocked(r)
		g.mu.Unlock()
	}
	at := due(i)
	g.mu.Lock()
	g.afterLocked(r, at.Sub(g.clk.Now()), func() {
		lag := g.clk.Now().Sub(at)
		g.mu.Lock()
		g.traceSent++
		g.lag.Add(ms(max(lag, 0)))
		g.mu.Unlock()
		g.send(r, req, func(res Result, stopped bool) {
			if !stopped {
				res.Turn = rec.Line
				g.window.ObserveDone(res)
				g.metrics.observe(0, res)
				g.mu.Lock()
				g.traceDone++
				g.mu.Unlock()
			}
			ended()
		})
	}, ended)
	g.mu.Unlock()
}
