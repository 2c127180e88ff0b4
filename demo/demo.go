// Package demo assembles the running kvlens demo: a fleet of simulated
// workers (or real ones), the router proxy, the load generator and the
// dashboard, all behind one HTTP listener.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/dynamo"
	"github.com/kvlens/kvlens/internal/connlimit"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/recording"
	"github.com/kvlens/kvlens/reqbody"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/store"
	"github.com/kvlens/kvlens/tokenizer"
	"github.com/kvlens/kvlens/web"
)

// Config is everything `kvlens serve` can be told.
type Config struct {
	// Addr is the dashboard's listen address, such as :8080.
	Addr string
	// MaxConns is how many connections the dashboard's listener holds open
	// at once (its /v1 and the load generator's requests included); past
	// it, new ones wait in the kernel's accept queue. 0 means
	// connlimit.Default(1), from the process's descriptor limit.
	MaxConns int
	// SimWorkers is how many simulated workers to run when Workers is empty.
	SimWorkers int
	// SimProfile is the simulated workers' engine profile.
	SimProfile sim.Profile
	// SimPorts pins the simulated workers' HTTP and KV-event ports; the
	// zero value lets the system pick free ones.
	SimPorts sim.PortPlan
	// Workers are real workers' base URLs; empty means run the simulated fleet.
	Workers []string
	// Target is the load generator's OpenAI base URL; empty means this
	// process's own router proxy. With a target and no Workers, kvlens runs
	// no workers of its own: it measures the target.
	Target string
	// Tokenizer is "auto" or "" (embedded for the simulated fleet; for real
	// workers, the first of AutoFiles and the embedded tokenizer that
	// matches every worker's /tokenize on a sample chat, else worker),
	// "embedded" (kvlens's own, which the simulated workers share),
	// "worker" (each request tokenized by a worker's /tokenize), or
	// "files" (TokenizerFiles).
	Tokenizer string
	// TokenizerFiles is the model's own tokenizer and chat template
	// (tokenizer.LoadFiles), for Tokenizer "files".
	TokenizerFiles *tokenizer.Engine
	// AutoFiles is the model's own tokenizer and chat template that auto
	// tries first; nil tries none.
	AutoFiles *tokenizer.Engine
	// FrontendMetrics is a Dynamo frontend's /metrics URL to read its KV hit
	// rate and queueing from, when Dynamo routes; empty reads none.
	FrontendMetrics string
	// Model is the model name requests ask for. Against real workers or
	// --target, Start checks it against what they serve (ChooseModel) and,
	// unless ModelGiven, takes the model they serve.
	Model      string
	ModelGiven bool
	// Policy is the single view's initial routing policy.
	Policy string
	// AB is the A/B pair, lane A's policy then lane B's. With the simulated
	// fleet it runs two identical fleets side by side, each with its own
	// router and load generator; with real workers, which cannot be split,
	// the two policies take turns of ABTurn on the one fleet. Nil is the
	// single view (Policy). With Target, the load bypasses kvlens's router,
	// and AB is ignored.
	AB []string
	// ABTurn is each policy's turn when AB alternates on real workers; 0
	// means web.DefaultTurn.
	ABTurn time.Duration
	// Router configures the router: block size, admission, busy threshold.
	// Over the simulated fleet the block size is SimProfile's.
	Router router.Config
	// MaxBatchSize is each worker's batch capacity unless its spec sets one;
	// 0 means what each worker reports, else router.DefaultCapacity.
	MaxBatchSize int
	// NoStart leaves the load stopped until someone presses Start.
	NoStart bool
	// Load configures the load generator.
	Load loadgen.Config
	// Dashboard configures the page: slider scale, SLOs, operator token and
	// public URL.
	Dashboard web.Options
	// Record keeps the session in the store (DB), for replay and export.
	Record bool
	// RecordingRetention deletes recordings older than this at start; 0
	// keeps them all.
	RecordingRetention time.Duration
	// DB is the store's path, for the baselines; empty means the built-in
	// sets only. A store that fails to open costs a warning, not the demo.
	DB string
	// Baseline names the stored set the dashboard compares with; empty
	// means the seeds' 6-sweep average.
	Baseline string
	// AllowHosts are names the dashboard answers to besides this machine's
	// own and the public URL's host (--allow-host), such as an ingress's.
	AllowHosts []string
	// Warm is how much traffic the simulated fleet plays ahead of the wall
	// clock before its figures show (--warm), at WarmSpeed times real
	// time, so that the first figures a visitor sees are steady rather
	// than the cold start; 0 plays none. Real workers never warp, and
	// without load (NoStart) there is nothing to play.
	Warm      time.Duration
	WarmSpeed float64
	// Stdout takes the lines that say which tokenizer the router uses, at
	// start and when auto switches; nil means os.Stdout.
	Stdout io.Writer
}

// DefaultWarm and DefaultWarmSpeed are serve's --warm and --warm-speed.
// After 2 min of simulated traffic the windows at 60 conversations hold
// steady figures (docs/dashboard.md, "Warm start"); at 6x, its turns in
// process, the default A/B demo takes about a third of a core for 20 s.
const (
	DefaultWarm      = 2 * time.Minute
	DefaultWarmSpeed = 6
)

// DefaultConfig is what `kvlens` with no flags runs: round-robin against
// kv, each on its own 3 simulated H200 workers, 60 conversations, the
// seeds' SLOs; only its warm-up is serve's to add (DefaultWarm), so that
// tests and sweeps start at once.
func DefaultConfig() Config {
	prof := sim.MustProfile(sim.DefaultProfile)
	load := loadgen.DefaultConfig()
	// A conversation ends before it would overflow the simulated model's
	// context, as serve, sweep and bench routing set it for this fleet.
	load.MaxContext = prof.MaxModelLen
	return Config{
		Addr:       ":8080",
		SimWorkers: 3,
		SimProfile: prof,
		Model:      sim.DefaultModel,
		Policy:     "round_robin",
		AB:         []string{"round_robin", "kv"},
		Router: router.Config{
			BlockSize: router.DefaultBlockSize, Admission: router.AdmitQueue, BusyThreshold: 1,
		},
		Load: load,
		Dashboard: web.Options{
			SliderMin: 60, SliderMax: 180, SliderStep: 20,
			SLOTTFT: 600 * time.Millisecond, SLOTPOT: 60 * time.Millisecond,
			Viewers: web.HubLimits{MaxViewers: web.DefaultMaxViewers, MaxPerAddress: web.DefaultMaxPerAddress},
		},
	}
}

// Demo is a running kvlens.
type Demo struct {
	// URL is the dashboard's address for people, such as http://localhost:8080.
	URL string
	// Gen is the (first lane's) load generator.
	Gen *loadgen.Generator
	// Proxy is the (first lane's) router: /v1 and the admin API reach it.
	Proxy *router.Proxy
	// WorkerURLs are the (first lane's) workers' base URLs.
	WorkerURLs []string
	// Target is where the load goes: the --target base URL, or empty for
	// this process's own router.
	Target string
	// Model is the model the load asks for, as ChooseModel settled it.
	Model string
	// Web is the dashboard.
	Web *web.Server
	// Metrics is the registry /metrics serves.
	Metrics *prometheus.Registry
	// Recording is the id of this session's recording in the store; 0 when
	// the session is not recorded.
	Recording int64
	// PublicURL is the address visitors' phones open, shown as the QR code;
	// "" when none is known.
	PublicURL string
	// Store says, in one phrase for the startup lines, which store holds the
	// baselines and recordings, what its first start imported, and which
	// set the dashboard compares with.
	Store string

	db  *store.DB // open while recording
	rec *recording.Recorder
	sim *simulator // "simulate this curve"; nil for real workers

	// lanes are the fleets: one, or A and B side by side.
	lanes []*lane
	// turns says, for the startup lines, that the pair takes turns on one
	// fleet; "" when it does not.
	turns string
	// warm says, for the startup lines, that the fleets warm up; "" when
	// they do not.
	warm    string
	fleet   *sim.Fleet // the first lane's simulated workers; nil for real ones
	scraper *scraper   // real workers' /metrics; nil for the simulated fleet
	srv     *http.Server
	ln      *connlimit.Listener // the dashboard's, capped at Config.MaxConns
	conns   conns
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start brings the whole demo up and returns once it is serving.
func Start(cfg Config) (*Demo, error) {
	if _, err := cfg.Dashboard.ParseConcurrency(fmt.Sprint(cfg.Load.Concurrency)); err != nil {
		return nil, fmt.Errorf("initial %w", err)
	}
	if err := cfg.CheckTour(); err != nil {
		return nil, err
	}
	simulated := len(cfg.Workers) == 0 && cfg.Target == ""
	pair := cfg.AB
	if cfg.Target != "" {
		pair = nil // the load bypasses kvlens's router: nothing to compare
	}
	if len(pair) != 0 && len(pair) != 2 {
		return nil, fmt.Errorf("--ab: want two policies, lane A's and lane B's, got %d", len(pair))
	}
	// Two lanes side by side need two fleets: only the simulated one splits.
	policies := []string{cfg.Policy}
	switch {
	case len(pair) == 2 && simulated:
		policies = pair
	case len(pair) == 2:
		policies = pair[:1] // real workers: the pair takes turns, A first
	}
	var routing []router.Policy
	for _, name := range policies {
		p, err := router.NewPolicy(name)
		if err != nil {
			return nil, err
		}
		routing = append(routing, p)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("address %s is already in use: another program (or another kvlens) is listening there; choose another with --addr, for example --addr %s", cfg.Addr, nextAddr(cfg.Addr))
		}
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = connlimit.Default(1)
	}
	d := &Demo{URL: "http://" + humanAddr(ln.Addr()), ln: connlimit.Limit(ln, cfg.MaxConns)}
	fail := func(err error) (*Demo, error) {
		d.ln.Close()
		for _, l := range d.lanes {
			if l.fleet != nil {
				l.fleet.Close(context.Background())
			}
		}
		return nil, err
	}

	reg := prometheus.NewRegistry()
	d.Metrics = reg
	ab := len(routing) > 1
	d.Target = cfg.Target
	kind := "real"
	// A warm-up runs each simulated lane's workers, router and load on
	// one warp clock; the feeds and health checks stay on the wall clock.
	var warp *clock.Warp
	var watch *warmWatch      // the warm-up's punctuality
	var laneClock clock.Clock // nil: the wall clock
	if simulated && cfg.Warm > 0 && !cfg.NoStart {
		warp = clock.NewWarp(clock.Real, cfg.Warm, cfg.WarmSpeed)
		laneClock = warp
		d.warm = fmt.Sprintf("warming up: the fleets play %s of traffic ahead at %g× real time; figures show in %s (--warm 0 for none)",
			cfg.Warm, warp.Speed(), warp.Left().Round(time.Second))
	}
	for i, policy := range routing {
		l := &lane{id: string(rune('a' + i)), first: i * cfg.SimWorkers, clk: laneClock}
		d.lanes = append(d.lanes, l)
		l.workerURLs = cfg.Workers
		if simulated {
			// Pinned ports are lane A's; lane B takes free ones.
			ports := cfg.SimPorts
			if i > 0 {
				ports = sim.PortPlan{}
			}
			if err := l.startFleet(cfg, ports); err != nil {
				return fail(err)
			}
			kind = "simulated H200"
		}
		if err := l.startRouter(cfg, policy, laneRegisterer(reg, l.id, ab)); err != nil {
			return fail(err)
		}
	}
	first := d.lanes[0]
	d.Proxy, d.WorkerURLs, d.fleet = first.proxy, first.workerURLs, first.fleet
	pool := first.pool
	if !simulated {
		// Before the tokenizer's probe and the load, which name the model.
		out := cfg.Stdout
		if out == nil {
			out = os.Stdout
		}
		ctx, cancel := context.WithTimeout(context.Background(), modelAskTimeout)
		for _, line := range ChooseModel(ctx, &cfg, cfg.ModelGiven) {
			fmt.Fprintln(out, "kvlens: "+line)
		}
		cancel()
	}
	d.Model = cfg.Model
	if err := d.setTokenizer(cfg, pool); err != nil {
		return fail(err)
	}

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	load := cfg.Load
	load.SLO = loadgen.SLO{TTFT: cfg.Dashboard.SLOTTFT, TPOT: cfg.Dashboard.SLOTPOT}
	if len(load.Starters) == 0 {
		load.Starters = loadgen.BuiltinStarters()
	}
	// A warm-up's turns go in process when the router tokenizes with the
	// embedded tokenizer, which the simulated workers share.
	inProcess := cfg.Target == "" && (cfg.Tokenizer == "" || cfg.Tokenizer == "auto" || cfg.Tokenizer == "embedded")
	for i, l := range d.lanes {
		// Lane A's load reaches its router at /v1, lane B's at /lanes/b/v1;
		// both generators play the same script (one configuration, one seed).
		target := cfg.Target
		if target == "" {
			target = "http://" + loopbackAddr(ln.Addr()) + lanePrefix(l.id) + "/v1"
		}
		if err := l.startLoad(cfg, load, target, laneRegisterer(reg, l.id, ab), inProcess); err != nil {
			return fail(err)
		}
		if i == 0 {
			d.Gen = l.gen
		}
	}

	workers := first.routes.Static
	opts := cfg.Dashboard
	opts.Workers = fmt.Sprintf("%d %s %s", len(workers), kind, plural(len(workers), "worker"))
	switch {
	case cfg.Target != "" && len(cfg.Workers) == 0:
		opts.Workers = "load sent to " + cfg.Target
	case cfg.Target != "":
		opts.Workers = fmt.Sprintf("load sent to %s; %d real %s watched", cfg.Target, len(workers), plural(len(workers), "worker"))
	case ab:
		opts.Workers = fmt.Sprintf("2 × %d %s %s, one fleet per lane", len(workers), kind, plural(len(workers), "worker"))
	}
	if d.fleet != nil {
		opts.Profile = cfg.SimProfile.Name
		if d := cfg.SimProfile.Description; d != "" {
			opts.Profile, opts.ProfileName = d+" each", cfg.SimProfile.Name
		}
		opts.Gauges = first.gauges
		opts.GaugeSource = "each simulated worker's engine"
		opts.Source = "simulated"
		for _, l := range d.lanes[1:] {
			opts.Lanes = append(opts.Lanes, web.Lane{Gen: l.gen, Router: web.ProxyRouter{Proxy: l.proxy}, Gauges: l.gauges})
		}
	} else {
		opts.Profile = strings.Join(cfg.Workers, ", ")
		if len(cfg.Workers) == 0 {
			opts.Profile = "kvlens runs no workers and its router is not in the path"
		}
		d.scraper = &scraper{}
		opts.Gauges = d.scraper.gauges
		opts.GaugeSource = "each worker's /metrics (vLLM's or SGLang's gauges, every 2 s)"
		opts.Source = fmt.Sprintf("%d real %s", len(workers), plural(len(workers), "worker"))
		if len(pair) == 2 {
			opts.Alternate = &web.Alternation{Pair: [2]string{pair[0], pair[1]}, Every: cfg.ABTurn}
			turn := cfg.ABTurn
			if turn <= 0 {
				turn = web.DefaultTurn
			}
			d.turns = fmt.Sprintf("A/B: %s and %s take turns of %s on these workers, which cannot be split into two fleets", pair[0], pair[1], turn)
		}
	}
	var rec *recording.Recorder
	noStore := noStoreReason(cfg, d.openStore(cfg))
	switch {
	case noStore != "":
		opts.RecordingsOff = noStore
	case !cfg.Record:
		// Earlier sessions stay on the Recordings page: --record=false
		// says only that this one is not recorded.
		opts.Recordings, opts.NotRecording = d.db, "it was started with --record=false"
	default:
		if rec = d.startRecording(cfg, pair); rec != nil {
			opts.Record = rec.Add
			opts.Recordings, opts.CurrentRecording = d.db, rec.ID()
		} else {
			opts.Recordings, opts.NotRecording = d.db, "the recording could not start (see the warning kvlens printed at start)"
		}
	}
	var imported []string
	if d.db != nil {
		imported = d.db.Imported()
	}
	if opts.Baseline == nil {
		set, err := chooseBaseline(d.db, cfg.Baseline)
		if err != nil {
			return fail(err)
		}
		opts.Baseline = set
	}
	d.Store = storeNote(cfg, d.Recording, imported, opts.Baseline)
	opts.Model = cfg.Model
	opts.Blind = func() string { return blind(d.lanes) }
	opts.Ready = func() error { return ready(d.lanes) }
	if warp != nil {
		opts.Warm = warp
		watch = newWarmWatch(d.lanes, load.Window)
		opts.WarmBehind = watch.behind
	}
	opts.BlockSize = d.Proxy.Router().BlockSize()
	opts.Gatherer = reg
	opts.Registerer = reg
	opts.API = d.Proxy
	opts.Describe = router.Describe
	if opts.PublicURL == "" {
		opts.PublicURL = lanURL(ln.Addr())
	}
	d.PublicURL = opts.PublicURL
	if opts.Hosts == nil {
		hosts, err := access.MachineHosts(append(slices.Clone(cfg.AllowHosts), opts.PublicURL)...)
		if err != nil {
			return fail(fmt.Errorf("--allow-host or --public-url: %w", err))
		}
		opts.Hosts = hosts
	}
	ctx, cancel := context.WithCancel(context.Background())
	if d.fleet != nil {
		sim, err := newSimulator(ctx, cfg, d.db, noStore)
		if err != nil {
			cancel()
			return fail(err)
		}
		d.sim = sim
		opts.Simulator = sim
		if PolicyCurvesFit(cfg) {
			if opts.PolicyCurves, err = PolicyCurves(); err != nil {
				cancel()
				return fail(err)
			}
		}
		var ff fleetFaults
		for _, l := range d.lanes {
			ff = append(ff, l.fleet)
		}
		opts.Faults = ff
	}
	var frontend *dynamo.Frontend
	if cfg.FrontendMetrics != "" {
		frontend = dynamo.NewFrontend(cfg.FrontendMetrics, load.Window)
		opts.Frontend = frontend
	}
	d.Web = web.New(d.Gen, web.ProxyRouter{Proxy: d.Proxy}, opts)

	d.cancel = cancel
	mux := http.NewServeMux()
	// The admin API's changes are the dashboard's: one rule guards both.
	mux.Handle(router.AdminPrefix+"/", d.Web.Rule().RequireForChanges(d.Web.AfterWarmUp(d.Proxy.Admin())))
	for _, l := range d.lanes[1:] {
		// Open like /v1: the lane's load generator calls it, as scripts may.
		mux.Handle(lanePrefix(l.id)+"/v1/", http.StripPrefix(lanePrefix(l.id), l.proxy))
	}
	mux.Handle("/", d.Web.Handler())
	d.srv = &http.Server{Handler: reqbody.Paced(mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnState: d.conns.track}
	if rec != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); rec.Run(ctx) }()
	}
	if frontend != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); frontend.Run(ctx, clock.Real, 5*time.Second) }()
	}
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, "kvlens: "+f+"\n", a...) }
	for _, l := range d.lanes {
		l.run(ctx, &d.wg, logf)
	}
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.Web.Hub().Run(ctx) }()
	if d.scraper != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.scraper.run(ctx, d.Proxy, 2*time.Second) }()
	}
	go func() { defer d.wg.Done(); d.srv.Serve(d.ln) }()
	if !cfg.NoStart {
		for _, l := range d.lanes {
			if warp == nil {
				// A cold start is a change like any other: its window's
				// figures wait for the requests in flight and settle,
				// rather than compare the first answers, the short ones,
				// as if they were steady. A warm-up's windows are full.
				l.gen.BeginWindow()
			}
			l.gen.Start()
		}
	}
	if warp != nil {
		d.wg.Add(2)
		go func() { defer d.wg.Done(); watch.pace(ctx, warp, logf) }()
		go func() {
			defer d.wg.Done()
			if why := d.Web.RunWarmUp(ctx); why != "" {
				logf("the warm-up fell behind (%s): its windows were dropped, and new ones settle like any other (TTFT in %s, the answers' figures about a request's length later)", why, web.SettleTime)
			}
		}()
	}
	if cfg.Dashboard.Tour != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.Web.PlayTour(ctx) }()
	}
	return d, nil
}

// CheckTour checks the tour, when there is one, against the demo it will
// play on: the slider's scale, whether the fleet takes faults (the
// simulated one) and whether the view compares a pair.
func (cfg Config) CheckTour() error {
	if cfg.Dashboard.Tour == nil {
		return nil
	}
	if cfg.NoStart {
		return errors.New("--tour plays over running load: drop --no-start")
	}
	simulated := len(cfg.Workers) == 0 && cfg.Target == ""
	pair := len(cfg.AB) == 2 && cfg.Target == ""
	return cfg.Dashboard.CheckTour(simulated, pair)
}

// lanePrefix is where lane id's router answers besides the first's /v1:
// /lanes/b for lane B.
func lanePrefix(id string) string {
	if id == "a" {
		return ""
	}
	return "/lanes/" + id
}

// Lines are the lines serve prints at start to say where the load goes and
// what kvlens routes, without the "kvlens: " prefix.
func (d *Demo) Lines() []string {
	var lines []string
	if d.Target != "" {
		lines = append(lines, fmt.Sprintf("sending the load to %s; kvlens's own router is not in its path", d.Target))
	}
	switch {
	case len(d.lanes) > 1:
		lines = append(lines, "A/B: two identical fleets play the same conversations at the same time, each with its own router (--ab off for one)")
		for _, l := range d.lanes {
			lines = append(lines, fmt.Sprintf("lane %s: routing %s over %d workers: %s", strings.ToUpper(l.id), l.proxy.PolicyName(), len(l.workerURLs), strings.Join(l.workerURLs, " ")))
		}
	case len(d.WorkerURLs) > 0:
		lines = append(lines, fmt.Sprintf("routing %s over %d workers: %s", d.Proxy.PolicyName(), len(d.WorkerURLs), strings.Join(d.WorkerURLs, " ")))
		if d.turns != "" {
			lines = append(lines, d.turns)
		}
	case d.Target != "":
		lines = append(lines, "running no workers: --target given without --workers")
	}
	if d.warm != "" {
		lines = append(lines, d.warm)
	}
	return lines
}

// Close stops the load (cancelling streams in flight), disconnects browsers,
// and shuts the listeners, giving up on stragglers after ctx expires.
func (d *Demo) Close(ctx context.Context) error {
	var phases []string
	start, last := time.Now(), time.Now()
	phase := func(name string) {
		phases = append(phases, fmt.Sprintf("%s %v", name, time.Since(last).Round(time.Millisecond)))
		last = time.Now()
	}
	var stops sync.WaitGroup
	for _, l := range d.lanes {
		stops.Add(1)
		go func() { defer stops.Done(); l.stop() }()
	}
	stops.Wait()
	phase("load stopped")
	d.cancel()
	// Every stream of ours is cancelled by now; whatever is still open
	// after 2 s (a stuck client) is cut, so exit stays well within 5 s.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// A connection a cancelled request dialled but never used would hold
	// Shutdown for its 5 s grace: close those first.
	d.conns.closeFresh()
	phase("streams cancelled")
	// The dashboard's server and the simulated fleets close side by side,
	// each waiting only for its own connections: one after the other,
	// under the race detector on a busy machine, they took 3.1 s of the
	// 5 s an exit is allowed.
	var (
		mu     sync.Mutex
		err    error
		closed []string
		wg     sync.WaitGroup
	)
	began := last
	done := func(name string, e error) {
		mu.Lock()
		defer mu.Unlock()
		err = errors.Join(err, e)
		closed = append(closed, fmt.Sprintf("%s %v", name, time.Since(began).Round(time.Millisecond)))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Shutdown stops taking connections and closes the idle ones at
		// once; when the handlers have returned, Close cuts what is left
		// rather than wait for Shutdown's next look.
		go d.srv.Shutdown(sctx)
		e := d.conns.waitHandlers(sctx)
		d.srv.Close()
		if e != nil {
			e = fmt.Errorf("connections still open after 2 s were cut: %w", e)
		}
		done("http closed", e)
	}()
	for _, l := range d.lanes {
		if l.fleet == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The router's spare connections to its workers would hold
			// the fleet's Shutdown for its whole grace.
			l.proxy.Client().CloseIdleConnections()
			done("fleet "+l.id+" closed", l.fleet.Close(ctx))
		}()
	}
	wg.Wait()
	phases = append(phases, closed...)
	last = time.Now()
	d.wg.Wait() // the recorder has written its last frames
	phase("background work done")
	if d.sim != nil {
		d.sim.wait() // ended by the cancelled context
	}
	if d.db != nil {
		err = errors.Join(err, d.db.Close())
		phase("store closed")
	}
	if time.Since(start) > time.Second {
		// Shutdown is normally tens of milliseconds; say where a slow one
		// spent its time.
		fmt.Fprintf(os.Stderr, "kvlens: slow shutdown (%v): %s\n", time.Since(start).Round(time.Millisecond), strings.Join(phases, ", "))
	}
	return err
}

// Report writes a one-line status every interval until ctx ends, so that a
// terminal shows the demo is alive.
func (d *Demo) Report(ctx context.Context, w io.Writer, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			warming := d.Web.Warming()
			for _, l := range d.lanes {
				snap := l.gen.Snapshot()
				line := StatusLine(l.proxy.PolicyName(), snap, statusNote(warming, snap.Window))
				if len(d.lanes) > 1 {
					line = strings.Replace(line, "kvlens: ", "kvlens: "+strings.ToUpper(l.id)+" ", 1)
				}
				fmt.Fprintln(w, line)
			}
		}
	}
}

// openStore opens the store at --db, if one is given, for the recordings
// and the dashboard's simulated curves; --record=false turns off only the
// former. A store that cannot be opened turns both off with a one-line
// warning: the demo itself must not depend on the disk.
func (d *Demo) openStore(cfg Config) error {
	if cfg.DB == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := store.Open(ctx, cfg.DB)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens: warning: no store this session (no recording, simulated curves kept in memory, the built-in baselines): %v\n", err)
		return err
	}
	d.db = db
	return nil
}

// noStoreReason says why there is no store (d.db is nil), for the
// recordings and the simulated curves alike: no --db, or a store that
// would not open (openStore's err); "" when there is one.
func noStoreReason(cfg Config, err error) string {
	if cfg.DB == "" {
		return "kvlens runs without a store (--db)"
	}
	if err != nil {
		return "the store at " + cfg.DB + " could not be opened (see the warning kvlens printed at start)"
	}
	return ""
}

// startRecording starts this session's recording in the open store; one
// that cannot start turns recording off with a one-line warning.
func (d *Demo) startRecording(cfg Config, pair []string) *recording.Recorder {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := d.db
	conf, _ := json.Marshal(map[string]any{
		"policy": cfg.Policy, "ab": pair, "model": cfg.Model, "workers": d.WorkerURLs,
		"profile": cfg.SimProfile.Name, "concurrency": cfg.Load.Concurrency,
	})
	rec, err := recording.Start(ctx, db, clock.Real, recording.Name(time.Now()), conf, cfg.RecordingRetention)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens: warning: not recording this session: %v\n", err)
		return nil
	}
	d.rec, d.Recording = rec, rec.ID()
	return rec
}

// storeNote is the startup line's account of the store: where it is, what
// this start imported into it, whether the session is recorded, and the
// set the dashboard compares with.
func storeNote(cfg Config, recording int64, imported []string, base *baselines.Set) string {
	var b strings.Builder
	switch {
	case cfg.DB == "":
		b.WriteString("no store (--db is empty): built-in baselines, nothing recorded")
	case recording != 0:
		fmt.Fprintf(&b, "store %s, recording this session as #%d", cfg.DB, recording)
	case !cfg.Record:
		fmt.Fprintf(&b, "store %s, not recording (--record=false)", cfg.DB)
	default:
		fmt.Fprintf(&b, "store %s could not be used for recording (see the warning above)", cfg.DB)
	}
	if n := len(imported); n > 0 {
		fmt.Fprintf(&b, "; first start: imported %d built-in baseline sets", n)
	}
	if base != nil {
		fmt.Fprintf(&b, "; comparing with %q", base.Name)
	}
	return b.String()
}

// FlushRecording writes the frames the recorder holds now, rather than at
// its next 10 s flush; without a recording it does nothing.
func (d *Demo) FlushRecording(ctx context.Context) error {
	if d.rec == nil {
		return nil
	}
	return d.rec.Flush(ctx)
}

// statusNote says what a status line's figures are when they are not a
// settled window's: the page shows no figure while the fleets warm up, and
// no difference while a window settles, and the terminal says so too.
func statusNote(warming bool, w loadgen.Stats) string {
	if warming {
		return "warming up"
	}
	return web.Settling(w)
}

// StatusLine is the one-line summary the terminal shows every few seconds.
// A figure with no data yet is a dash, never a zero; note, when not empty,
// ends the line, such as "warming up" or "settling (12 s of 30)".
func StatusLine(policy string, s loadgen.Snapshot, note string) string {
	q := s.Window
	msOr := func(v float64, n int, format string) string {
		if n == 0 {
			return "—"
		}
		return fmt.Sprintf(format, v)
	}
	line := fmt.Sprintf("kvlens: %s, %d/%d conversations, TTFT p50 %s p95 %s (%d), TPOT p50 %s, %.0f tok/s, %d errors (%.1f%%)",
		policy, s.Live, s.Target,
		msOr(q.TTFT.P50, q.TTFT.Count, "%.0f ms"), msOr(q.TTFT.P95, q.TTFT.Count, "%.0f ms"), q.TTFT.Count,
		msOr(q.TPOT.P50, q.TPOT.Count, "%.1f ms"), q.OutputTokensPerSec, q.Errors, 100*q.ErrorRate)
	if note != "" {
		line += "; " + note
	}
	return line
}

// lanURL guesses the address other machines on the network reach this
// process at: the first non-loopback IPv4 address, when listening on all
// interfaces. It returns "" when there is none, and the QR code is hidden.
func lanURL(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return ""
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, ad := range addrs {
		if ipn, ok := ad.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
			return fmt.Sprintf("http://%s:%d/", ipn.IP, tcp.Port)
		}
	}
	return ""
}

// humanAddr is the address to print: localhost when listening everywhere.
func humanAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() || tcp.IP.IsLoopback() {
		if ok {
			return fmt.Sprintf("localhost:%d", tcp.Port)
		}
	}
	return a.String()
}

// loopbackAddr is the address this process reaches itself at.
func loopbackAddr(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return fmt.Sprintf("127.0.0.1:%d", tcp.Port)
	}
	return a.String()
}

// plural is noun for one, nouns for any other count.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// nextAddr is addr with the next port, on the same host: a suggestion
// for --addr that listens where the operator asked, not on every
// interface. The port of an address without one is taken as 8080.
func nextAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, ""
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n >= 65535 {
		n = 8080
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// conns follows the listener's connections through their states: those
// that have not yet sent a request (http.StateNew) and those running a
// handler (http.StateActive).
type conns struct {
	mu    sync.Mutex
	fresh map[net.Conn]struct{}
	busy  map[net.Conn]struct{}
}

// track is an http.Server's ConnState hook.
func (cs *conns) track(c net.Conn, st http.ConnState) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.fresh == nil {
		cs.fresh, cs.busy = map[net.Conn]struct{}{}, map[net.Conn]struct{}{}
	}
	delete(cs.fresh, c)
	delete(cs.busy, c)
	switch st {
	case http.StateNew:
		cs.fresh[c] = struct{}{}
	case http.StateActive:
		cs.busy[c] = struct{}{}
	}
}

// closeFresh closes every connection that has sent nothing yet.
func (cs *conns) closeFresh() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c := range cs.fresh {
		c.Close()
	}
}

// waitHandlers returns once no connection runs a handler, or ctx is done.
// It looks every 5 ms: http.Server.Shutdown looks up to 500 ms apart, and
// under load that was most of a shutdown.
func (cs *conns) waitHandlers(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		cs.mu.Lock()
		n := len(cs.busy)
		cs.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
