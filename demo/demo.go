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
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/recording"
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
	// Model is the model name requests ask for.
	Model string
	// Policy is the initial routing policy.
	Policy string
	// Router configures the router: block size, admission, busy threshold.
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
}

// DefaultConfig is what `kvlens` with no flags runs: 3 simulated H200
// workers, round-robin, 60 conversations, the seeds' SLOs.
func DefaultConfig() Config {
	return Config{
		Addr:       ":8080",
		SimWorkers: 3,
		SimProfile: sim.MustProfile(sim.DefaultProfile),
		Model:      sim.DefaultModel,
		Policy:     "round_robin",
		Router: router.Config{
			BlockSize: router.DefaultBlockSize, Admission: router.AdmitQueue, BusyThreshold: 1,
		},
		Load: loadgen.DefaultConfig(),
		Dashboard: web.Options{
			SliderMin: 60, SliderMax: 180, SliderStep: 20,
			SLOTTFT: 600 * time.Millisecond, SLOTPOT: 60 * time.Millisecond,
			Viewers: web.HubLimits{MaxViewers: web.DefaultMaxViewers},
		},
	}
}

// Demo is a running kvlens.
type Demo struct {
	// URL is the dashboard's address for people, such as http://localhost:8080.
	URL string
	// Gen is the load generator.
	Gen *loadgen.Generator
	// Proxy is the router.
	Proxy *router.Proxy
	// WorkerURLs are the workers' base URLs.
	WorkerURLs []string
	// Target is where the load goes: the --target base URL, or empty for
	// this process's own router.
	Target string
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

	fleet   *sim.Fleet
	scraper *scraper // real workers' /metrics; nil for the simulated fleet
	srv     *http.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start brings the whole demo up and returns once it is serving.
func Start(cfg Config) (*Demo, error) {
	if _, err := cfg.Dashboard.ParseConcurrency(fmt.Sprint(cfg.Load.Concurrency)); err != nil {
		return nil, fmt.Errorf("initial %w", err)
	}
	policy, err := router.NewPolicy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("address %s is already in use: another program (or another kvlens) is listening there; choose another with --addr, for example --addr :%d", cfg.Addr, portOf(cfg.Addr)+1)
		}
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	d := &Demo{URL: "http://" + humanAddr(ln.Addr())}
	fail := func(err error) (*Demo, error) {
		ln.Close()
		if d.fleet != nil {
			d.fleet.Close(context.Background())
		}
		return nil, err
	}

	d.WorkerURLs = cfg.Workers
	d.Target = cfg.Target
	kind := "real"
	if len(cfg.Workers) == 0 && cfg.Target == "" {
		// The embedded workers publish KV events over loopback ZMQ, exactly
		// as a vLLM fleet would, so the router has one path for both.
		// Worker i draws output lengths from Load.Seed+i, as in virtual time,
		// so a real-time and a virtual run with one seed start alike.
		// Each worker also serves vLLM's replay socket (on a free loopback
		// port), so the router catches up on events published before its
		// subscription landed. The dashboard injects faults in process;
		// over HTTP the workers take the operator's token, as a standalone
		// sim does.
		fc := sim.FleetConfig{Count: cfg.SimWorkers, Model: cfg.Model, Profile: cfg.SimProfile,
			EventsBind: "tcp://127.0.0.1:0", EventsReplay: "tcp://127.0.0.1:0", Seed: cfg.Load.Seed,
			Access: access.Rule{Token: cfg.Dashboard.Access.Token}}
		if cfg.SimPorts.HTTP > 0 {
			fc.BasePort = cfg.SimPorts.HTTP
			fc.EventsBind = fmt.Sprintf("tcp://127.0.0.1:%d", cfg.SimPorts.EventsFrom(cfg.SimWorkers))
		}
		d.fleet, err = sim.StartFleet(fc)
		if err != nil {
			if cfg.SimPorts.HTTP > 0 {
				err = fmt.Errorf("--sim-ports %s: %w; choose other ports", cfg.SimPorts, err)
			}
			return fail(err)
		}
		for i, u := range d.fleet.URLs {
			d.WorkerURLs = append(d.WorkerURLs, fmt.Sprintf("sim-%d=%s,events=%s,replay=%s", i, u, d.fleet.EventEndpoints[i], d.fleet.ReplayEndpoints[i]))
		}
		kind = "simulated H200"
	}
	var fleet router.Fleet
	if len(d.WorkerURLs) > 0 {
		// With only a target, the router has no workers: it stays idle
		// and answers 503 to whoever calls it.
		fleet, err = router.ParseFleet(d.WorkerURLs)
		if err != nil {
			return fail(fmt.Errorf("--workers: %w", err))
		}
	}
	workers := fleet.Static
	pool := router.NewPool(workers)
	if cfg.MaxBatchSize > 0 {
		pool.SetCapacity(cfg.MaxBatchSize)
	}

	reg := prometheus.NewRegistry()
	d.Metrics = reg
	rcfg := cfg.Router
	rcfg.Registerer = reg
	d.Proxy = router.NewProxy(router.NewRouter(pool, policy, rcfg))
	if err := d.setTokenizer(cfg, pool); err != nil {
		return fail(err)
	}

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	target := cfg.Target
	if target == "" {
		target = "http://" + loopbackAddr(ln.Addr()) + "/v1"
	}
	load := cfg.Load
	load.SLO = loadgen.SLO{TTFT: cfg.Dashboard.SLOTTFT, TPOT: cfg.Dashboard.SLOTPOT}
	if len(load.Starters) == 0 {
		load.Starters = loadgen.BuiltinStarters()
	}
	d.Gen, err = loadgen.New(loadgen.NewOpenAIClient(target, cfg.Model, ""), load, loadgen.NewMetrics(reg))
	if err != nil {
		return fail(err)
	}

	opts := cfg.Dashboard
	opts.Workers = fmt.Sprintf("%d %s %s", len(workers), kind, plural(len(workers), "worker"))
	switch {
	case cfg.Target != "" && len(cfg.Workers) == 0:
		opts.Workers = "load sent to " + cfg.Target
	case cfg.Target != "":
		opts.Workers = fmt.Sprintf("load sent to %s; %d real %s watched", cfg.Target, len(workers), plural(len(workers), "worker"))
	}
	if d.fleet != nil {
		opts.Profile = cfg.SimProfile.Name
		opts.Gauges = d.gauges
		opts.GaugeSource = "each simulated worker's engine"
	} else {
		opts.Profile = strings.Join(cfg.Workers, ", ")
		if len(cfg.Workers) == 0 {
			opts.Profile = "kvlens runs no workers and its router is not in the path"
		}
		d.scraper = &scraper{}
		opts.Gauges = d.scraper.gauges
		opts.GaugeSource = "each worker's /metrics (vLLM gauges, every 2 s)"
	}
	var rec *recording.Recorder
	if cfg.Record && cfg.DB != "" {
		rec = d.startRecording(cfg)
		if rec != nil {
			opts.Record = func(frame []byte) { rec.Add("snapshot", frame) }
			opts.Recordings, opts.CurrentRecording = d.db, rec.ID()
		} else {
			opts.RecordingsOff = "the store at " + cfg.DB + " could not be opened (see the warning kvlens printed at start)"
		}
	} else if cfg.DB == "" {
		opts.RecordingsOff = "kvlens runs without a store (--db)"
	} else {
		opts.RecordingsOff = "this session was started with --record=false"
	}
	var imported []string
	if d.db != nil {
		imported = d.db.Imported()
	}
	if opts.Baseline == nil {
		set, more, err := chooseBaseline(cfg.DB, cfg.Baseline)
		if err != nil {
			return fail(err)
		}
		opts.Baseline = set
		imported = append(imported, more...)
	}
	d.Store = storeNote(cfg, d.Recording, imported, opts.Baseline)
	opts.Model = cfg.Model
	opts.Blind = func() string { return router.BlindSummary(d.Proxy.Router().Blind()) }
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
		sim, err := newSimulator(ctx, cfg, d.db)
		if err != nil {
			cancel()
			return fail(err)
		}
		d.sim = sim
		opts.Simulator = sim
		opts.Faults = fleetFaults{d.fleet}
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
	mux.Handle(router.AdminPrefix+"/", d.Web.Rule().RequireForChanges(d.Proxy.Admin()))
	mux.Handle("/", d.Web.Handler())
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if rec != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); rec.Run(ctx) }()
	}
	if frontend != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); frontend.Run(ctx, clock.Real, 5*time.Second) }()
	}
	d.wg.Add(4)
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, "kvlens: "+f+"\n", a...) }
	go func() { defer d.wg.Done(); router.NewFeed(d.Proxy.Router(), logf).Run(ctx, clock.Real) }()
	go func() {
		defer d.wg.Done()
		pool.Watch(ctx, clock.Real, d.Proxy.Client(), fleet.DNS, nil, 2*time.Second, logf)
	}()
	go func() { defer d.wg.Done(); d.Web.Hub().Run(ctx) }()
	if d.scraper != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.scraper.run(ctx, d.Proxy, 2*time.Second) }()
	}
	go func() { defer d.wg.Done(); d.srv.Serve(ln) }()
	if !cfg.NoStart {
		d.Gen.Start()
	}
	return d, nil
}

// Lines are the lines serve prints at start to say where the load goes and
// what kvlens routes, without the "kvlens: " prefix.
func (d *Demo) Lines() []string {
	var lines []string
	if d.Target != "" {
		lines = append(lines, fmt.Sprintf("sending the load to %s; kvlens's own router is not in its path", d.Target))
	}
	switch {
	case len(d.WorkerURLs) > 0:
		lines = append(lines, fmt.Sprintf("routing %s over %d workers: %s", d.Proxy.PolicyName(), len(d.WorkerURLs), strings.Join(d.WorkerURLs, " ")))
	case d.Target != "":
		lines = append(lines, "running no workers: --target given without --workers")
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
	d.Gen.Stop()
	phase("load stopped")
	d.cancel()
	// Every stream of ours is cancelled by now; whatever is still open
	// after 2 s (a stuck client) is cut, so exit stays well within 5 s.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := d.srv.Shutdown(sctx)
	if err != nil {
		d.srv.Close()
		err = fmt.Errorf("connections still open after 2 s were cut: %w", err)
	}
	phase("http closed")
	if d.fleet != nil {
		err = errors.Join(err, d.fleet.Close(ctx))
		phase("fleet closed")
	}
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
			fmt.Fprintln(w, StatusLine(d.Proxy.PolicyName(), d.Gen.Snapshot()))
		}
	}
}

// startRecording opens the store and starts this session's recording. A
// store that cannot be opened turns recording off with a one-line warning:
// the demo itself must not depend on the disk.
func (d *Demo) startRecording(cfg Config) *recording.Recorder {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := store.Open(ctx, cfg.DB)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens: warning: not recording this session: %v\n", err)
		return nil
	}
	conf, _ := json.Marshal(map[string]any{
		"policy": cfg.Policy, "model": cfg.Model, "workers": d.WorkerURLs,
		"profile": cfg.SimProfile.Name, "concurrency": cfg.Load.Concurrency,
	})
	rec, err := recording.Start(ctx, db, clock.Real, recording.Name(time.Now()), conf, cfg.RecordingRetention)
	if err != nil {
		db.Close()
		fmt.Fprintf(os.Stderr, "kvlens: warning: not recording this session: %v\n", err)
		return nil
	}
	d.db, d.rec, d.Recording = db, rec, rec.ID()
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

// StatusLine is the one-line summary the terminal shows every few seconds.
// A figure with no data yet is a dash, never a zero.
func StatusLine(policy string, s loadgen.Snapshot) string {
	q := s.Window
	msOr := func(v float64, n int, format string) string {
		if n == 0 {
			return "—"
		}
		return fmt.Sprintf(format, v)
	}
	return fmt.Sprintf("kvlens: %s, %d/%d conversations, TTFT p50 %s p95 %s (%d), TPOT p50 %s, %.0f tok/s, %d errors (%.1f%%)",
		policy, s.Live, s.Target,
		msOr(q.TTFT.P50, q.TTFT.Count, "%.0f ms"), msOr(q.TTFT.P95, q.TTFT.Count, "%.0f ms"), q.TTFT.Count,
		msOr(q.TPOT.P50, q.TPOT.Count, "%.1f ms"), q.OutputTokensPerSec, q.Errors, 100*q.ErrorRate)
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

func portOf(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	var n int
	fmt.Sscan(p, &n)
	if n == 0 {
		return 8080
	}
	return n
}
