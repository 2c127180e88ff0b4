// Package simulate runs kvlens's whole pipeline in virtual time: the load
// generator's conversations, the router's decisions, bookings and KV index,
// and N simulated engines, driven by one discrete-event loop (package des)
// with no HTTP, no goroutines and no wall-clock reads. A simulated hour
// takes seconds, and a seed makes a run reproducible byte for byte.
//
// # Design
//
// Nothing here re-implements the pipeline. The generator is loadgen's,
// the router is router's (Router.Decide, Booking.FirstToken and Release,
// Index.Apply), the engines are sim's, each stepped by a sim.Runner; only
// the clock (a des.Loop) and the transport (Transport, in place of HTTP and
// the router proxy) differ from real-time mode.
//
// This works because those cores are event-driven: loadgen's conversations
// advance by callbacks (a transport's done, timers on their clock) rather
// than goroutines blocked on channels, and sim.Runner steps its engine with
// AfterFunc. The alternative, a cooperative scheduler that runs blocking
// goroutines one at a time and advances time when all are parked, would
// need every blocking point (channel selects, context cancellation,
// WaitGroups) routed through the scheduler to notice that they park, and
// would still hand control between goroutines on every event. An event
// loop needs neither, and its order (due time, then scheduling order) is
// deterministic by construction.
package simulate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tokenizer"
)

// Config describes a simulated deployment and its load.
type Config struct {
	// Profile is every engine's profile.
	Profile sim.Profile
	// Workers is the number of simulated engines.
	Workers int
	// Policy is the router's first policy.
	Policy string
	// Router configures the router; its Clock and Registerer are ignored,
	// and its BlockSize is the profile's.
	Router router.Config
	// Load configures the load generator; its Clock and Seed are ignored.
	Load loadgen.Config
	// Seed seeds the generator (Seed), the engines (Seed+i for worker i)
	// and the router's random choices.
	Seed uint64
}

// Pipeline is a deployment in virtual time: a generator in front of a router
// in front of simulated engines, all on one des.Loop. Drive it from one
// goroutine: call its methods, then run the loop (Loop.Run, or a
// baselines.Sweep whose Clock is the loop).
type Pipeline struct {
	// Loop is the virtual clock and the event loop.
	Loop *des.Loop
	// Router is the router.
	Router *router.Router
	// Gen is the load generator.
	Gen *loadgen.Generator
	// Tokens tokenizes the generator's prompts.
	Tokens *router.TokenCache

	runners map[string]*sim.Runner
	names   []string
	seed    uint64
}

// New builds a stopped pipeline whose time starts at des.Epoch.
func New(cfg Config) (*Pipeline, error) {
	if err := cfg.Profile.Validate(); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	if err := sim.CheckFleet(cfg.Workers, cfg.Profile); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	loop := des.New(time.Time{})
	p, err := build(cfg, loop)
	if err != nil {
		return nil, err
	}
	p.Loop = loop
	return p, nil
}

// build assembles a pipeline on clk: New's event loop, or in a test the
// wall clock, on which the demo's warm-up runs the same Transport.
func build(cfg Config, clk clock.Clock) (*Pipeline, error) {
	p := &Pipeline{runners: map[string]*sim.Runner{}, seed: cfg.Seed}
	var workers []*router.Worker
	var engines []*sim.Engine
	for i := range cfg.Workers {
		name := fmt.Sprintf("sim-%d", i)
		eng, err := sim.NewEngine(cfg.Profile, sim.Options{Seed: cfg.Seed + uint64(i)})
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		p.names = append(p.names, name)
		workers = append(workers, &router.Worker{
			Name: name, URL: &url.URL{Scheme: "sim", Host: name},
			Events: "inproc://" + name, Capacity: cfg.Profile.MaxBatchSize,
		})
		engines = append(engines, eng)
	}
	policy, err := p.policy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	rcfg := cfg.Router
	rcfg.Clock, rcfg.Registerer = clk, nil
	// Every worker here is simulated from the profile, so the profile's
	// blocks are the ones the index must hold: of another size, the index
	// drops every stored block as invalid and kv routes blind.
	rcfg.BlockSize = cfg.Profile.BlockSize
	p.Router = router.NewRouter(router.NewPool(workers), policy, rcfg)
	// Each runner publishes its steps' KV events straight into the index,
	// the path the ZMQ feed takes in real time.
	for i, name := range p.names {
		p.runners[name] = sim.NewRunner(engines[i], clk, p.sink(name))
	}
	load := cfg.Load
	load.Clock, load.Seed = clk, cfg.Seed
	if len(load.Starters) == 0 {
		load.Starters = loadgen.BuiltinStarters()
	}
	// The pipeline's conversations never reach the live proxy: they are
	// tokenized through a cache of its own, which goes with the pipeline
	// instead of filling the proxy's (about 50 MB per dashboard simulation).
	p.Tokens = router.NewTokenCache(0)
	tr := NewTransport(clk, p.Router, p.runners)
	tr.tokens = p.Tokens.Chat
	p.Gen, err = loadgen.NewAsync(tr, load, nil)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	return p, nil
}

func (p *Pipeline) sink(worker string) sim.EventSink {
	idx := p.Router.Index()
	return func(b kvevents.Batch) {
		for _, ev := range b.Events {
			idx.Apply(worker, ev)
		}
	}
}

// policy builds a routing policy seeded from the run's seed.
func (p *Pipeline) policy(name string) (router.Policy, error) {
	k := router.DefaultKnobs()
	k.Seed = p.seed ^ 0x6a09e667f3bcc909
	if k.Seed == 0 {
		k.Seed = 1
	}
	return router.NewPolicyWith(name, k)
}

// SetPolicy switches the router's policy.
func (p *Pipeline) SetPolicy(name string) error {
	pol, err := p.policy(name)
	if err != nil {
		return err
	}
	p.Router.SetPolicy(pol)
	return nil
}

// Engines returns each worker's engine counters, in worker order.
func (p *Pipeline) Engines() []sim.Stats {
	var out []sim.Stats
	for _, n := range p.names {
		out = append(out, p.runners[n].Stats())
	}
	return out
}

// Close stops the load and the engines.
func (p *Pipeline) Close() {
	p.Gen.Stop()
	for _, r := range p.runners {
		r.Close()
	}
}

// Transport is loadgen's transport without HTTP: it does what the router
// proxy and a worker's HTTP server do for one chat turn, in process. It
// tokenizes the messages as the proxy does with the embedded tokenizer
// (which the simulated workers share), asks Router.Decide, submits to the
// chosen engine's runner, marks the booking's first token and releases it
// at the end, and reports TTFT, chunk gaps, text and usage (prompt, cached
// and completion tokens) as the HTTP client would read them from the
// worker's SSE stream, one chunk per engine step.
//
// On a des.Loop it is the virtual-time pipeline's transport. On a real (or
// warped) clock it is safe for concurrent use: the demo's warm-up sends its
// turns through it, to play its minutes ahead without two HTTP hops per
// token (demo.lane.startLoad).
type Transport struct {
	clk     clock.Clock
	router  *router.Router
	runners map[string]*sim.Runner
	// tokens tokenizes a turn's messages: router.ChatTokens, the proxy's
	// cache, unless a Pipeline gives its own.
	tokens func([]tokenizer.Message) []uint32
}

// NewTransport returns a transport to the runners, by worker name, through
// rt, on clk: the clock the runners and the router run on.
func NewTransport(clk clock.Clock, rt *router.Router, runners map[string]*sim.Runner) *Transport {
	return &Transport{clk: clk, router: rt, runners: runners, tokens: router.ChatTokens}
}

// Start implements loadgen.AsyncTransport. The request reaches the router
// in an event of its own, so nothing is called back before Start returns.
func (t *Transport) Start(req loadgen.TurnRequest, onFirst func(string, time.Duration), done func(loadgen.Result)) func(error) {
	c := &call{t: t, req: req, onFirst: onFirst, done: done}
	c.res.Start = t.clk.Now()
	t.clk.AfterFunc(0, c.begin)
	return c.cancel
}

// call is one turn in flight. Its callbacks (begin, deliver, cancel) may
// run on different goroutines on a real clock: mu orders them. notify,
// which the runner calls under its own lock, takes no lock of the call's,
// so that deliver may read the stream (the runner's lock) under mu.
type call struct {
	t       *Transport
	req     loadgen.TurnRequest
	onFirst func(string, time.Duration)
	done    func(loadgen.Result)

	// queued says a delivery event is scheduled.
	queued atomic.Bool

	mu       sync.Mutex
	booking  *router.Booking
	runner   *sim.Runner
	stream   *sim.Stream
	finished bool
	res      loadgen.Result
	text     strings.Builder
	last     time.Time
	toks     []sim.Token
}

func (c *call) begin() {
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	tokens := c.t.tokens(c.req.Messages)
	b, err := c.t.router.Decide(&router.Request{Path: "/v1/chat/completions", TokenIDs: tokens, Messages: c.req.Messages}, nil)
	if err != nil {
		// The proxy answers 503 when it sheds or has no worker left.
		c.failLocked(fmt.Errorf("HTTP 503: router: %w", err), loadgen.ErrHTTP503)
		return
	}
	c.booking = b
	c.res.Worker = b.Worker.Name
	c.runner = c.t.runners[b.Worker.Name]
	st, err := c.runner.SubmitNotify(sim.Request{Prompt: tokens, MaxTokens: c.req.MaxTokens}, c.notify)
	if err != nil {
		b.Release()
		c.failLocked(fmt.Errorf("HTTP 400: %s", strings.TrimPrefix(err.Error(), "sim: ")), loadgen.ErrHTTP4xx)
		return
	}
	c.stream = st
	c.mu.Unlock()
}

// notify is called by the runner, under its lock, when tokens arrive: the
// delivery runs as the next event at the same time.
func (c *call) notify() {
	if c.queued.CompareAndSwap(false, true) {
		c.t.clk.AfterFunc(0, c.deliver)
	}
}

// deliver reads what the step delivered, as the client reads one SSE chunk.
func (c *call) deliver() {
	c.queued.Store(false)
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	now := c.t.clk.Now()
	var fin *sim.Finished
	var first func()
	c.toks, fin = c.stream.Take(c.toks[:0])
	if len(c.toks) > 0 {
		start := c.text.Len()
		for _, tk := range c.toks {
			c.text.WriteString(sim.PieceText(tk.Token))
		}
		if start == 0 && c.text.Len() > 0 {
			c.res.TTFT = now.Sub(c.res.Start)
			c.res.FirstChunkTokens = tokenizer.Count(c.text.String())
			c.booking.FirstToken()
			if c.onFirst != nil {
				worker, ttft := c.res.Worker, c.res.TTFT
				first = func() { c.onFirst(worker, ttft) }
			}
		}
		if !c.last.IsZero() {
			c.res.ChunkGaps = append(c.res.ChunkGaps, now.Sub(c.last))
		}
		c.last = now
	}
	if fin == nil {
		c.mu.Unlock()
		if first != nil {
			first()
		}
		return
	}
	c.finished = true
	c.booking.Release()
	c.res.Text = c.text.String()
	c.res.E2E = c.last.Sub(c.res.Start)
	c.res.ISL, c.res.CachedTokens, c.res.OSL = fin.PromptTokens, fin.CachedTokens, fin.CompletionTokens
	c.res.OracleTokens, c.res.HasOracle = c.booking.OracleTokens(), true
	res := c.res
	c.mu.Unlock()
	if first != nil {
		first()
	}
	c.done(res)
}

// failLocked ends the turn with err and unlocks c.mu before it reports,
// so that the generator may cancel or start turns from done.
func (c *call) failLocked(err error, class loadgen.ErrorClass) {
	c.finished = true
	c.res.Err, c.res.Class = err, class
	res := c.res
	c.mu.Unlock()
	c.done(res)
}

// cancel abandons the turn, as a client that hangs up: the engine drops the
// request and the booking is freed.
func (c *call) cancel(cause error) {
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	if c.stream != nil {
		c.runner.Cancel(c.stream.ID)
		c.booking.Release()
	}
	if cause == nil {
		cause = errors.New("cancelled")
	}
	c.failLocked(cause, loadgen.ErrCancelled)
}
