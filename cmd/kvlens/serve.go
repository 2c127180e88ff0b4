package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/demo"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/store"
	"github.com/kvlens/kvlens/tokenizer"
	"github.com/kvlens/kvlens/tour"
	"github.com/kvlens/kvlens/web"
)

// serveFlags binds serve's flags to cfg, and those that say who may change
// the demo to acc.
func serveFlags(cfg *demo.Config, acc *accessFlags, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address of the dashboard, router proxy and /metrics")
	fs.IntVar(&cfg.SimWorkers, "sim-workers", cfg.SimWorkers, "number of simulated workers to run when --workers is not set")
	fs.Func("sim-profile", "simulated workers' engine profile: a built-in name or a JSON file (default "+sim.DefaultProfile+")", func(s string) error {
		p, err := loadProfile(s)
		cfg.SimProfile = p
		return err
	})
	fs.Func("sim-ports", "pin the simulated workers' ports: PORT serves worker i's HTTP on PORT+i and its KV events on PORT+N+i (N workers); HTTP_PORT,EVENTS_PORT sets both ranges (default: any free ports)", func(s string) error {
		p, err := sim.ParsePortPlan(s)
		cfg.SimPorts = p
		return err
	})
	fs.Func("workers", "comma-separated real OpenAI-compatible workers, each a base URL, name=URL[,events=tcp://host:port|tcp://*:port][,bind=tcp://host:port][,replay=tcp://host:port][,parent0=auto|none|hash][,capacity=N], or dns://service:port[?events=PORT&replay=PORT]; events=tcp://*:P or bind= makes kvlens listen for a publisher that connects (default: run the simulated fleet)", func(s string) error {
		var err error
		cfg.Workers, err = workerList(s)
		return err
	})
	fs.StringVar(&cfg.Target, "target", cfg.Target, "OpenAI base URL the load generator calls, such as a Dynamo frontend's http://host:8000/v1 (default: kvlens's own router)")
	fs.Func("tokenizer", "how the router tokenizes prompts to hash their blocks: auto (embedded for the simulated fleet; for real workers, the first of --tokenizer-dir's files and the embedded tokenizer that matches each worker's /tokenize on a sample chat, else worker), embedded (cl100k and kvlens's chat template, as the simulated workers), worker (each worker's /tokenize), or PATH: the model's own tokenizer and chat template, a directory holding tokenizer.json and tokenizer_config.json, or the path of tokenizer.json (default auto)", func(s string) error {
		switch s {
		case "auto", "embedded", "worker":
			cfg.Tokenizer = s
			return nil
		}
		e, err := tokenizer.LoadFiles(s)
		cfg.Tokenizer, cfg.TokenizerFiles = "files", e
		return err
	})
	fs.Func("tokenizer-dir", "with --tokenizer auto, a directory holding the model's tokenizer.json and tokenizer_config.json (such as the mounted model) to try before the embedded tokenizer", func(s string) error {
		e, err := tokenizer.LoadFiles(s)
		cfg.AutoFiles = e
		return err
	})
	fs.StringVar(&cfg.FrontendMetrics, "frontend-metrics", cfg.FrontendMetrics, "a Dynamo frontend's /metrics URL, such as http://frontend:8000/metrics, to show its KV hit rate and queueing when Dynamo routes")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "model name sent with every request; not given, real workers' or --target's own (GET /v1/models)")
	fs.StringVar(&cfg.Policy, "policy", cfg.Policy, "initial routing policy of the single view (--ab off; giving --policy alone turns A/B off): "+strings.Join(router.Policies, ", "))
	fs.Func("ab", "A/B: lane A's policy and lane B's, such as rr,kv, or off. The simulated fleet runs twice, identically, one fleet per policy, side by side; real workers (--workers) take turns of --ab-turn (default: rr,kv for the simulated fleet, off for real workers and --target)", func(s string) error {
		if strings.TrimSpace(s) == "off" {
			cfg.AB = nil
			return nil
		}
		pair, err := parseModes(s, false)
		if err != nil {
			return fmt.Errorf("%w (want two, such as rr,kv, or off)", err)
		}
		if len(pair) != 2 {
			return fmt.Errorf("want two policies, lane A's and lane B's, such as rr,kv (or off), got %d", len(pair))
		}
		cfg.AB = pair
		return nil
	})
	fs.BoolFunc("tour", "play the built-in tour: a looping script of changes (60, 120 and 180 conversations, a cache reset, a fault), each held for a while with a caption saying what to watch, for an unattended booth; any operator action pauses it, Resume plays on", func(s string) error {
		on, err := strconv.ParseBool(s)
		switch {
		case err != nil:
			return err
		case !on:
			cfg.Dashboard.Tour = nil
		case cfg.Dashboard.Tour == nil:
			cfg.Dashboard.Tour = tour.Builtin()
		}
		return nil
	})
	fs.Func("tour-file", "play this tour file instead of the built-in one (implies --tour): one step a line, DURATION ACTION [VALUE] \"CAPTION\", such as 50s concurrency 120 \"watch TTFT p95\"; see docs/dashboard.md", func(p string) error {
		s, err := tour.Load(p)
		cfg.Dashboard.Tour = s
		return err
	})
	fs.Float64Var(&cfg.Dashboard.TourSpeed, "tour-speed", 1, "play the tour this many times faster than written, to rehearse it (10 plays a 50 s step in 5 s)")
	fs.DurationVar(&cfg.Warm, "warm", demo.DefaultWarm, "simulated traffic the fleets play ahead of the wall clock before the dashboard shows figures, so that the first ones are steady rather than the cold start; 0 plays none (simulated fleet only)")
	fs.Float64Var(&cfg.WarmSpeed, "warm-speed", demo.DefaultWarmSpeed, "how many times faster than real time the warm-up plays (1 to 16): --warm 2m at 6 takes 20 s and about a third of a core; a host that cannot keep the pace slows it, to 2 at least, and says so")
	fs.DurationVar(&cfg.ABTurn, "ab-turn", cfg.ABTurn, "with --ab and real workers, how long each policy runs before the other takes over (default 1m30s)")
	fs.StringVar(&cfg.Router.Admission, "admission", cfg.Router.Admission, "admission policy: queue (never shed), or shed. "+router.ShedRule)
	fs.Float64Var(&cfg.Router.BusyThreshold, "busy-threshold", cfg.Router.BusyThreshold, "with --admission shed, a worker is busy at this fraction of its batch capacity")
	fs.IntVar(&cfg.MaxBatchSize, "max-batch-size", cfg.MaxBatchSize, "each worker's batch capacity (max_batch_size) unless its --workers entry sets capacity=; 0 means what each worker reports, else 64")
	fs.IntVar(&cfg.Router.MaxModelLen, "max-model-len", cfg.Router.MaxModelLen, "longest prompt plus output, in tokens, when no worker reports its max_model_len on GET /v1/models: longer prompts are refused with 400 and request bodies are capped from it (0: "+strconv.Itoa(router.DefaultMaxModelLen)+")")
	fs.IntVar(&cfg.Router.BlockSize, "block-size", cfg.Router.BlockSize, "KV block size in tokens of the real workers (--workers), 1 to 4096; the simulated fleet's is its profile's (32 for the default)")
	fs.BoolVar(&cfg.NoStart, "no-start", cfg.NoStart, "wait for Start on the dashboard instead of starting the load at once")
	fs.IntVar(&cfg.Load.Concurrency, "concurrency", cfg.Load.Concurrency, "initial number of simultaneous conversations (must be on the slider's scale)")
	fs.IntVar(&cfg.Dashboard.SliderMin, "slider-min", cfg.Dashboard.SliderMin, "lowest concurrency on the slider")
	fs.IntVar(&cfg.Dashboard.SliderMax, "slider-max", cfg.Dashboard.SliderMax, "highest concurrency on the slider")
	fs.IntVar(&cfg.Dashboard.SliderStep, "slider-step", cfg.Dashboard.SliderStep, "step of the concurrency slider")
	fs.IntVar(&cfg.Load.MaxTokens, "max-tokens", cfg.Load.MaxTokens, "max_tokens of every request")
	fs.Float64Var(&cfg.Load.StartRate, "target-rps", cfg.Load.StartRate, "conversations started per second while ramping up; 0 starts them all at once")
	fs.DurationVar(&cfg.Load.Window, "window", cfg.Load.Window, "length of the rolling metrics window")
	fs.DurationVar(&cfg.Dashboard.SLOTTFT, "slo-ttft", cfg.Dashboard.SLOTTFT, "time-to-first-token objective")
	fs.DurationVar(&cfg.Dashboard.SLOTPOT, "slo-tpot", cfg.Dashboard.SLOTPOT, "time-per-output-token objective")
	acc.register(fs, "change the demo (dashboard controls, router admin API, recordings)", "a random token, printed at start")
	fs.BoolVar(&acc.open, "open-controls", false, "let every browser change the demo, with no operator token (the dashboard's hosts and cross-origin checks still apply)")
	fs.BoolVar(&cfg.Record, "record", true, "record this session (1 Hz frames and events) in the store, for replay and export with kvlens recordings")
	fs.DurationVar(&cfg.RecordingRetention, "recording-retention", 7*24*time.Hour, "delete recordings older than this at start (0 keeps them all); about 5 MB per hour of recording")
	fs.StringVar(&cfg.DB, "db", cfg.DB, "SQLite store holding the baseline sets; if it cannot be opened the built-in sets are used"+noDBText(cfg.DB))
	fs.StringVar(&cfg.Baseline, "baseline", cfg.Baseline, "name of the baseline set the dashboard compares with (default: the seeds' 6-sweep average)")
	fs.BoolVar(&acc.loopbackViewer, "loopback-viewer", false, "browsers on this machine need the operator token too (for a kiosk browser on the booth machine)")
	fs.IntVar(&cfg.Dashboard.Viewers.MaxViewers, "max-viewers", cfg.Dashboard.Viewers.MaxViewers, "most dashboard browsers at once; past it a new one gets 503 and retries, and those watching are unaffected. Each costs about 3.5 KB/s on the wire and 50 KB, so 500 is more than booth Wi-Fi carries; a browser that stops reading is dropped within 30 s either way")
	fs.IntVar(&cfg.Dashboard.Viewers.MaxPerAddress, "max-viewers-per-address", cfg.Dashboard.Viewers.MaxPerAddress, "most of those browsers one address (an IPv6 /64) may hold, this machine's included; past it a new one gets 429, so that one client cannot take every place. Behind a proxy or gateway every viewer has its address: raise it to --max-viewers there")
	fs.StringVar(&cfg.Dashboard.PublicURL, "public-url", cfg.Dashboard.PublicURL, "address visitors' phones open, shown as a QR code (default: this machine's LAN address when --addr listens on every interface, else no QR code); the dashboard answers to its host")
	fs.Func("starters", "directory of .md/.txt conversation starters, or a JSONL file with id, topic, text (default: the 10 built-in ones)", func(p string) error {
		ss, err := loadgen.LoadStarters(p)
		cfg.Load.Starters = ss
		return err
	})
	fs.Var(&cfg.Load.Turns, "turns", "turns per conversation: a range like 3-5, a count, or weights like 3:1,4:2,5:1")
	fs.DurationVar(&cfg.Load.ThinkTime, "think-time", cfg.Load.ThinkTime, "pause between an answer and the next question")
	fs.DurationVar(&cfg.Load.RequestTimeout, "request-timeout", cfg.Load.RequestTimeout, "give up on a request after this long (0: never)")
	fs.StringVar(&cfg.Load.UserModel.URL, "user-model-url", cfg.Load.UserModel.URL, "OpenAI base URL of a model that writes follow-up questions (key from $"+loadgen.UserModelKeyEnv+"; default: built-in questions)")
	fs.StringVar(&cfg.Load.UserModel.Model, "user-model", cfg.Load.UserModel.Model, "model name at --user-model-url")
	fs.DurationVar(&cfg.Load.UserModel.Timeout, "user-model-timeout", cfg.Load.UserModel.Timeout, "give up on a follow-up question after this long, and fall back to a built-in one (counted)")
	fs.Func("trace", "Mooncake-format JSONL trace to replay on its own schedule instead of conversations (the trace workload)", func(p string) error {
		recs, err := loadTrace(p)
		cfg.Load.Trace = recs
		return err
	})
	fs.Int("trace-block-size", loadgen.TraceBlockTokens, "tokens each of the trace's hash_ids names (Mooncake's traces: 512; kvlens trace gen writes its --block-size)")
	fs.String("workload", "", workloadFlagHelp+"; trace without --trace replays a synthetic trace at --concurrency sessions in flight")
	return fs
}

// abDefault turns the A/B view off where the user did not ask for it and
// it is not the default: for real workers (--workers), for another router
// (--target), and when --policy alone names the single view's policy.
func abDefault(cfg *demo.Config, set map[string]bool) {
	if set["ab"] {
		return
	}
	if set["workers"] || set["target"] || set["policy"] {
		cfg.AB = nil
	}
}

// warmDefault turns the warm-up off where there is nothing to warm: real
// workers (--workers), another router (--target), and no load (--no-start);
// asked for there, it is refused.
func warmDefault(cfg *demo.Config, set map[string]bool) error {
	why := ""
	switch {
	case len(cfg.Workers) > 0:
		why = "real workers (--workers) cannot run ahead of the wall clock"
	case cfg.Target != "":
		why = "with --target kvlens runs no workers to run ahead of the wall clock"
	case cfg.NoStart:
		why = "with --no-start there is no load to play ahead"
	}
	if why == "" {
		return nil
	}
	if set["warm"] && cfg.Warm > 0 {
		return fmt.Errorf("--warm plays the simulated fleet ahead, and %s: drop --warm", why)
	}
	cfg.Warm = 0
	return nil
}

// setFlags are the names of the flags given.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// intFlag is the value of fs's integer flag name.
func intFlag(fs *flag.FlagSet, name string) int {
	return fs.Lookup(name).Value.(flag.Getter).Get().(int)
}

// noDBText says, in the usage text, why there is no default store: the
// flag package prints the default path itself when there is one.
func noDBText(db string) string {
	if db != "" {
		return ""
	}
	if _, err := store.DefaultPath(); err != nil {
		return " (default: none, " + err.Error() + ")"
	}
	return ""
}

// serveConfig turns serve's arguments into the demo's configuration: the
// flags over the defaults, or over a chosen workload's, then every rule
// that ties flags together. acc holds the flags that say who may change
// the demo, which the environment completes. Usage and messages go to
// stderr, the workload list to stdout.
func serveConfig(args []string, stdout, stderr io.Writer) (demo.Config, accessFlags, error) {
	cfg := demo.DefaultConfig()
	cfg.DB, _ = store.DefaultPath()
	var acc accessFlags
	fs := serveFlags(&cfg, &acc, stderr)
	if err := parseArgs(fs, args); err != nil {
		return cfg, acc, err
	}
	wl, chosen, err := chosenWorkload(fs, stdout)
	if errors.Is(err, errWorkloadHelp) {
		return cfg, acc, exitStatus(0)
	}
	if chosen {
		// Parse again over defaults carrying the workload's values, so that
		// flags given with it override them wherever they stand.
		cfg = demo.DefaultConfig()
		cfg.DB, _ = store.DefaultPath()
		acc = accessFlags{}
		wl.Apply(&cfg.Load)
		fs = serveFlags(&cfg, &acc, stderr)
		err = parseQuiet(fs, args)
	}
	if err == nil && setFlags(fs)["policy"] {
		cfg.Policy, err = onePolicy(cfg.Policy)
	}
	if err == nil {
		set := setFlags(fs)
		abDefault(&cfg, set)
		if set["ab"] && cfg.AB != nil && cfg.Target != "" {
			err = errors.New("--ab compares kvlens's own routing policies, and with --target the load bypasses kvlens's router: drop one of them")
		} else {
			err = warmDefault(&cfg, set)
		}
	}
	if err == nil {
		cfg.Load.MaxContext = traceLimit(cfg)
		err = setTrace(wl, chosen, &cfg.Load, intFlag(fs, "trace-block-size"), cfg.Load.Concurrency, syntheticTraceLength)
	}
	if err == nil {
		err = simBlockSize(&cfg, setFlags(fs)["block-size"])
	}
	if err == nil {
		err = checkUserModel(cfg.Load.UserModel, setFlags(fs))
		cfg.ModelGiven = setFlags(fs)["model"]
	}
	if err == nil {
		err = checkServe(cfg)
	}
	if err != nil {
		refuse(fs, err)
		return cfg, acc, err
	}
	if len(cfg.Load.Trace) > 0 {
		var msg string
		cfg.Load.Trace, msg = loadgen.FitTrace(cfg.Load.Trace, traceLimit(cfg))
		if msg != "" {
			fmt.Fprintln(stderr, "kvlens: "+msg)
		}
	}
	return cfg, acc, nil
}

func serve(args []string) int {
	cfg, acc, err := serveConfig(args, stdout, os.Stderr)
	if status, ok := errors.AsType[exitStatus](err); ok {
		return int(status)
	}
	if err != nil {
		return 2
	}

	rule, source, err := acc.serveRule(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens serve: %v\n", err)
		return 2
	}
	cfg.Dashboard.Access = rule
	cfg.AllowHosts = acc.allowHosts
	cfg.Stdout = stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := demo.Start(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "kvlens: dashboard on %s\n", d.URL)
	if d.PublicURL != "" {
		fmt.Fprintf(stdout, "kvlens: phones open %s (the QR code in the header)\n", d.PublicURL)
	}
	fmt.Fprintln(stdout, "kvlens: "+d.Store)
	for _, l := range d.Lines() {
		fmt.Fprintln(stdout, "kvlens: "+l)
	}
	for _, l := range serveAccessLines(d.Web.Rule(), source) {
		fmt.Fprintln(stdout, "kvlens: "+l)
	}
	if cfg.NoStart {
		fmt.Fprintf(stdout, "kvlens: waiting for Start on the dashboard (%d conversations then), press Ctrl-C to stop\n", cfg.Load.Concurrency)
	} else {
		fmt.Fprintf(stdout, "kvlens: %d conversations, press Ctrl-C to stop\n", cfg.Load.Concurrency)
	}
	go d.Report(ctx, stdout, 5*time.Second)

	<-ctx.Done()
	fmt.Fprintln(stdout, "kvlens: shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- d.Close(shutdown) }()
	select {
	case err := <-closed:
		if err != nil {
			fmt.Fprintf(os.Stderr, "kvlens: shutdown: %v\n", err)
		}
	case <-time.After(4500 * time.Millisecond):
		// The promise is an exit within 5 s of the signal. What is not
		// closed by now is left to the operating system; a recording loses
		// at most its last few seconds, as in a crash.
		fmt.Fprintln(os.Stderr, "kvlens: shutdown: still closing after 4.5 s; exiting anyway")
	}
	return 0
}

// traceLimit is the context length a trace's records must fit, in tokens:
// --max-model-len, else the simulated workers' when they serve, else the
// router's default. Real workers that report a smaller one refuse the
// records past it, each with a 400 the load generator counts.
func traceLimit(cfg demo.Config) int {
	switch {
	case cfg.Router.MaxModelLen > 0:
		return cfg.Router.MaxModelLen
	case len(cfg.Workers) == 0 && cfg.Target == "" && cfg.SimProfile.MaxModelLen > 0:
		return cfg.SimProfile.MaxModelLen
	}
	return router.DefaultMaxModelLen
}

// randomToken returns 8 random bytes in hex: enough that a visitor cannot
// guess it during a conference.
func randomToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// accessFlags are the flags of serve and sim that say who may change things.
type accessFlags struct {
	token, tokenFile     string
	allowHosts           []string
	open, loopbackViewer bool
}

// generated is the token source serveRule reports for a token it made up.
const generated = "generated"

// register binds the token and host flags; what says what the token allows,
// def what happens without one.
func (a *accessFlags) register(fs *flag.FlagSet, what, def string) {
	fs.StringVar(&a.token, "control-token", "", "operator token: needed (as Authorization: Bearer <token>, or entered in a browser) to "+what+"; it shows in the process list, so prefer --control-token-file or $"+access.TokenEnv+" (default: "+def+")")
	fs.StringVar(&a.tokenFile, "control-token-file", "", "read the operator token from this file, such as a mounted Kubernetes Secret")
	fs.Func("allow-host", "a name this server answers to besides localhost and this machine's own names and addresses, such as an ingress's kvlens.example.com; repeat or separate with commas; * allows any (turns the DNS-rebinding check off)", func(s string) error {
		hs, err := access.ParseList(s)
		a.allowHosts = append(a.allowHosts, hs...)
		return err
	})
}

// serveRule is the dashboard's access rule: open, or with the operator token
// from the flags or the environment, else a generated one. source says
// where the token came from ("generated" when made up here, "" for none).
func (a *accessFlags) serveRule(getenv func(string) string) (access.Rule, string, error) {
	if a.open {
		// Open controls need no token, so none is read: a Secret in the
		// environment does not close them again by surprise.
		return access.Rule{Open: true, LoopbackViewer: a.loopbackViewer}, "", nil
	}
	tok, source, err := access.LoadToken(a.token, a.tokenFile, getenv)
	if err != nil {
		return access.Rule{}, "", err
	}
	if tok == "" {
		tok, source = randomToken(), generated
	}
	return access.Rule{Token: tok, LoopbackViewer: a.loopbackViewer}, source, nil
}

// serveAccessLines are the startup lines that say who may change the demo,
// under which names, and the operator token only when kvlens made it up.
func serveAccessLines(r access.Rule, source string) []string {
	var out []string
	switch {
	case r.Open:
		out = append(out, "controls are open: every browser that reaches the dashboard may change the demo (--open-controls)")
	case r.LoopbackViewer:
		out = append(out, "every browser needs the operator token, this machine's too (--loopback-viewer); scripts send Authorization: Bearer <token>")
	default:
		out = append(out, "browsers on this machine are operators; other browsers enter the operator token, scripts send Authorization: Bearer <token>")
	}
	switch source {
	case "":
	case generated:
		out = append(out, fmt.Sprintf("operator token %s (generated at start; set one with --control-token-file or $%s)", r.Token, access.TokenEnv))
	default:
		out = append(out, "operator token from "+source)
	}
	out = append(out, "dashboard answers to "+strings.Join(r.Hosts.Names(), ", ")+" (add names with --allow-host)")
	return out
}

// maxWarm and maxWarmSpeed bound a warm-up: the windows hold the last
// minute, so 10 min fill them many times over, and past 16x a 2-core host
// falls behind (the warm-up then drops its windows and says so).
const (
	maxWarm      = 10 * time.Minute
	maxWarmSpeed = 16
)

// onePolicy reads --policy as --ab reads its pair, aliases and all: an
// unknown name was found by the demo as it started, with status 1 and
// without the flag's name, and "rr", which --ab takes, was refused.
func onePolicy(s string) (string, error) {
	modes, err := parseModes(s, false)
	if err != nil {
		return "", fmt.Errorf("--policy: %w", err)
	}
	if len(modes) != 1 {
		return "", fmt.Errorf("--policy: want one policy, got %d (--ab compares two)", len(modes))
	}
	return modes[0], nil
}

// simBlockSize gives the router the simulated workers' block size, the
// profile's, and refuses another given with --block-size: the index
// dropped every block the workers stored as invalid, and kv routed blind
// (--sim-profile a100-qwen3-8b, of 64-token blocks, did so under the
// default 32). Real workers' blocks are --block-size's.
func simBlockSize(cfg *demo.Config, given bool) error {
	if len(cfg.Workers) > 0 || cfg.Target != "" {
		return nil
	}
	if given && cfg.Router.BlockSize != cfg.SimProfile.BlockSize {
		return fmt.Errorf("--block-size %d: the simulated workers (%s) store blocks of %d tokens, and the router must index the same: drop --block-size (it is for --workers)", cfg.Router.BlockSize, cfg.SimProfile.Name, cfg.SimProfile.BlockSize)
	}
	cfg.Router.BlockSize = cfg.SimProfile.BlockSize
	return nil
}

// checkUserModel checks the model that writes follow-up questions: with a
// --user-model-url that was not one, or without its model name or with a
// timeout of no time, serve started and then stopped with status 1 ("user
// model at … needs a model name and a positive timeout"); and its other
// flags without the URL did nothing, silently.
func checkUserModel(u loadgen.UserModelConfig, given map[string]bool) error {
	if u.URL == "" {
		for _, f := range []string{"user-model", "user-model-timeout"} {
			if given[f] {
				return fmt.Errorf("--%s goes with --user-model-url, the model that writes follow-up questions: give that too, or drop --%s", f, f)
			}
		}
		return nil
	}
	switch {
	case !httpURL(u.URL):
		return fmt.Errorf("--user-model-url %q: want the OpenAI base URL of the model that writes follow-up questions, such as http://host:8000/v1", u.URL)
	case u.Model == "":
		return errors.New("--user-model-url needs --user-model, the model name to ask there")
	case u.Timeout <= 0:
		return fmt.Errorf("--user-model-timeout must be positive, got %s", u.Timeout)
	}
	return checkModel("--user-model", u.Model)
}

// checkServe catches flag values that parse but make no sense.
func checkServe(cfg demo.Config) error {
	switch {
	case cfg.Router.Admission != router.AdmitQueue && cfg.Router.Admission != router.AdmitShed:
		return fmt.Errorf("--admission must be queue or shed, got %q", cfg.Router.Admission)
	case !(cfg.Router.BusyThreshold > 0) || math.IsInf(cfg.Router.BusyThreshold, 0):
		return fmt.Errorf("--busy-threshold must be a positive number, as the admin API's busy_threshold, got %g", cfg.Router.BusyThreshold)
	case cfg.MaxBatchSize < 0 || cfg.MaxBatchSize > router.MaxCapacity:
		return fmt.Errorf("--max-batch-size must be 0 (what each worker reports) or up to %d, got %d", router.MaxCapacity, cfg.MaxBatchSize)
	case cfg.Router.MaxModelLen < 0 || cfg.Router.MaxModelLen > router.MaxModelLenLimit:
		// Request bodies are capped from it: two billion tokens took
		// bodies of gigabytes.
		return fmt.Errorf("--max-model-len must be 0 (what the workers report) or up to %d tokens, got %d", router.MaxModelLenLimit, cfg.Router.MaxModelLen)
	case cfg.Router.BlockSize < 1 || cfg.Router.BlockSize > sim.MaxBlockSize:
		// A block of more tokens than any prompt is never full, so the
		// router's index never matched one: kv routed as round-robin, with
		// nothing said.
		return fmt.Errorf("--block-size must be from 1 to %d tokens, as the workers' KV blocks are, got %d", sim.MaxBlockSize, cfg.Router.BlockSize)
	case (cfg.SimWorkers < 1 || cfg.SimWorkers > sim.MaxWorkers) && len(cfg.Workers) == 0 && cfg.Target == "":
		return fmt.Errorf("--sim-workers must be from 1 to %d, got %d", sim.MaxWorkers, cfg.SimWorkers)
	case cfg.SimPorts.HTTP > 0 && len(cfg.Workers) > 0:
		return errors.New("--sim-ports sets the simulated fleet's ports, which --workers replaces: drop one of them")
	case cfg.Dashboard.SliderStep < 1:
		return fmt.Errorf("--slider-step must be at least 1, got %d", cfg.Dashboard.SliderStep)
	case cfg.Dashboard.SliderMin < 0 || cfg.Dashboard.SliderMax < cfg.Dashboard.SliderMin:
		return fmt.Errorf("--slider-min %d and --slider-max %d: need 0 <= min <= max", cfg.Dashboard.SliderMin, cfg.Dashboard.SliderMax)
	case cfg.Dashboard.SliderStep > max(1, cfg.Dashboard.SliderMax-cfg.Dashboard.SliderMin):
		// Past the slider's range the slider has one position and cannot move.
		return fmt.Errorf("--slider-step %d: more than the slider's range, %d to %d", cfg.Dashboard.SliderStep, cfg.Dashboard.SliderMin, cfg.Dashboard.SliderMax)
	case cfg.Dashboard.SliderMax > loadgen.MaxConcurrency:
		return fmt.Errorf("--slider-max must be at most %d conversations, got %d", loadgen.MaxConcurrency, cfg.Dashboard.SliderMax)
	case cfg.AutoFiles != nil && cfg.Tokenizer != "auto" && cfg.Tokenizer != "":
		return fmt.Errorf("--tokenizer-dir is tried by --tokenizer auto; with --tokenizer %s, drop it", cfg.Tokenizer)
	case cfg.Dashboard.SLOTTFT <= 0 || cfg.Dashboard.SLOTPOT <= 0:
		return fmt.Errorf("--slo-ttft and --slo-tpot must be positive")
	case cfg.Dashboard.Viewers.MaxViewers < 1:
		return fmt.Errorf("--max-viewers must be at least 1, got %d", cfg.Dashboard.Viewers.MaxViewers)
	case cfg.Dashboard.Viewers.MaxPerAddress < 1:
		return fmt.Errorf("--max-viewers-per-address must be at least 1, got %d", cfg.Dashboard.Viewers.MaxPerAddress)
	case !(cfg.Dashboard.TourSpeed > 0) || cfg.Dashboard.TourSpeed > 1000:
		return fmt.Errorf("--tour-speed must be above 0 and at most 1000, got %g", cfg.Dashboard.TourSpeed)
	case cfg.Warm < 0 || cfg.Warm > maxWarm:
		return fmt.Errorf("--warm must be between 0 (none) and %s, got %s", maxWarm, cfg.Warm)
	case !(cfg.WarmSpeed >= 1) || cfg.WarmSpeed > maxWarmSpeed:
		return fmt.Errorf("--warm-speed must be between 1 and %d, got %g", maxWarmSpeed, cfg.WarmSpeed)
	case cfg.ABTurn < 0 || (cfg.ABTurn > 0 && cfg.ABTurn < web.SettleTime):
		// A turn shorter than a window takes to settle keeps no window to
		// compare: the A/B view switched policies and compared nothing.
		return fmt.Errorf("--ab-turn must be 0 (the default, %s) or at least %s, the time a window takes to settle, got %s", web.DefaultTurn, web.SettleTime, cfg.ABTurn)
	case cfg.RecordingRetention < 0:
		return fmt.Errorf("--recording-retention must be 0 (keep them all) or more, got %s", cfg.RecordingRetention)
	case cfg.FrontendMetrics != "" && !httpURL(cfg.FrontendMetrics):
		return fmt.Errorf("--frontend-metrics %q: want the http:// URL of a Dynamo frontend's /metrics, such as http://frontend:8000/metrics", cfg.FrontendMetrics)
	}
	if err := checkLoad(cfg.Load); err != nil {
		return err
	}
	if err := checkRequestModel(cfg.Model); err != nil {
		return err
	}
	if len(cfg.Workers) == 0 && cfg.Target == "" {
		if err := checkSimTokens(cfg.Load.MaxTokens, cfg.SimProfile); err != nil {
			return err
		}
	}
	if u := cfg.Dashboard.PublicURL; u != "" {
		// The QR code and the header's link open it on visitors' phones.
		if !httpURL(u) {
			return fmt.Errorf("--public-url %q: want an http:// or https:// address that phones can open, such as http://192.168.1.20:8080", u)
		}
	}
	if err := checkTarget(cfg.Target); err != nil {
		return err
	}
	if err := checkAddr("--addr", cfg.Addr); err != nil {
		return err
	}
	if len(cfg.Workers) > 0 {
		if _, err := router.ParseFleet(cfg.Workers); err != nil {
			return fmt.Errorf("--workers: %w", err)
		}
	}
	if _, err := cfg.Dashboard.ParseConcurrency(strconv.Itoa(cfg.Load.Concurrency)); err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	if err := cfg.CheckTour(); err != nil {
		return err
	}
	if err := cfg.SimPorts.Check(cfg.SimWorkers); err != nil {
		return fmt.Errorf("--sim-ports: %w", err)
	}
	return nil
}

// checkTarget refuses a --target that is not an http(s) URL, which the load
// generator would otherwise fail on once per request.
func checkTarget(u string) error {
	if u == "" {
		return nil
	}
	if !httpURL(u) {
		return fmt.Errorf("--target %q: want the OpenAI base URL of a router or worker, such as http://frontend:8000/v1", u)
	}
	return nil
}

// workerList splits --workers, refusing an empty list: a script whose
// variable came out empty would otherwise demo the simulated fleet where
// real workers were meant.
func workerList(s string) ([]string, error) {
	list := router.SplitWorkerList(s)
	if len(list) == 0 {
		return nil, errors.New("no worker in it: give the workers' URLs, or leave --workers out to run the simulated fleet")
	}
	return list, nil
}

// httpURL reports whether u is an absolute http or https URL with a host.
func httpURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}
