// Package loadgen plays many multi-turn chat conversations at once against an
// OpenAI-compatible endpoint, or replays a Mooncake trace, and measures them
// the way AIPerf does (shared/reference/metrics.md).
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
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
	// ThinkTime is the pause between a turn's answer and the next question.
	ThinkTime time.Duration
	// StartRate paces new conversations, per second; 0 means unpaced.
	StartRate float64
	// RequestTimeout bounds each request, send to last byte; 0 means none.
	RequestTimeout time.Duration
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

// DefaultConfig is the seeds' workload: 3–5 turns, 1024 max tokens, a 60 s
// window, conversations started at up to 10 per second.
func DefaultConfig() Config {
	return Config{
		Concurrency:    60,
		MaxTokens:      1024,
		Turns:          UniformTurns(3, 5),
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
type Generator struct {
	cfg       Config
	clk       clock.Clock
	transport Transport
	window    *Window
	metrics   *Metrics
	log       convLog

	// wakeups counts supervisor loop passes, so a test can tell an idle
	// supervisor from a spinning one.
	wakeups atomic.Int64

	mu        sync.Mutex
	target    int
	live      int
	inFlight  int
	cancel    context.CancelFunc // nil when stopped
	done      chan struct{}      // closed when the current run has fully ended
	wake      chan struct{}
	rng       *rand.Rand
	user      UserStats
	traceSent int
	traceDone int
	lag       *ddsketch.DDSketchWithExactSummaryStatistics
}

// New returns a stopped generator. metrics may be nil.
func New(t Transport, cfg Config, metrics *Metrics) (*Generator, error) {
	switch {
	case len(cfg.Starters) == 0 && len(cfg.Trace) == 0:
		return nil, errors.New("loadgen: no conversation starters")
	case cfg.MaxTokens < 1:
		return nil, fmt.Errorf("loadgen: max tokens %d: need at least 1", cfg.MaxTokens)
	case cfg.StartRate < 0 || math.IsNaN(cfg.StartRate) || math.IsInf(cfg.StartRate, 0):
		return nil, fmt.Errorf("loadgen: start rate %v: need 0 (unpaced) or a finite rate", cfg.StartRate)
	case cfg.Window < windowBuckets*time.Millisecond:
		return nil, fmt.Errorf("loadgen: window %v is too short", cfg.Window)
	case cfg.ThinkTime < 0 || cfg.RequestTimeout < 0:
		return nil, fmt.Errorf("loadgen: think time %v and request timeout %v must not be negative", cfg.ThinkTime, cfg.RequestTimeout)
	case cfg.SLO.TTFT <= 0 || cfg.SLO.TPOT <= 0:
		return nil, fmt.Errorf("loadgen: SLO TTFT %v and TPOT %v must be positive", cfg.SLO.TTFT, cfg.SLO.TPOT)
	}
	if len(cfg.Trace) == 0 {
		if err := cfg.Turns.valid(); err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
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
	g := &Generator{
		cfg:       cfg,
		clk:       clk,
		transport: t,
		window:    NewWindow(cfg.Window, cfg.SLO, clk.Now),
		metrics:   metrics,
		target:    cfg.Concurrency,
		wake:      make(chan struct{}, 1),
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
	defer g.mu.Unlock()
	if g.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.done = make(chan struct{})
	if len(g.cfg.Trace) > 0 {
		g.traceSent, g.traceDone = 0, 0
		g.lag = newSketch()
		go g.replay(ctx, g.done)
		return
	}
	go g.supervise(ctx, g.done)
}

// Stop cancels every conversation and request in flight, and returns once
// none is left, so a Start right after never overlaps the old run.
func (g *Generator) Stop() {
	g.mu.Lock()
	cancel, done := g.cancel, g.done
	g.cancel = nil
	g.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
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
	g.target = n
	g.mu.Unlock()
	g.poke()
	return nil
}

// Reset empties the rolling window.
func (g *Generator) Reset() { g.window.Reset() }

// Snapshot returns the current state and window metrics.
func (g *Generator) Snapshot() Snapshot {
	total, workers := g.window.Summary()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Snapshot{
		Time:     g.clk.Now(),
		Running:  g.cancel != nil,
		Workload: "conversations",
		Target:   g.target,
		Live:     g.live,
		InFlight: g.inFlight,
		SLO:      g.cfg.SLO,
		Window:   total,
		Workers:  workers,
		User:     g.user,
	}
	if len(g.cfg.Trace) > 0 {
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

func (g *Generator) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// sleep waits d on the generator's clock; it reports false if ctx ended first.
func (g *Generator) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	ch := make(chan struct{})
	t := g.clk.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// supervise keeps the number of live conversations at the target until ctx
// ends, then waits for every conversation to return and closes done. It
// blocks while there is nothing to do: it wakes only when the target changes,
// a conversation ends, or the pacing allows the next start.
func (g *Generator) supervise(ctx context.Context, done chan struct{}) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(done)
	}()
	var interval time.Duration // between starts; 0 is unpaced
	if g.cfg.StartRate > 0 {
		interval = time.Duration(float64(time.Second) / g.cfg.StartRate)
	}
	var next time.Time // the earliest time the next start is allowed
	for {
		g.wakeups.Add(1)
		g.mu.Lock()
		short := g.target - g.live
		g.mu.Unlock()
		if short <= 0 {
			select {
			case <-ctx.Done():
				return
			case <-g.wake:
				continue
			}
		}
		if interval > 0 {
			now := g.clk.Now()
			if now.Before(next) {
				t := g.clk.AfterFunc(next.Sub(now), g.poke)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-g.wake:
					t.Stop()
					continue
				}
			}
			next = now.Add(interval)
		} else if ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		if g.live >= g.target { // lowered while we waited
			g.mu.Unlock()
			continue
		}
		g.live++
		s := &g.cfg.Starters[g.rng.IntN(len(g.cfg.Starters))]
		turns := g.cfg.Turns.sample(g.rng)
		rng := rand.New(rand.NewPCG(g.rng.Uint64(), g.rng.Uint64()))
		g.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.converse(ctx, newConversation(s, turns, rng))
		}()
	}
}

// send makes one request, counting it in flight and bounding it by the
// request timeout.
func (g *Generator) send(ctx context.Context, req TurnRequest) Result {
	g.mu.Lock()
	g.inFlight++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	if g.cfg.RequestTimeout <= 0 {
		return g.transport.Chat(ctx, req, g.window.ObserveFirstToken)
	}
	// The timeout runs on the generator's clock, not context.WithTimeout's
	// real one, so a virtual-time run times out in virtual time.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := g.clk.AfterFunc(g.cfg.RequestTimeout, func() { cancel(errRequestTimeout) })
	defer t.Stop()
	r := g.transport.Chat(ctx, req, g.window.ObserveFirstToken)
	if r.Err != nil && errors.Is(context.Cause(ctx), errRequestTimeout) {
		r.Class = ErrTimeout
		r.Err = fmt.Errorf("%w after %v: %w", errRequestTimeout, g.cfg.RequestTimeout, r.Err)
	}
	return r
}

var errRequestTimeout = errors.New("request timeout")

// converse plays one conversation to its end, or until it is surplus to the
// target at a turn boundary, or until ctx ends.
func (g *Generator) converse(ctx context.Context, c *conversation) {
	counted := false // whether leaveIfSurplus already counted us out
	c.log = g.log.open(c.starter, c.turns, g.clk.Now())
	defer func() {
		g.log.end(c.log)
		if !counted {
			g.mu.Lock()
			g.live--
			g.mu.Unlock()
		}
		g.poke()
	}()
	question, source := openingQuestion(c.starter), "opening"
	for turn := range c.turns {
		if turn > 0 {
			if !g.sleep(ctx, g.cfg.ThinkTime) {
				return
			}
			if g.leaveIfSurplus() {
				counted = true
				return
			}
		}
		r := g.send(ctx, TurnRequest{Messages: c.messages, MaxTokens: g.cfg.MaxTokens})
		if ctx.Err() != nil {
			return // stopped by us: not the server's failure, not counted
		}
		r.Turn = turn
		g.window.ObserveDone(r)
		g.metrics.observe(turn, r)
		g.log.addTurn(c.log, turnLog(turn, question, source, r))
		if r.Err != nil {
			return // the conversation cannot go on without the answer
		}
		c.messages = append(c.messages, tokenizer.Message{Role: "assistant", Content: r.Text})
		if turn+1 < c.turns {
			question, source = g.followUp(ctx, c)
			c.messages = append(c.messages, tokenizer.Message{Role: "user", Content: question})
		}
	}
}

// followUp asks the user simulator for the next question, falling back to the
// built-in generator, counted and never silently, when it fails.
func (g *Generator) followUp(ctx context.Context, c *conversation) (question, source string) {
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

// replayLead is how long before its due time each trace request is handed
// to its own goroutine, which synthesizes the prompt and then waits for the
// due time itself: no request waits behind another's wake-up, and a
// dispatcher descheduled for a moment still has every request on time.
const replayLead = 100 * time.Millisecond

// replay sends each trace record at its timestamp after the run's start (an
// open loop: nothing waits for earlier answers), then waits for the answers
// and closes done.
func (g *Generator) replay(ctx context.Context, done chan struct{}) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(done)
	}()
	trace := g.cfg.Trace
	origin := trace[0].Timestamp
	start := g.clk.Now().Add(replayLead)
	for i := range trace {
		rec := &trace[i]
		due := start.Add(time.Duration(rec.Timestamp-origin) * time.Millisecond)
		if !g.sleep(ctx, due.Add(-replayLead).Sub(g.clk.Now())) {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := TurnRequest{
				Messages:  []tokenizer.Message{{Role: "user", Content: TracePrompt(*rec)}},
				MaxTokens: rec.OutputLength,
			}
			if !g.sleep(ctx, due.Sub(g.clk.Now())) {
				return
			}
			lag := g.clk.Now().Sub(due)
			g.mu.Lock()
			g.traceSent++
			g.lag.Add(ms(max(lag, 0)))
			g.mu.Unlock()
			r := g.send(ctx, req)
			if ctx.Err() != nil {
				return
			}
			r.Turn = rec.Line
			g.window.ObserveDone(r)
			g.metrics.observe(0, r)
			g.mu.Lock()
			g.traceDone++
			g.mu.Unlock()
		}()
	}
}
