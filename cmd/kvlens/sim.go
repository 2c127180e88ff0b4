package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/bench"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tokenizer"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

const simUsage = `Usage:
  kvlens sim [flags]                    run a fleet of simulated workers
  kvlens sim bench offline [flags]      offline throughput, in virtual time
  kvlens sim bench multiturn [flags]    closed-loop multi-turn chat over workers, in virtual time
  kvlens sim bench cpu [flags]          CPU cost of a real-time fleet under streaming load
  kvlens sim calibrate [flags]          the simulated fleet against the seeds' measured curves, in virtual time

Run any of them with -h for its flags.
`

// simCmd runs `kvlens sim`.
func simCmd(args []string) int {
	if len(args) > 0 && args[0] == "bench" {
		return simBench(args[1:])
	}
	if len(args) > 0 && args[0] == "calibrate" {
		return simCalibrate(args[1:])
	}
	cfg := sim.FleetConfig{Count: 3, BasePort: 8001}
	profile := sim.DefaultProfile
	var acc accessFlags
	fs := simFlags(&cfg, &profile, &acc)
	encoding := fs.String("tokenizer", "cl100k", "the workers' tokenizer: cl100k (the router's embedded one), o200k (a foreign engine, as a real model's would be), or PATH: a model's own tokenizer and chat template, a directory holding tokenizer.json and tokenizer_config.json, or the path of tokenizer.json")
	template := fs.String("chat-template", "", "the workers' chat template with a built-in --tokenizer: kvlens (the router's embedded one, the default) or llama3 (a foreign engine)")
	details := fs.Bool("prompt-tokens-details", true, "report cached prompt tokens in usage (prompt_tokens_details), as vLLM does with --enable-prompt-tokens-details; false answers as vLLM's default, with none")
	maxModelLen := fs.Int("max-model-len", 0, "longest prompt plus output a request may ask for, in tokens; longer prompts are refused with 400 and request bodies are capped from it (default: the profile's)")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	rule, source, err := acc.simRule(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim: %v\n", err)
		return 2
	}
	cfg.Access = rule
	if err := checkModel("--model", cfg.Model); err != nil {
		refuse(fs, err)
		return 2
	}
	if cfg.EventsBind != "" && cfg.EventsConnect != "" {
		fmt.Fprintln(os.Stderr, "kvlens sim: give --events-bind or --events-connect, not both")
		return 2
	}
	if cfg.EventsReplay != "" && cfg.EventsBind == "" && cfg.EventsConnect == "" {
		// Without a publisher there is nothing to replay: the flag would do
		// nothing, silently.
		fmt.Fprintln(os.Stderr, "kvlens sim: --events-replay replays published KV events: give --events-bind or --events-connect too")
		return 2
	}
	if err := cfg.Faults.Check(); err != nil {
		// The fields are named as PUT /admin/faults names them; here the
		// flags set them.
		flags := strings.NewReplacer("fault rate error_503", "--fault-503", "fault rate error_429", "--fault-429",
			"fault rate error_500", "--fault-500", "fault rate stream_cut", "--fault-cut", "slowdown", "--slowdown", "stall", "--stall")
		fmt.Fprintf(os.Stderr, "kvlens sim: %s\n", flags.Replace(strings.TrimPrefix(err.Error(), "sim: ")))
		return 2
	}
	if len(cfg.Ports) > 0 && len(cfg.Ports) != cfg.Count {
		cfg.Count = len(cfg.Ports)
	}
	// Each was found as the workers started, with status 1, in words that
	// named no flag ("sim: worker 0: events endpoint \"x\" is not
	// tcp://host:port").
	for _, e := range []struct {
		flag, endpoint string
		perWorker      bool // worker i takes the port plus i
	}{
		{"--events-bind", cfg.EventsBind, true},
		{"--events-connect", cfg.EventsConnect, cfg.EventsConnectEach},
		{"--events-replay", cfg.EventsReplay, true},
	} {
		if err := checkEventsEndpoint(e.flag, e.endpoint, e.perWorker, cfg.Count); err != nil {
			refuse(fs, err)
			return 2
		}
	}
	p, err := loadProfile(profile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim: --profile: %v\n", err)
		return 2
	}
	if *maxModelLen != 0 {
		p.MaxModelLen = *maxModelLen
		if err := p.Validate(); err != nil || *maxModelLen < 1 {
			fmt.Fprintf(os.Stderr, "kvlens sim: --max-model-len %d: want 1 to what the profile's KV cache holds (%d tokens)\n", *maxModelLen, p.KVBlocks*p.BlockSize)
			return 2
		}
	}
	cfg.Profile, cfg.NoCachedTokens = p, !*details
	if err := sim.CheckFleet(cfg.Count, p); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim: --count: %s\n", strings.TrimPrefix(err.Error(), "sim: "))
		return 2
	}
	// After the count's own check: --count 100000 was blamed on
	// --base-port, its ports running past 65535.
	if last := cfg.BasePort + cfg.Count - 1; len(cfg.Ports) == 0 && (cfg.BasePort < 0 || last > 65535) {
		fmt.Fprintf(os.Stderr, "kvlens sim: --base-port %d: worker ports must lie from 1 to 65535 (0 picks free ones)\n", cfg.BasePort)
		return 2
	}
	if cfg.Tokenizer, err = tokenizer.Open(*encoding, *template); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, err := sim.StartFleet(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "kvlens sim: %d workers, profile %s, model %s, tokenizer %s\n", len(f.URLs), p.Name, firstNonEmpty(cfg.Model, p.Model), cfg.Tokenizer)
	for i, u := range f.URLs {
		fmt.Fprintf(stdout, "kvlens sim: worker %d on %s (OpenAI API at %s/v1, metrics at %s/metrics, faults at %s/admin/faults)\n", i, u, u, u, u)
		if i < len(f.EventEndpoints) {
			fmt.Fprintf(stdout, "kvlens sim: worker %d publishes KV events on %s\n", i, f.EventEndpoints[i])
		}
		if i < len(f.ReplayEndpoints) && f.ReplayEndpoints[i] != "" {
			fmt.Fprintf(stdout, "kvlens sim: worker %d answers replay requests on %s\n", i, f.ReplayEndpoints[i])
		}
	}
	fmt.Fprintln(stdout, "kvlens sim: "+simAccessLine(source))
	<-ctx.Done()
	fmt.Fprintln(stdout, "kvlens sim: shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := f.Close(shutdown); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim: shutdown: %v\n", err)
	}
	return 0
}

// simFlags binds the flags of `kvlens sim` to cfg and profile (a built-in
// profile name or a JSON file), and who may change its faults to acc.
func simFlags(cfg *sim.FleetConfig, profile *string, acc *accessFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), simUsage+"\nFlags of kvlens sim:\n"); fs.PrintDefaults() }
	fs.IntVar(&cfg.Count, "count", cfg.Count, "number of workers")
	fs.StringVar(profile, "profile", *profile, "engine profile: a built-in name ("+strings.Join(sim.Profiles(), ", ")+") or a JSON file")
	fs.StringVar(&cfg.Host, "host", "127.0.0.1", "address the workers listen on")
	fs.IntVar(&cfg.BasePort, "base-port", cfg.BasePort, "worker i listens on base-port+i; 0 picks free ports")
	fs.Func("ports", "comma-separated ports, one per worker (overrides --base-port and --count)", func(s string) (err error) {
		cfg.Ports, err = parsePorts(s)
		return err
	})
	fs.StringVar(&cfg.Model, "model", "", "model name to serve (default: the profile's)")
	faultFlags(fs, &cfg.Faults)
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of output lengths and injected faults")
	fs.StringVar(&cfg.EventsBind, "events-bind", "", "publish KV events on a ZMQ PUB socket bound here, vLLM-style, such as tcp://*:5557; worker i binds the port plus i")
	fs.StringVar(&cfg.EventsConnect, "events-connect", "", "publish KV events by dialing this ZMQ endpoint (a router that binds), each worker under its name as topic")
	fs.BoolVar(&cfg.EventsConnectEach, "events-connect-each", false, "with --events-connect, worker i dials the port plus i, as vLLM offsets by data-parallel rank (for a router that binds one port per worker)")
	fs.StringVar(&cfg.EventsReplay, "events-replay", "", "also serve vLLM's replay socket (ROUTER) bound here, such as tcp://*:5600; worker i binds the port plus i")
	acc.register(fs, "change faults (PUT /admin/faults) from another machine", "none: faults change from this machine only")
	return fs
}

// checkEventsEndpoint checks a ZMQ endpoint of sim's flags: tcp://HOST:PORT,
// where each of workers takes the port plus its index when perWorker. A
// connect endpoint of another transport (ipc://) is the publisher's to
// check.
func checkEventsEndpoint(flag, endpoint string, perWorker bool, workers int) error {
	rest, tcp := strings.CutPrefix(endpoint, "tcp://")
	if endpoint == "" || (!tcp && flag == "--events-connect" && !perWorker && strings.Contains(endpoint, "://")) {
		return nil
	}
	example := "tcp://*:5557"
	if flag == "--events-connect" {
		example = "tcp://router:5557"
	}
	want := fmt.Errorf("%s %q: want tcp://HOST:PORT, such as %s", flag, endpoint, example)
	if !tcp {
		return want
	}
	_, port, err := net.SplitHostPort(rest)
	if err != nil {
		return want
	}
	n, err := strconv.Atoi(port)
	switch {
	case err != nil || n < 0 || n > 65535:
		return want
	case perWorker && n > 0 && n+workers-1 > 65535:
		return fmt.Errorf("%s %q: worker i takes port %d plus i, and %d workers run past 65535", flag, endpoint, n, workers)
	}
	return nil
}

// parsePorts reads --ports: one port a worker, 0 for a free one, none
// twice.
func parsePorts(s string) ([]int, error) {
	var ports []int
	seen := map[int]bool{}
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("%q is not a port", p)
		}
		if n != 0 && seen[n] {
			return nil, fmt.Errorf("port %d is given twice: each worker needs its own", n)
		}
		seen[n] = true
		ports = append(ports, n)
	}
	return ports, nil
}

// simRule is the workers' access rule for PUT /admin/faults: the operator
// token from the flags or the environment, if any; changes from this
// machine are always allowed.
func (a *accessFlags) simRule(getenv func(string) string) (access.Rule, string, error) {
	tok, source, err := access.LoadToken(a.token, a.tokenFile, getenv)
	if err != nil {
		return access.Rule{}, "", err
	}
	hosts, err := access.MachineHosts(a.allowHosts...)
	if err != nil {
		return access.Rule{}, "", err
	}
	return access.Rule{Token: tok, Hosts: hosts}, source, nil
}

// simAccessLine is the startup line that says who may change faults.
func simAccessLine(source string) string {
	if source == "" {
		return "fault changes (PUT /admin/faults) only from this machine: set $" + access.TokenEnv + " or --control-token-file to allow them elsewhere with Authorization: Bearer <token>"
	}
	return "fault changes (PUT /admin/faults) from this machine, or with Authorization: Bearer <operator token from " + source + ">"
}

func faultFlags(fs *flag.FlagSet, f *sim.Faults) {
	fs.Float64Var(&f.Error503, "fault-503", 0, "fraction of requests answered 503")
	fs.Float64Var(&f.Error429, "fault-429", 0, "fraction of requests answered 429")
	fs.Float64Var(&f.Error500, "fault-500", 0, "fraction of requests answered 500")
	fs.Float64Var(&f.StreamCut, "fault-cut", 0, "fraction of streams cut mid-answer")
	fs.Float64Var(&f.Slowdown, "slowdown", 1, "multiply every engine step's duration by this factor, from 0.01 to 1000")
	fs.Func("stall", "pause every engine for this long at start, such as 10s (at most 24h)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err == nil && d > maxStall {
			// A stall of a million hours is a typo that leaves every
			// engine silent for good.
			err = fmt.Errorf("want at most %s", maxStall)
		}
		f.Stall = sim.Duration(d)
		return err
	})
}

// maxStall bounds sim's --stall.
const maxStall = 24 * time.Hour

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func simBench(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, simUsage)
		return 2
	}
	switch args[0] {
	case "offline":
		return benchOffline(args[1:])
	case "multiturn":
		return benchMultiTurn(args[1:])
	case "cpu":
		return benchCPU(args[1:])
	case "cpu-load":
		return benchCPULoad(args[1:])
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, simUsage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "kvlens sim bench: unknown benchmark %q\n%s", args[0], simUsage)
	return 2
}

func parseBench(fs *flag.FlagSet, args []string) (int, bool) { return parseFlags(fs, args) }

// nvidiaH200 are NVIDIA's published TensorRT-LLM offline figures for H200
// TP1, Llama 3.1 70B FP8 (perf-model.md), output tokens/s.
var nvidiaH200 = map[string]string{"1000/1000": "2,823-2,909", "5000/500": "560-566", "2048/2048": "1,914", "20000/2000": "280"}

func benchOffline(args []string) int {
	fs := flag.NewFlagSet("sim bench offline", flag.ContinueOnError)
	profile := fs.String("profile", sim.DefaultProfile, "engine profile: a built-in name or a JSON file")
	cases := fs.String("cases", "1000/1000,5000/500,2048/2048", "comma-separated ISL/OSL pairs")
	requests := fs.Int("requests", 3000, "requests per case")
	conc := fs.Int("concurrency", 0, "requests in flight; 0 sizes it to the KV cache (the batch limit)")
	if code, ok := parseBench(fs, args); !ok {
		return code
	}
	p, err := loadProfile(*profile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim bench offline: --profile: %v\n", err)
		return 2
	}
	// --requests 0 and less ran 3000 and a negative --concurrency sized it
	// to the KV cache, both without a word; a billion requests ran for
	// hours with nothing on the screen.
	switch {
	case *requests < 1 || *requests > maxOfflineRequests:
		fmt.Fprintf(os.Stderr, "kvlens sim bench offline: --requests %d: want 1 to %d\n", *requests, maxOfflineRequests)
		return 2
	case *conc < 0 || *conc > maxOfflineConcurrency:
		fmt.Fprintf(os.Stderr, "kvlens sim bench offline: --concurrency %d: want 0 (sized to the KV cache) to %d\n", *conc, maxOfflineConcurrency)
		return 2
	}
	// Every case is checked before the first runs: a bad one after it
	// was found once the cases before it had run, and their rows were
	// thrown away.
	pairs, err := offlineCases(*cases, p)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim bench offline: --cases: %v\n", err)
		return 2
	}
	progress := newOfflineProgress(os.Stderr, term.IsTerminal(int(os.Stderr.Fd())), len(pairs), *requests)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "ISL/OSL\tconcurrency\trequests\tvirtual time\toutput tok/s\tNVIDIA (H200)\t\n")
	for i, c := range pairs {
		in, out := c[0], c[1]
		progress.start(i, in, out)
		r, err := sim.Offline(sim.OfflineConfig{Profile: p, ISL: in, OSL: out, Requests: *requests, Concurrency: *conc, OnFinish: progress.finished})
		if err != nil {
			progress.finish()
			fmt.Fprintf(os.Stderr, "kvlens sim bench offline: %v\n", err)
			return 1
		}
		progress.done()
		ref := nvidiaH200[fmt.Sprintf("%d/%d", in, out)]
		if ref == "" || p.Name != sim.DefaultProfile {
			ref = "-"
		}
		fmt.Fprintf(tw, "%d/%d\t%d\t%d\t%v\t%.0f\t%s\t\n", in, out, r.Concurrency, r.Requests, r.Elapsed.Round(time.Second), r.OutputTokensPerSec, ref)
	}
	progress.finish()
	tw.Flush()
	return 0
}

// offlineProgress shows sim bench offline's progress on w, standard error,
// so that standard output holds the table alone. On a terminal it is a
// bar over every case's requests; in a log, where a bar's carriage
// returns pile up, a line a case, as bench routing gives a line a run.
type offlineProgress struct {
	w               io.Writer
	bar             *progressbar.ProgressBar // nil in a log
	cases, requests int
	i, in, out      int // the case running: its index, ISL and OSL
	began           time.Time
}

func newOfflineProgress(w io.Writer, terminal bool, cases, requests int) *offlineProgress {
	p := &offlineProgress{w: w, cases: cases, requests: requests}
	if terminal {
		p.bar = progressbar.NewOptions(cases*requests, progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowCount(), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSetItsString("requests"))
	}
	return p
}

// start begins case i, of in/out tokens.
func (p *offlineProgress) start(i, in, out int) {
	p.i, p.in, p.out, p.began = i, in, out, time.Now()
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("[%d/%d] %d/%d", i+1, p.cases, in, out))
		p.bar.Set(i * p.requests)
	}
}

// finished is sim.OfflineConfig's OnFinish: n of the case's requests are done.
func (p *offlineProgress) finished(n int) {
	if p.bar != nil {
		p.bar.Set(p.i*p.requests + n)
	}
}

// done ends the case that runs.
func (p *offlineProgress) done() {
	if p.bar == nil {
		fmt.Fprintf(p.w, "kvlens sim bench offline: [%d/%d] %d/%d: %d requests in %s of wall time\n",
			p.i+1, p.cases, p.in, p.out, p.requests, time.Since(p.began).Round(100*time.Millisecond))
	}
}

// finish ends the display.
func (p *offlineProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

// offlineCases reads --cases: ISL/OSL pairs, each a request the profile's
// KV cache holds whole. A longer one failed with status 1, in the words of
// the profile's check ("cannot hold one max_model_len sequence").
func offlineCases(s string, p sim.Profile) ([][2]int, error) {
	var pairs [][2]int
	for _, c := range strings.Split(s, ",") {
		isl, osl, ok := strings.Cut(strings.TrimSpace(c), "/")
		in, err1 := strconv.Atoi(isl)
		out, err2 := strconv.Atoi(osl)
		if !ok || err1 != nil || err2 != nil || in < 1 || out < 1 {
			return nil, fmt.Errorf("%q is not ISL/OSL, such as 1000/1000", c)
		}
		if kv := p.KVBlocks * p.BlockSize; in > kv || out > kv-in {
			return nil, fmt.Errorf("%d/%d: prompt and answer together must fit the KV cache of profile %s, %d tokens", in, out, p.Name, kv)
		}
		pairs = append(pairs, [2]int{in, out})
	}
	return pairs, nil
}

// maxOfflineRequests and maxOfflineConcurrency bound sim bench offline: a
// million requests of 1000/1000 take minutes, and the engine's batch is
// at most 65536 sequences.
const (
	maxOfflineRequests    = 1_000_000
	maxOfflineConcurrency = 65536
)

// seed000RR is seed 000's round-robin column: TTFT p50 ms, TPOT p50 ms,
// output tokens/s and KV hit rate %, by concurrency.
var seed000RR = map[int][4]float64{
	40: {271.4, 25.3, 1591.1, 99.7}, 50: {255.5, 26.1, 1902.4, 94.9}, 60: {280.5, 27.7, 2147.9, 92.0},
	70: {284.2, 30.1, 2309.5, 89.2}, 80: {310.2, 30.7, 2508.0, 82.2}, 90: {320.2, 30.7, 2522.8, 89.0},
	100: {353.8, 39.2, 2521.0, 87.9}, 110: {348.0, 44.7, 2599.6, 88.7}, 120: {379.3, 44.3, 2648.4, 85.5},
}

func benchMultiTurn(args []string) int {
	fs := flag.NewFlagSet("sim bench multiturn", flag.ContinueOnError)
	profile := fs.String("profile", sim.DefaultProfile, "engine profile: a built-in name or a JSON file")
	cfg := sim.MultiTurnConfig{Workers: 3, MaxTokens: 1024, MinTurns: 3, MaxTurns: 5, StartRate: 10, Warmup: 2 * time.Minute, Measure: 10 * time.Minute, Seed: 1}
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "workers, routed round-robin")
	levels := fs.String("concurrency", "40,120", "numbers of simultaneous conversations, one run each: a list, a range 40-120 or a range with a step 40-120/40")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", cfg.MaxTokens, "max_tokens of every request")
	fs.IntVar(&cfg.MinTurns, "min-turns", cfg.MinTurns, "fewest turns of a conversation")
	fs.IntVar(&cfg.MaxTurns, "max-turns", cfg.MaxTurns, "most turns of a conversation")
	fs.Float64Var(&cfg.StartRate, "start-rate", cfg.StartRate, "conversations started per second at most")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "simulated time before measuring")
	fs.DurationVar(&cfg.Measure, "measure", cfg.Measure, "simulated time measured")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of starters, turns and output lengths")
	fs.StringVar(&cfg.FollowUp, "follow-up", cfg.FollowUp, "every follow-up question; empty asks varied ones")
	fs.BoolVar(&cfg.Greedy, "greedy", cfg.Greedy, "decode greedily: one prompt, one answer")
	if code, ok := parseBench(fs, args); !ok {
		return code
	}
	p, err := loadProfile(*profile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim bench multiturn: --profile: %v\n", err)
		return 2
	}
	cfg.Profile = p
	for _, s := range loadgen.BuiltinStarters() {
		cfg.Starters = append(cfg.Starters, sim.Starter{Topic: s.Topic, Text: s.Text})
	}
	// Checked here, naming the flags, and every level before the first
	// runs: the benchmark's own check said "needs workers, concurrency,
	// starters and 1 <= min turns <= max turns" with status 1, and a bad
	// level was found after the levels before it had run.
	conc, err := bench.ParseList(*levels, 1, loadgen.MaxConcurrency)
	usage := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "kvlens sim bench multiturn: "+format+"\n", a...)
		return 2
	}
	switch {
	case err != nil:
		return usage("--concurrency: %v", err)
	case cfg.Workers < 1 || cfg.Workers > sim.MaxWorkers:
		return usage("--workers %d: want 1 to %d", cfg.Workers, sim.MaxWorkers)
	case cfg.MinTurns < 1 || cfg.MaxTurns < cfg.MinTurns || cfg.MaxTurns > 100:
		return usage("--min-turns %d and --max-turns %d: want 1 <= min <= max <= 100", cfg.MinTurns, cfg.MaxTurns)
	case cfg.MaxTokens < 1:
		return usage("--max-tokens %d: want at least 1", cfg.MaxTokens)
	case !(cfg.StartRate >= 0) || math.IsInf(cfg.StartRate, 0):
		return usage("--start-rate %g: want 0 (unpaced) or a finite rate", cfg.StartRate)
	case cfg.Warmup < 0:
		return usage("--warmup %s: want 0 or more", cfg.Warmup)
	}
	if err := checkMeasure(cfg.Measure); err != nil {
		return usage("%v", err)
	}
	// The first request failed with status 1, in the workers' words.
	if err := checkSimTokens(cfg.MaxTokens, p); err != nil {
		return usage("%v", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "concurrency\tTTFT p50 ms\tseed RR\tTPOT p50 ms\tseed RR\toutput tok/s\tseed RR\thit rate\tseed RR\tTTFT p95 ms\tnew tokens/req\tevicted blocks\trequests\t\n")
	for _, c := range conc {
		cfg.Concurrency = c
		r, err := sim.MultiTurn(cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kvlens sim bench multiturn: %v\n", err)
			return 1
		}
		ref := [4]string{"-", "-", "-", "-"}
		if s, ok := seed000RR[c]; ok && p.Name == sim.DefaultProfile && cfg.Workers == 3 {
			ref = [4]string{fmt.Sprintf("%.0f", s[0]), fmt.Sprintf("%.1f", s[1]), fmt.Sprintf("%.0f", s[2]), fmt.Sprintf("%.1f%%", s[3])}
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%.1f\t%s\t%.0f\t%s\t%.1f%%\t%s\t%.0f\t%.0f\t%d\t%d\t\n", c,
			ms(r.TTFTp50), ref[0], ms(r.TPOTp50), ref[1], r.OutputTokensPerSec, ref[2], 100*r.HitRate, ref[3],
			ms(r.TTFTp95), r.MeanNewTokens, r.Evicted, r.Requests)
	}
	tw.Flush()
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// maxCPUStreams bounds sim bench cpu's streams a worker: 64 fill a
// worker's batch, and ten thousand are past any batch a profile allows.
const maxCPUStreams = 10_000

// benchCPU runs a real-time fleet in this process and its streaming clients
// in a child process, so that this process's CPU time is the fleet's alone.
func benchCPU(args []string) int {
	fs := flag.NewFlagSet("sim bench cpu", flag.ContinueOnError)
	workers := fs.Int("workers", 3, "workers in the fleet")
	perWorker := fs.Int("streams", 64, "concurrent streams per worker")
	dur := fs.Duration("duration", 20*time.Second, "how long to measure, after the streams are up")
	if code, ok := parseBench(fs, args); !ok {
		return code
	}
	switch {
	case *workers < 1 || *workers > sim.MaxWorkers:
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: --workers %d: want 1 to %d\n", *workers, sim.MaxWorkers)
		return 2
	case *perWorker < 1 || *perWorker > maxCPUStreams:
		// A goroutine and a connection each: a hundred million ran the
		// process out of memory.
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: --streams %d: want 1 to %d streams a worker\n", *perWorker, maxCPUStreams)
		return 2
	case *dur < time.Second:
		// A shorter window measures nothing: it printed a mean of NaN.
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: --duration %v: want at least 1s\n", *dur)
		return 2
	}
	f, err := sim.StartFleet(sim.FleetConfig{Count: *workers})
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: %v\n", err)
		return 1
	}
	defer f.Close(context.Background())
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: %v\n", err)
		return 1
	}
	warm := 10 * time.Second
	load := exec.Command(self, "sim", "bench", "cpu-load", "-urls", strings.Join(f.URLs, ","),
		"-streams", strconv.Itoa(*perWorker), "-duration", (warm + *dur).String())
	load.Stderr = os.Stderr
	if err := load.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: start clients: %v\n", err)
		return 1
	}
	// It prints nothing else until its end, 30 s later by default.
	fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: %d streams on each of %d workers; %v for the batches to fill, then %v measured\n", *perWorker, *workers, warm, *dur)
	time.Sleep(warm) // streams start and the batches fill
	u0, wall0 := cpuTime(syscall.RUSAGE_SELF), time.Now()
	var running, samples float64
	tick := time.NewTicker(time.Second)
	end := time.After(*dur)
measure:
	for {
		select {
		case <-tick.C:
			for _, w := range f.Workers {
				running += float64(w.Runner().Stats().Running)
			}
			samples++
		case <-end:
			break measure
		}
	}
	tick.Stop()
	fleetCPU, wall := cpuTime(syscall.RUSAGE_SELF)-u0, time.Since(wall0)
	if err := load.Wait(); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu: clients: %v\n", err)
		return 1
	}
	clients := cpuTime(syscall.RUSAGE_CHILDREN)
	var gen float64
	for _, w := range f.Workers {
		gen += float64(w.Runner().Stats().GenerationTokens)
	}
	fmt.Fprintf(stdout, "fleet: %d workers, mean %.1f running sequences per worker over %v\n", *workers, running/samples/float64(*workers), wall.Round(time.Second))
	fmt.Fprintf(stdout, "fleet CPU: %.2f s over %.2f s = %.1f%% of one core\n", fleetCPU.Seconds(), wall.Seconds(), 100*fleetCPU.Seconds()/wall.Seconds())
	fmt.Fprintf(stdout, "clients (separate process, whole run of %v): %.2f s CPU\n", (warm + *dur).Round(time.Second), clients.Seconds())
	fmt.Fprintf(stdout, "tokens generated by the fleet over the whole run: %.0f\n", gen)
	return 0
}

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCPULoad is the client side of benchCPU: it keeps streams busy on
// every worker, reading answers as an SSE client does, until its time is up.
func benchCPULoad(args []string) int {
	fs := flag.NewFlagSet("sim bench cpu-load", flag.ContinueOnError)
	urls := fs.String("urls", "", "comma-separated worker URLs")
	streams := fs.Int("streams", 64, "concurrent streams per worker")
	dur := fs.Duration("duration", 30*time.Second, "how long to run")
	if code, ok := parseBench(fs, args); !ok {
		return code
	}
	// sim bench cpu starts it with checked values; by hand, a hundred
	// million streams, a goroutine each, ran the process out of memory,
	// and no URL counted every request as failed.
	switch {
	case strings.TrimSpace(*urls) == "":
		fmt.Fprintln(os.Stderr, "kvlens sim bench cpu-load: --urls: no worker URL given")
		return 2
	case *streams < 1 || *streams > maxCPUStreams:
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu-load: --streams %d: want 1 to %d streams a worker\n", *streams, maxCPUStreams)
		return 2
	case *dur <= 0:
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu-load: --duration %v: want a positive time\n", *dur)
		return 2
	}
	starters := loadgen.BuiltinStarters()
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i, u := range strings.Split(*urls, ",") {
		for j := range *streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ctx.Err() == nil; n++ {
					s := starters[(i+j+n)%len(starters)]
					// A distinct last line per request, so prompts differ
					// after the shared starter, as conversations do.
					msgs := []tokenizer.Message{{Role: "user", Content: fmt.Sprintf("Please explain the following text about %s.\n\n%s\n\n(reader %d-%d-%d)", s.Topic, s.Text, i, j, n)}}
					body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 1024, "stream": true})
					req, _ := http.NewRequestWithContext(ctx, "POST", u+"/v1/chat/completions", strings.NewReader(string(body)))
					resp, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							failed.Add(1)
						}
						continue
					}
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "kvlens sim bench cpu-load: %d requests failed\n", n)
		return 1
	}
	return 0
}
