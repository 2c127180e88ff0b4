package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/bench"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/demo"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
	"github.com/kvlens/kvlens/store"
)

// modeAliases are short names accepted by --modes.
var modeAliases = map[string]string{"rr": "round_robin", "roundrobin": "round_robin", "kv_aware": "kv"}

// parseModes reads --modes: policy names or their aliases, comma-separated.
// With kvlens's own router each must be a policy router.NewPolicy knows; an
// external router's modes are passed to --mode-switch-cmd as they are.
// Errors are not prefixed with a flag's name: --modes, --policies and --ab
// all read a list this way, and each caller names its own flag.
func parseModes(s string, external bool) ([]string, error) {
	var modes []string
	for _, m := range strings.Split(s, ",") {
		m = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(m)), "-", "_")
		if m == "" {
			continue
		}
		if a, ok := modeAliases[m]; ok {
			m = a
		}
		if !external {
			if _, err := router.NewPolicy(m); err != nil {
				return nil, err
			}
		}
		if strings.ContainsFunc(m, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			// An external router's mode goes into --mode-switch-cmd.
			return nil, fmt.Errorf("mode %q has spaces or control characters", m)
		}
		if slices.Contains(modes, m) {
			return nil, fmt.Errorf("%s is given twice", m)
		}
		modes = append(modes, m)
	}
	if len(modes) == 0 {
		return nil, errors.New("no mode given")
	}
	return modes, nil
}

// parseLevels reads sweep's --levels as bench routing and sim calibrate
// read theirs: a list, a range or a range with a step, in order.
func parseLevels(s string) ([]int, error) {
	levels, err := bench.ParseList(s, 1, loadgen.MaxConcurrency)
	if err != nil {
		return nil, fmt.Errorf("--levels: %w", err)
	}
	return levels, nil
}

// defaultModes compares round-robin with the KV router when this kvlens has
// one, and measures round-robin alone otherwise.
func defaultModes() string {
	if _, err := router.NewPolicy("kv"); err == nil {
		return "rr,kv"
	}
	return "rr"
}

// sweepOptions are sweep's flags.
type sweepOptions struct {
	db, levels, modes, switchCmd, name, out, note string
	readyTimeout                                  time.Duration
	resume, virtual                               bool
	run                                           int64
	serve                                         demo.Config
	sweep                                         baselines.SweepConfig
	// workload is --workload's, when chosen; traceBlock is
	// --trace-block-size; traceNote says how many trace records were
	// clipped to the context, if any.
	workload   loadgen.Workload
	chosen     bool
	traceBlock int
	traceNote  string
	// blockGiven says --block-size was given.
	blockGiven bool
}

func sweepFlags(o *sweepOptions, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(out)
	def, _ := store.DefaultPath()
	fs.StringVar(&o.db, "db", def, "path of kvlens's SQLite database, where runs and the resulting set are stored")
	fs.StringVar(&o.levels, "levels", "40,60,80,100,120", "concurrency levels, measured in this order: a list, a range 40-120 or a range with a step 40-120/20")
	fs.StringVar(&o.modes, "modes", defaultModes(), "comma-separated routing modes to compare, baseline first (rr = round_robin)")
	fs.StringVar(&o.switchCmd, "mode-switch-cmd", "", "shell command that switches an external router's mode ({mode} and $KVLENS_MODE hold it, and the environment is passed on); the sweep then waits for --target's /models. A kvlens router's admin API needs the operator token: curl -fsS -X PUT -H \"Authorization: Bearer $KVLENS_CONTROL_TOKEN\" -d '{\"policy\":\"{mode}\"}' http://HOST:8080/admin/router/policy")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 10*time.Minute, "how long to wait for the target to answer /models after a mode switch")
	fs.DurationVar(&o.sweep.Warmup, "warmup", 60*time.Second, "load before each level's measurement; the window is reset when it ends")
	fs.DurationVar(&o.sweep.Measure, "measure", 300*time.Second, "measurement per level")
	fs.IntVar(&o.sweep.Snapshots, "snapshots", 3, "snapshots per level, one every measure/N, averaged")
	fs.IntVar(&o.sweep.Repeats, "repeats", 1, "run the whole sweep N times and average, keeping the spread")
	fs.DurationVar(&o.sweep.Cooldown, "cooldown", 0, "pause with the load stopped after each level")
	fs.BoolVar(&o.resume, "resume", false, "continue the last unfinished sweep (or --run ID) where it stopped; its stored settings are used")
	fs.Int64Var(&o.run, "run", 0, "with --resume, the sweep run to continue")
	fs.StringVar(&o.name, "name", "", `name of the baseline set to store (default "sweep <start time>")`)
	fs.StringVar(&o.out, "out", ".", "directory for the report files (JSON, Markdown, PNG)")
	fs.StringVar(&o.note, "deployment-note", "", "extra line for the report's deployment table")
	fs.StringVar(&o.serve.Addr, "addr", "127.0.0.1:0", "listen address of the dashboard and router proxy during the sweep")
	fs.IntVar(&o.serve.SimWorkers, "sim-workers", o.serve.SimWorkers, "number of simulated workers to run when --workers is not set")
	fs.Func("workers", "comma-separated real OpenAI-compatible workers, as serve takes them: each a base URL, name=URL[,events=tcp://host:port][,capacity=N], or dns://service:port[?events=PORT] (default: run the simulated fleet)", func(s string) error {
		var err error
		o.serve.Workers, err = workerList(s)
		return err
	})
	fs.StringVar(&o.serve.Target, "target", "", "OpenAI base URL to load, such as a Dynamo frontend's http://host:8000/v1 (default: kvlens's own router)")
	fs.IntVar(&o.serve.Router.BlockSize, "block-size", o.serve.Router.BlockSize, "KV block size in tokens of the real workers (--workers), 1 to 4096, as serve takes it")
	fs.StringVar(&o.serve.Model, "model", o.serve.Model, "model name sent with every request; not given, real workers' or --target's own (GET /v1/models)")
	fs.IntVar(&o.serve.Load.MaxTokens, "max-tokens", o.serve.Load.MaxTokens, "max_tokens of every request")
	fs.Float64Var(&o.serve.Load.StartRate, "target-rps", o.serve.Load.StartRate, "conversations started per second while ramping up")
	fs.DurationVar(&o.serve.Load.Window, "window", o.serve.Load.Window, "length of the rolling metrics window")
	fs.DurationVar(&o.sweep.SLO.TTFT, "slo-ttft", baselines.DefaultSLO.TTFT, "TTFT p95 objective drawn on the chart and used in the summary")
	fs.DurationVar(&o.sweep.SLO.TPOT, "slo-tpot", baselines.DefaultSLO.TPOT, "TPOT p95 objective used in the summary")
	fs.BoolVar(&o.virtual, "virtual", false, "simulate the sweep in virtual time: the same load generator, router and engines on a discrete-event loop, with no HTTP; --sim-workers and --sim-profile set the deployment")
	fs.Uint64Var(&o.serve.Load.Seed, "seed", o.serve.Load.Seed, "seed of conversations and of output lengths (worker i uses seed+i); with --virtual also of routing choices, so the same seed gives the same virtual sweep")
	fs.StringVar(&o.serve.Router.Admission, "admission", router.AdmitQueue, "router admission: queue (never shed), or shed. "+router.ShedRule)
	fs.Func("sim-profile", "engine profile of the simulated workers: a built-in name or a JSON file (default "+sim.DefaultProfile+")", func(s string) error {
		p, err := loadProfile(s)
		if err != nil {
			return err
		}
		o.serve.SimProfile = p
		return nil
	})
	fs.String("workload", "", workloadFlagHelp+"; trace takes one level, and without --trace replays a synthetic trace at that many sessions in flight")
	fs.Func("trace", "Mooncake-format JSONL trace to replay on its own schedule (the trace workload; one level)", func(p string) error {
		recs, err := loadTrace(p)
		o.serve.Load.Trace = recs
		return err
	})
	fs.IntVar(&o.traceBlock, "trace-block-size", loadgen.TraceBlockTokens, "tokens each of the trace's hash_ids names (Mooncake's traces: 512; kvlens trace gen writes its --block-size)")
	fs.Var(&o.serve.Load.Turns, "turns", "turns per conversation: a range like 3-5, a count, or weights like 3:1,4:2,5:1")
	fs.DurationVar(&o.serve.Load.ThinkTime, "think-time", o.serve.Load.ThinkTime, "pause between an answer and the next question")
	return fs
}

// withWorkload applies a parsed command line's --workload: it parses args
// again over defaults carrying the workload's values, so that flags given
// with it override them wherever they stand, and returns the new options
// and flag set (o and fs unchanged without --workload). A stored run's
// command line goes through here too, so a resumed sweep runs the same
// workload.
func withWorkload(o sweepOptions, fs *flag.FlagSet, args []string, out io.Writer) (sweepOptions, *flag.FlagSet, error) {
	wl, chosen, err := chosenWorkload(fs, stdout)
	if err != nil || !chosen {
		return o, fs, err
	}
	n := sweepOptions{serve: demo.DefaultConfig()}
	wl.Apply(&n.serve.Load)
	// The flags parsed once already; the caller reports a second failure.
	nfs := sweepFlags(&n, out)
	if err := parseQuiet(nfs, args); err != nil {
		return o, fs, err
	}
	n.workload, n.chosen = wl, true
	return n, nfs, nil
}

// runRecord is what a sweep run stores: its settings, and the command line
// that started it, so that --resume drives the same target.
type runRecord struct {
	Args  []string              `json:"args"`
	Sweep baselines.SweepConfig `json:"sweep"`
}

func sweepCmd(args []string) int {
	o := sweepOptions{serve: demo.DefaultConfig()}
	fs := sweepFlags(&o, os.Stderr)
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	o, fs, err := withWorkload(o, fs, args, os.Stderr)
	if errors.Is(err, errWorkloadHelp) {
		return 0
	}
	usage := func(err error) int {
		refuse(fs, err)
		return 2
	}
	if err != nil {
		return usage(err)
	}
	if o.db == "" {
		return usage(errors.New("no default location for the database: give --db PATH"))
	}
	given := givenFlags(fs)
	if o.resume {
		if err := checkResumeFlags(given); err != nil {
			return usage(err)
		}
		if given["run"] && o.run < 1 {
			return usage(fmt.Errorf("--run %d: want a sweep run's id, 1 or more (the first line of its output names it)", o.run))
		}
	} else {
		if given["run"] {
			return usage(errors.New("--run goes with --resume"))
		}
		o.serve.ModelGiven, o.blockGiven = given["model"], given["block-size"]
		// Every check comes before the store is touched, so a sweep
		// refused here leaves no run behind for --resume to pick.
		if err := o.configure(); err != nil {
			return usage(err)
		}
		if o.traceNote != "" {
			fmt.Fprintln(os.Stderr, "kvlens sweep: "+o.traceNote)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := store.Open(ctx, o.db)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sweep: %v\n", err)
		return 1
	}
	defer db.Close()

	var run store.Run
	if o.resume {
		var took string
		run, o, took, err = pickRun(ctx, db, o, given, stdout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kvlens sweep: --resume: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "kvlens sweep: resuming run %d, %d of %d levels done, with its stored settings (%s)\n", run.ID, run.Done, run.Total, took)
	} else if _, err := db.Set(ctx, o.sweep.Name); err == nil {
		if given["name"] {
			return usage(fmt.Errorf("a baseline set called %q is already stored: choose another --name", o.sweep.Name))
		}
		// Two sweeps started in the same second get the same default name.
		o.sweep.Name = freeSetName(ctx, db, o.sweep.Name)
	}
	// The reports are written last: a directory they cannot go into is
	// refused before minutes of load, not after them.
	if err := writableDir(o.out); err != nil {
		return usage(fmt.Errorf("--out: %w", err))
	}

	// The target starts before a new run is stored: an address in use or
	// an unreachable worker leaves no run behind either.
	target, clk, about, closeTarget, err := o.start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sweep: %v\n", err)
		return 1
	}
	defer closeTarget()
	if !o.resume {
		rec, _ := json.Marshal(runRecord{Args: args, Sweep: o.sweep})
		id, err := db.CreateRun(ctx, rec, len(o.sweep.Plan()))
		if err != nil {
			fmt.Fprintf(os.Stderr, "kvlens sweep: %v\n", err)
			return 1
		}
		run = store.Run{ID: id, Total: len(o.sweep.Plan())}
	}
	fmt.Fprintf(stdout, "kvlens sweep: run %d, %s\n", run.ID, about)
	if err := o.execute(ctx, db, run, target, clk); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sweep: %v\n", err)
		return 1
	}
	return 0
}

// resumeOwnFlags are the flags --resume takes from its own command line:
// which run, in which store, and the two settings that may differ between
// an interrupted process and the one that continues it.
var resumeOwnFlags = []string{"resume", "run", "db", "addr", "out"}

// checkResumeFlags refuses flags that --resume would ignore, since the
// stored run's settings decide what is measured.
func checkResumeFlags(given map[string]bool) error {
	var extra []string
	for name := range given {
		if !slices.Contains(resumeOwnFlags, name) {
			extra = append(extra, "--"+name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return fmt.Errorf("--resume continues a run with its stored settings: drop %s (only --run, --db, --addr and --out go with it)", strings.Join(extra, ", "))
	}
	return nil
}

// pickRun finds the run --resume continues: --run's, or else the newest
// unfinished run whose stored settings still pass the checks; it names each
// run it skips on w. It returns the run, the options to continue it with
// (its stored ones, with --addr and --out as given now), and which address
// and report directory those are and where they came from.
func pickRun(ctx context.Context, db *store.DB, cur sweepOptions, given map[string]bool, w io.Writer) (store.Run, sweepOptions, string, error) {
	if cur.run > 0 {
		run, err := db.Run(ctx, cur.run)
		if err != nil {
			return run, cur, "", err
		}
		if run.Status == store.RunDone {
			return run, cur, "", fmt.Errorf("run %d is already done", run.ID)
		}
		o, took, err := resumed(run, cur, given)
		return run, o, took, err
	}
	runs, err := db.UnfinishedRuns(ctx)
	if err != nil {
		return store.Run{}, cur, "", err
	}
	for _, run := range runs {
		o, took, err := resumed(run, cur, given)
		if err != nil {
			fmt.Fprintf(w, "kvlens sweep: --resume: skipping %v\n", err)
			continue
		}
		return run, o, took, nil
	}
	if len(runs) > 0 {
		return store.Run{}, cur, "", fmt.Errorf("no unfinished sweep run can be continued (%d skipped)", len(runs))
	}
	return store.Run{}, cur, "", errors.New("no unfinished sweep run")
}

// resumed rebuilds a stored run's options from its command line and checks
// them as a new sweep's are. --db is the store the run was found in; --addr
// and --out are the stored ones unless given now. took says which were used.
func resumed(run store.Run, cur sweepOptions, given map[string]bool) (sweepOptions, string, error) {
	var rec runRecord
	if err := json.Unmarshal(run.Config, &rec); err != nil {
		return cur, "", fmt.Errorf("run %d: its stored settings are unreadable: %v", run.ID, err)
	}
	o := sweepOptions{serve: demo.DefaultConfig()}
	fs := sweepFlags(&o, io.Discard)
	err := fs.Parse(rec.Args)
	if err == nil {
		o, _, err = withWorkload(o, fs, rec.Args, io.Discard)
	}
	if err != nil {
		return cur, "", fmt.Errorf("run %d: its stored command line %q: %v", run.ID, strings.Join(rec.Args, " "), err)
	}
	if err := o.configure(); err != nil {
		return cur, "", fmt.Errorf("run %d (started %s, %d of %d levels done): its stored settings fail the checks: %v", run.ID, run.StartedAt, run.Done, run.Total, err)
	}
	o.db, o.resume, o.run, o.sweep = cur.db, true, run.ID, rec.Sweep
	from := func(flag string) string {
		if given[flag] {
			return "given now"
		}
		return "stored"
	}
	if given["addr"] {
		o.serve.Addr = cur.serve.Addr
	}
	if given["out"] {
		o.out = cur.out
	}
	took := fmt.Sprintf("stored command line: kvlens sweep %s; --addr %s (%s), --out %s (%s)",
		shellWords(rec.Args), o.serve.Addr, from("addr"), o.out, from("out"))
	return o, took, nil
}

// shellWords joins args as a shell would need them typed, quoting those
// with spaces or quotes in them.
func shellWords(args []string) string {
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}*?#~") {
			words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// configure builds the sweep's settings from the flags.
func (o *sweepOptions) configure() error {
	if err := checkTarget(o.serve.Target); err != nil {
		return err
	}
	if err := o.sweep.SLO.Check(); err != nil {
		return err
	}
	// The sweep's own settings are checked here, naming their flags, before
	// the checks of the whole set (Validate), which name its fields.
	if err := checkMeasure(o.sweep.Measure); err != nil {
		return err
	}
	switch c := o.sweep; {
	case c.Warmup < 0:
		return fmt.Errorf("--warmup %s: want 0 or more", c.Warmup)
	case c.Cooldown < 0:
		return fmt.Errorf("--cooldown %s: want 0 or more", c.Cooldown)
	case o.readyTimeout <= 0:
		return fmt.Errorf("--ready-timeout %s: want a positive time to wait for the target after a mode switch", o.readyTimeout)
	}
	if err := baselines.CheckName(o.name); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if err := checkLine("--deployment-note", o.note); err != nil {
		return err
	}
	external := o.serve.Target != ""
	if o.switchCmd != "" && !external {
		return errors.New("--mode-switch-cmd switches an external router: give its --target too")
	}
	levels, err := parseLevels(o.levels)
	if err != nil {
		return err
	}
	modes, err := parseModes(o.modes, external)
	if err != nil {
		return fmt.Errorf("--modes: %w", err)
	}
	if external && len(modes) > 1 && o.switchCmd == "" {
		return fmt.Errorf("--target is an external router and --modes has %d modes: give --mode-switch-cmd to switch it between them", len(modes))
	}
	if err := checkAddr("--addr", o.serve.Addr); err != nil && !o.virtual {
		// A virtual sweep listens nowhere.
		return err
	}
	if o.virtual && (external || len(o.serve.Workers) > 0) {
		return errors.New("--virtual simulates kvlens's own router and simulated workers: drop --target and --workers")
	}
	if a := o.serve.Router.Admission; a != router.AdmitQueue && a != router.AdmitShed {
		return fmt.Errorf("--admission %q: want %s or %s", a, router.AdmitQueue, router.AdmitShed)
	}
	if err := checkLoad(o.serve.Load); err != nil {
		return err
	}
	if err := checkRequestModel(o.serve.Model); err != nil {
		return err
	}
	if o.blockGiven {
		// Only kvlens's router over real workers indexes by it: the
		// simulated workers' blocks are their profile's, and --target
		// routes by its own.
		if len(o.serve.Workers) == 0 || external {
			return errors.New("--block-size is the real workers' (--workers, routed by kvlens): drop it; the simulated fleet's is its profile's")
		}
		if bs := o.serve.Router.BlockSize; bs < 1 || bs > sim.MaxBlockSize {
			return fmt.Errorf("--block-size %d: want 1 to %d tokens", bs, sim.MaxBlockSize)
		}
	}
	if !external && len(o.serve.Workers) == 0 {
		if err := checkSimTokens(o.serve.Load.MaxTokens, o.serve.SimProfile); err != nil {
			return err
		}
	}
	if (o.serve.SimWorkers < 1 || o.serve.SimWorkers > sim.MaxWorkers) && len(o.serve.Workers) == 0 {
		return fmt.Errorf("--sim-workers must be from 1 to %d, got %d", sim.MaxWorkers, o.serve.SimWorkers)
	}
	if len(o.serve.Workers) > 0 {
		if _, err := router.ParseFleet(o.serve.Workers); err != nil {
			return fmt.Errorf("--workers: %w", err)
		}
	}
	c := &o.sweep
	c.Levels, c.Modes = levels, modes
	started := time.Now().UTC()
	c.Started = started.Format(time.RFC3339)
	c.Name = o.name
	if c.Name == "" {
		c.Name = "sweep " + started.Format("2006-01-02 15:04:05")
	}
	c.TargetRPS = o.serve.Load.StartRate
	c.Window = o.serve.Load.Window
	load := &o.serve.Load
	load.MaxContext = traceLimit(o.serve)
	if err := setTrace(o.workload, o.chosen, load, o.traceBlock, levels[0], c.Warmup+c.Measure); err != nil {
		return err
	}
	if len(load.Trace) > 0 {
		if len(levels) > 1 {
			return fmt.Errorf("--levels: a trace sets its own schedule, so a trace sweep takes one level (kvlens bench routing replays a synthetic trace per level)")
		}
		load.Trace, o.traceNote = loadgen.FitTrace(load.Trace, traceLimit(o.serve))
	}
	c.Workload = describeLoad(o.workload, o.chosen, *load)
	c.Deployment = o.deployment()
	if err := c.Validate(); err != nil {
		return err
	}
	// The stored set's deployment joins these lines; longer than a set's
	// file allows, it would export to a file baselines import refuses.
	if d := c.Result("", nil).Deployment; len(d) > baselines.MaxTextBytes {
		return fmt.Errorf("the report's deployment table (--workers, --mode-switch-cmd, --deployment-note) is %d bytes long: at most %d", len(d), baselines.MaxTextBytes)
	}
	return nil
}

// deployment describes what the sweep measures, for the report.
func (o *sweepOptions) deployment() []baselines.Param {
	var p []baselines.Param
	add := func(k, v string) { p = append(p, baselines.Param{Name: k, Value: v}) }
	add("Model", o.serve.Model)
	switch {
	case o.virtual:
		p = append(p, simulate.Deployment(o.simConfig())...)
	case o.serve.Target != "":
		add("Target", o.serve.Target+" (external router)")
		if o.switchCmd != "" {
			add("Mode switch", "`"+o.switchCmd+"`")
		}
	case len(o.serve.Workers) > 0:
		add("Workers", "real workers: "+strings.Join(o.serve.Workers, "; "))
		add("Frontend", "kvlens router proxy")
		add("KV block size", fmt.Sprintf("%d tokens", o.serve.Router.BlockSize))
	default:
		prof := o.serve.SimProfile
		add("GPU", fmt.Sprintf("%dx simulated worker (kvlens sim)", o.serve.SimWorkers))
		add("Workers", fmt.Sprintf("%d simulated workers on loopback HTTP", o.serve.SimWorkers))
		add("Engine profile", fmt.Sprintf("%s: max batch %d, max tokens %d, block size %d, %d KV blocks", prof.Name, prof.MaxBatchSize, prof.MaxNumTokens, prof.BlockSize, prof.KVBlocks))
		add("Frontend", "kvlens router proxy")
	}
	add("Max tokens", strconv.Itoa(o.serve.Load.MaxTokens))
	if o.note != "" {
		add("Note", o.note)
	}
	return p
}

// sweepTarget drives the demo's load generator, and switches modes on its
// router or, with --mode-switch-cmd, on an external one.
type sweepTarget struct {
	*loadgen.Generator
	proxy        *router.Proxy
	switchCmd    string
	readyURL     string
	readyTimeout time.Duration
	log          io.Writer
}

func (t *sweepTarget) SetMode(ctx context.Context, mode string) error {
	if t.readyURL != "" { // an external router
		if t.switchCmd == "" {
			return nil // one mode, as the router is configured
		}
		if err := baselines.SwitchCommand(ctx, t.switchCmd, mode, t.log); err != nil {
			return err
		}
		return baselines.WaitReady(ctx, clock.Real, t.readyURL, 2*time.Second, t.readyTimeout)
	}
	p, err := router.NewPolicy(mode)
	if err != nil {
		return err
	}
	t.proxy.SetPolicy(p)
	return nil
}

// start brings up what the sweep drives: the pipeline in virtual time, or
// the demo (fleet, router, dashboard) in real time. It returns the target,
// its clock (nil for the wall clock), a description of the sweep for its
// first line of output, and a function that stops it all.
func (o *sweepOptions) start() (baselines.Target, clock.Clock, string, func(), error) {
	c := &o.sweep
	if o.virtual {
		cfg := o.simConfig()
		cfg.Policy = c.Modes[0]
		cfg.Load.Concurrency = c.Levels[0]
		p, err := simulate.New(cfg)
		if err != nil {
			return nil, nil, "", nil, err
		}
		about := fmt.Sprintf("%s × %v, %s warmup + %s measure per level, simulated in virtual time (%d × %s, seed %d)",
			strings.Join(c.Modes, ","), c.Levels, c.Warmup, c.Measure, cfg.Workers, cfg.Profile.Name, cfg.Seed)
		return p.Target(), p.Loop, about, func() { p.Close() }, nil
	}
	return o.startDemo()
}

// execute runs (or resumes) the sweep on target, stores its set and writes
// its reports.
func (o *sweepOptions) execute(ctx context.Context, db *store.DB, run store.Run, target baselines.Target, clk clock.Clock) error {
	c := &o.sweep
	done, err := db.RunLevels(ctx, run.ID)
	if err != nil {
		return err
	}
	progress, finish := progressReporter(os.Stderr)
	if o.virtual {
		// Phases start in virtual time; the bar moves by whole phases.
		inner := progress
		progress = func(p baselines.Progress) { p.PhaseLength = 0; inner(p) }
	}
	sw := baselines.Sweep{
		Config: *c, Target: target, Clock: clk, Done: done, OnProgress: progress,
		Save: func(ctx context.Context, rl baselines.RunLevel) error {
			if rl.KVHitRate == nil {
				fmt.Fprintf(os.Stderr, "kvlens sweep: %s at %d: the workers report no cached tokens (vLLM: --enable-prompt-tokens-details), so this level's KV hit rate is stored as unknown\n", rl.Mode, rl.Concurrency)
			}
			return db.SaveRunLevel(ctx, run.ID, rl)
		},
	}
	results, err := sw.Run(ctx)
	finish()
	if err != nil {
		// The run stays resumable: its finished levels are stored.
		reason := err.Error()
		if errors.Is(err, context.Canceled) {
			reason = "interrupted"
		}
		db.FinishRun(context.Background(), run.ID, store.RunFailed, reason, 0)
		// Ctrl-C is said as the store says it, not as "context canceled".
		return fmt.Errorf("%s; %d of %d levels are stored: continue with kvlens sweep --resume --db %s", reason, len(results), run.Total, o.db)
	}

	source := fmt.Sprintf("kvlens sweep run %d", run.ID)
	if o.virtual {
		source += ", simulated in virtual time"
	}
	set := c.Result(source, results)
	// A run killed between storing its set and marking itself done stores
	// the same set again when resumed.
	old, err := db.Set(ctx, set.Name)
	setID, err := db.SaveSet(ctx, &set, err == nil && old.Source == source)
	if err != nil {
		return err
	}
	if err := db.FinishRun(ctx, run.ID, store.RunDone, "", setID); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kvlens sweep: stored baseline set %q in %s\n", set.Name, o.db)
	files, err := writeOutputs(o.out, freeBase(o.out, fmt.Sprintf("kvlens-sweep-%d", run.ID), ".json", ".md", ".png"), &set, *c)
	for _, f := range files {
		fmt.Fprintf(stdout, "kvlens sweep: wrote %s\n", f)
	}
	return err
}

// startDemo starts the demo (fleet, router, dashboard) that a real-time
// sweep drives, and returns it as the sweep's target.
func (o *sweepOptions) startDemo() (baselines.Target, clock.Clock, string, func(), error) {
	c := &o.sweep
	serve := o.serve
	serve.NoStart = true
	serve.Stdout = stdout
	serve.AB = nil // a sweep drives one fleet through its modes
	serve.Load.Concurrency = c.Levels[0]
	serve.Dashboard.SliderMin, serve.Dashboard.SliderMax, serve.Dashboard.SliderStep = slices.Min(c.Levels), slices.Max(c.Levels), 1
	serve.Dashboard.SLOTTFT, serve.Dashboard.SLOTPOT = c.SLO.TTFT, c.SLO.TPOT
	var err error
	if serve.Policy, err = o.firstPolicy(); err != nil {
		return nil, nil, "", nil, err
	}
	d, err := demo.Start(serve)
	if err != nil {
		return nil, nil, "", nil, err
	}
	// Start takes the model real workers serve when --model is not given:
	// the report names the one measured.
	for i, p := range c.Deployment {
		if p.Name == "Model" {
			c.Deployment[i].Value = d.Model
		}
	}
	o.serve.Model = d.Model
	closeDemo := func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		d.Close(shutdown)
	}
	about := fmt.Sprintf("%s × %v, %s warmup + %s measure per level; dashboard on %s",
		strings.Join(c.Modes, ","), c.Levels, c.Warmup, c.Measure, d.URL)
	target := &sweepTarget{Generator: d.Gen, proxy: d.Proxy, switchCmd: o.switchCmd, readyTimeout: o.readyTimeout, log: os.Stderr}
	if o.serve.Target != "" {
		target.readyURL = o.serve.Target
	}
	return target, nil, about, closeDemo, nil
}

// simConfig is the simulated deployment of a --virtual sweep.
func (o *sweepOptions) simConfig() simulate.Config {
	load := o.serve.Load
	load.SLO = loadgen.SLO{TTFT: o.sweep.SLO.TTFT, TPOT: o.sweep.SLO.TPOT}
	return simulate.Config{
		Profile: o.serve.SimProfile, Workers: o.serve.SimWorkers, Router: o.serve.Router,
		Load: load, Seed: o.serve.Load.Seed,
	}
}

// firstPolicy is the router's initial policy: the sweep's first mode when
// kvlens routes, round-robin when an external router does.
func (o *sweepOptions) firstPolicy() (string, error) {
	if o.serve.Target != "" {
		return "round_robin", nil
	}
	_, err := router.NewPolicy(o.sweep.Modes[0])
	return o.sweep.Modes[0], err
}

// writeOutputs writes the reference JSON, the Markdown report and the chart.
func writeOutputs(dir, base string, set *baselines.Set, c baselines.SweepConfig) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	format := baselines.FormatDual
	if len(set.Modes()) == 1 {
		format = baselines.FormatSingle
	}
	data, err := baselines.Encode(set, format)
	if err != nil {
		return nil, err
	}
	var files []string
	write := func(ext string, f func(io.Writer) error) error {
		path := filepath.Join(dir, base+ext)
		file, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := f(file); err != nil {
			file.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := file.Close(); err != nil {
			return err
		}
		files = append(files, path)
		return nil
	}
	if err := write(".json", func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return files, err
	}
	if err := write(".md", func(w io.Writer) error {
		return baselines.WriteMarkdown(w, baselines.Report{Set: set, Config: c})
	}); err != nil {
		return files, err
	}
	err = write(".png", func(w io.Writer) error { return baselines.WriteChart(w, set, c.SLO) })
	return files, err
}

// progressReporter shows a sweep's progress: a bar over the planned time on
// a terminal, a line per phase otherwise. finish ends the display.
func progressReporter(w *os.File) (report func(baselines.Progress), finish func()) {
	describe := func(p baselines.Progress) string {
		if p.Phase == baselines.PhaseDone {
			return fmt.Sprintf("%d/%d levels done", p.Finished, p.Steps)
		}
		short, _ := baselines.Label(p.Step.Mode)
		s := fmt.Sprintf("[%d/%d] %s @ %d: %s", p.Finished+1, p.Steps, short, p.Step.Concurrency, p.Phase)
		if p.Phase == baselines.PhaseMeasure && p.Snapshot > 0 {
			s += fmt.Sprintf(" (snapshot %d)", p.Snapshot)
		}
		return s
	}
	if !term.IsTerminal(int(w.Fd())) {
		return func(p baselines.Progress) {
			if p.Phase == baselines.PhaseMeasure && p.Snapshot == 0 {
				return // announced by the snapshots
			}
			fmt.Fprintf(w, "kvlens sweep: %s\n", describe(p))
		}, func() {}
	}
	var (
		mu   sync.Mutex
		last baselines.Progress
		bar  *progressbar.ProgressBar
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	position := func() int64 {
		pos := last.Elapsed
		if last.PhaseLength > 0 {
			pos += min(time.Since(last.PhaseStart), last.PhaseLength)
		}
		return int64(pos / time.Second)
	}
	report = func(p baselines.Progress) {
		mu.Lock()
		defer mu.Unlock()
		last = p
		if bar == nil {
			bar = progressbar.NewOptions64(int64(p.Planned/time.Second),
				progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30),
				progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
				progressbar.OptionSetItsString("s"), progressbar.OptionThrottle(200*time.Millisecond))
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						mu.Lock()
						bar.Set64(position())
						mu.Unlock()
					}
				}
			}()
		}
		bar.Describe(describe(p))
		bar.Set64(position())
	}
	return report, func() {
		close(stop)
		wg.Wait()
		if bar != nil {
			bar.Finish()
			fmt.Fprintln(w)
		}
	}
}

// freeSetName returns name, or "name (2)", "name (3)", … when the store
// already holds a set of that name.
func freeSetName(ctx context.Context, db *store.DB, name string) string {
	free := name
	for i := 2; ; i++ {
		if _, err := db.Set(ctx, free); err != nil {
			return free
		}
		free = fmt.Sprintf("%s (%d)", name, i)
	}
}
