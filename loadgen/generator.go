// Package loadgen plays many multi-turn chat conversations at once against an
// OpenAI-compatible endpoint and measures them the way AIPerf does
// (shared/reference/metrics.md).
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// MaxConcurrency bounds the target: one process drives hundreds of
// conversations, not millions.
const MaxConcurrency = 10000

// Config sets up a Generator.
type Config struct {
	// Concurrency is the initial number of simultaneous conversations.
	Concurrency int
	// MaxTokens caps each answer.
	MaxTokens int
	// MinTurns and MaxTurns bound the turns of a conversation (uniform).
	MinTurns, MaxTurns int
	// StartRate paces new conversations, per second; 0 means unpaced.
	StartRate float64
	// Window is the length of the rolling metrics window.
	Window time.Duration
	// Seed makes the choice of starters and questions reproducible.
	Seed uint64
	// Starters are the texts conversations open with.
	Starters []Starter
}

// DefaultConfig is the seeds' workload: 3–5 turns, 1024 max tokens, a 60 s
// window, conversations started at up to 10 per second.
func DefaultConfig() Config {
	return Config{
		Concurrency: 60,
		MaxTokens:   1024,
		MinTurns:    3,
		MaxTurns:    5,
		StartRate:   10,
		Window:      60 * time.Second,
		Seed:        1,
	}
}

// Snapshot is everything the load generator knows at one moment. The
// dashboard and the sweep runner read only this.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// Running says whether load is being generated.
	Running bool `json:"running"`
	// Target is the concurrency asked for.
	Target int `json:"target"`
	// Live is the number of conversations running now.
	Live int `json:"live"`
	// InFlight is the number of requests awaiting or streaming an answer.
	InFlight int `json:"in_flight"`
	// Window holds the rolling-window metrics.
	Window Stats `json:"window"`
}

// Generator runs conversations. Its methods are safe for concurrent use.
type Generator struct {
	cfg       Config
	transport Transport
	window    *Window
	metrics   *Metrics

	mu       sync.Mutex
	target   int
	live     int
	inFlight int
	cancel   context.CancelFunc // nil when stopped
	done     chan struct{}      // closed when the current run has fully ended
	wake     chan struct{}
	rng      *rand.Rand
}

// New returns a stopped generator. metrics may be nil.
func New(t Transport, cfg Config, metrics *Metrics) (*Generator, error) {
	switch {
	case len(cfg.Starters) == 0:
		return nil, errors.New("loadgen: no conversation starters")
	case cfg.MinTurns < 1 || cfg.MaxTurns < cfg.MinTurns:
		return nil, fmt.Errorf("loadgen: turns %d..%d: need 1 <= min <= max", cfg.MinTurns, cfg.MaxTurns)
	case cfg.MaxTokens < 1:
		return nil, fmt.Errorf("loadgen: max tokens %d: need at least 1", cfg.MaxTokens)
	case cfg.StartRate < 0 || math.IsNaN(cfg.StartRate):
		return nil, fmt.Errorf("loadgen: start rate %v: need 0 (unpaced) or more", cfg.StartRate)
	case cfg.Window < windowBuckets*time.Millisecond:
		return nil, fmt.Errorf("loadgen: window %v is too short", cfg.Window)
	}
	if err := checkConcurrency(cfg.Concurrency); err != nil {
		return nil, err
	}
	return &Generator{
		cfg:       cfg,
		transport: t,
		window:    NewWindow(cfg.Window, time.Now),
		metrics:   metrics,
		target:    cfg.Concurrency,
		wake:      make(chan struct{}, 1),
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
	}, nil
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
	stats := g.window.Stats()
	g.mu.Lock()
	defer g.mu.Unlock()
	return Snapshot{
		Time:     time.Now(),
		Running:  g.cancel != nil,
		Target:   g.target,
		Live:     g.live,
		InFlight: g.inFlight,
		Window:   stats,
	}
}

func (g *Generator) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// supervise keeps the number of live conversations at the target until ctx
// ends, then waits for every conversation to return and closes done.
func (g *Generator) supervise(ctx context.Context, done chan struct{}) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(done)
	}()
	limit := rate.Inf
	if g.cfg.StartRate > 0 {
		limit = rate.Limit(g.cfg.StartRate)
	}
	pace := rate.NewLimiter(limit, 1)
	for {
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
		if err := pace.Wait(ctx); err != nil {
			return
		}
		g.mu.Lock()
		if g.live >= g.target { // lowered while we waited
			g.mu.Unlock()
			continue
		}
		g.live++
		starter := g.cfg.Starters[g.rng.IntN(len(g.cfg.Starters))]
		turns := g.cfg.MinTurns + g.rng.IntN(g.cfg.MaxTurns-g.cfg.MinTurns+1)
		rng := rand.New(rand.NewPCG(g.rng.Uint64(), g.rng.Uint64()))
		g.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.converse(ctx, newConversation(starter, turns, rng))
		}()
	}
}

// converse plays one conversation to its end, or until it is surplus to the
// target at a turn boundary, or until ctx ends.
func (g *Generator) converse(ctx context.Context, c *conversation) {
	counted := false // whether leaveIfSurplus already counted us out
	defer func() {
		if !counted {
			g.mu.Lock()
			g.live--
			g.mu.Unlock()
		}
		g.poke()
	}()
	for turn := range c.turns {
		if turn > 0 && g.leaveIfSurplus() {
			counted = true
			return
		}
		g.mu.Lock()
		g.inFlight++
		g.mu.Unlock()
		r := g.transport.Chat(ctx, TurnRequest{Messages: c.messages, MaxTokens: g.cfg.MaxTokens}, g.window.ObserveFirstToken)
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
		if ctx.Err() != nil {
			return // stopped by us: not the server's failure, not counted
		}
		g.window.ObserveDone(r)
		g.metrics.observe(turn, r)
		if r.Err != nil {
			return // the conversation cannot go on without the answer
		}
		c.answered(r.Text, turn+1 < c.turns)
	}
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
