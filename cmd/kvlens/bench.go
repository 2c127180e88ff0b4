package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/bench"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

const benchUsage = `Usage: kvlens bench routing [flags]

Runs every routing policy on every workload at every level, once per seed,
each run on a fresh simulated deployment in virtual time, and writes a
Markdown report (TTFT p95 mean and range over the seeds; KV hit rate against
the oracle's, and goodput; the winner per cell in bold), JSON with every run
and a PNG grid. The full grid of docs/routing.md:

  kvlens bench routing --levels 40-200/20 --seeds 1-5

While it runs it keeps the runs finished in OUT.partial.json (at most 30 s
behind); after Ctrl-C or a failed run, go on where it stopped with

  kvlens bench routing --resume OUT.partial.json

Flags:
`

// benchCmd is `kvlens bench`: its one benchmark so far is routing.
func benchCmd(args []string) int {
	if len(args) > 0 && isHelp(args[0]) {
		// routing is the one benchmark: its usage, flags and all.
		args = []string{"routing", "-h"}
	}
	if len(args) == 0 || args[0] != "routing" {
		fmt.Fprint(os.Stderr, "kvlens bench: say which benchmark: kvlens bench routing [flags]\n")
		return 2
	}
	var (
		policies, workloads, levels, seeds, profile, out string
		g                                                = bench.Grid{SLO: baselines.DefaultSLO}
	)
	fs := flag.NewFlagSet("bench routing", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.StringVar(&policies, "policies", strings.Join(bench.DefaultPolicies, ","), "comma-separated routing policies, in the reports' column order (rr = round_robin)")
	fs.StringVar(&workloads, "workloads", strings.Join(loadgen.WorkloadNames(), ","), "comma-separated workloads of the suite (kvlens workloads lists them)")
	fs.StringVar(&levels, "levels", "40,120,200", "load levels: conversations, or for an open loop sessions in flight; a list, a range 40-200 or a range with a step 40-200/20")
	fs.StringVar(&seeds, "seeds", "1", "seeds to run each cell with: a list or a range such as 1-5")
	fs.IntVar(&g.Workers, "workers", 3, "simulated workers")
	fs.StringVar(&profile, "sim-profile", sim.DefaultProfile, "engine profile of the simulated workers: a built-in name or a JSON file")
	fs.DurationVar(&g.Warmup, "warmup", 0, "virtual warmup of each run (0: each workload's own, from 60 s for the chat to 600 s for reading)")
	fs.DurationVar(&g.Measure, "measure", 120*time.Second, "virtual measurement of each run, one window over all of it")
	fs.IntVar(&g.Parallel, "parallel", runtime.NumCPU(), "runs simulated at once")
	fs.DurationVar(&g.SLO.TTFT, "slo-ttft", baselines.DefaultSLO.TTFT, "TTFT objective of goodput")
	fs.DurationVar(&g.SLO.TPOT, "slo-tpot", baselines.DefaultSLO.TPOT, "TPOT objective of goodput")
	fs.StringVar(&out, "out", "kvlens-bench", "path of the reports, without extension: writes OUT.md, OUT.json and OUT.png")
	var from, resume string
	fs.StringVar(&from, "from", "", "draw OUT.md and OUT.png again from the JSON of an earlier run, without running anything (only --out goes with it)")
	fs.StringVar(&resume, "resume", "", "go on with an interrupted grid from its OUT.partial.json, running only the runs it lacks (only --out and --parallel go with it; OUT defaults to the file's)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	if status, ok := parseFlags(fs, args[1:]); !ok {
		return status
	}
	usage := func(err error) int {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %v\n", err)
		return 2
	}
	given := givenFlags(fs)
	switch {
	case strings.TrimSpace(out) == "":
		return usage(errors.New("--out: no path given for the reports"))
	case given["from"] && from == "":
		return usage(errors.New("--from: no file given"))
	case given["from"] && given["resume"]:
		return usage(errors.New("--from draws a finished grid's reports and --resume finishes a grid: give one"))
	case given["from"]:
		return benchFrom(fs, from, out)
	case given["resume"] && resume == "":
		return usage(errors.New("--resume: no file given"))
	case given["resume"]:
		return benchResume(fs, resume, out, g.Parallel)
	}
	var err error
	if g.Policies, err = parseModes(policies, false); err != nil {
		return usage(fmt.Errorf("--policies: %w", err))
	}
	for _, name := range strings.Split(workloads, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		w, err := loadgen.LookupWorkload(name)
		if err != nil {
			return usage(fmt.Errorf("--workloads: %w", err))
		}
		g.Workloads = append(g.Workloads, w)
	}
	if len(g.Workloads) == 0 {
		return usage(errors.New("--workloads: no workload given"))
	}
	ls, err := bench.ParseList(levels, 1, loadgen.MaxConcurrency)
	if err != nil {
		return usage(fmt.Errorf("--levels: %w", err))
	}
	g.Levels = ls
	ss, err := bench.ParseList(seeds, 0, math.MaxInt32)
	if err != nil {
		return usage(fmt.Errorf("--seeds: %w", err))
	}
	for _, s := range ss {
		g.Seeds = append(g.Seeds, uint64(s))
	}
	if g.Profile, err = loadProfile(profile); err != nil {
		return usage(fmt.Errorf("--sim-profile: %w", err))
	}
	if g.Parallel < 1 {
		return usage(fmt.Errorf("--parallel %d: need at least 1", g.Parallel))
	}
	if g.Measure > 0 {
		// Zero and less are the grid's own check's.
		if err := checkMeasure(g.Measure); err != nil {
			return usage(err)
		}
	}
	if err := g.Check(); err != nil {
		return usage(errors.New(strings.TrimPrefix(err.Error(), "bench: ")))
	}
	if err := writable(out+".md", out+".json", out+".png", out+".partial.json"); err != nil {
		return usage(fmt.Errorf("--out: %w", err))
	}

	return runBench(g, out)
}

// checkpointEvery is how often a running grid writes the runs finished so
// far: a grid killed outright loses at most this much of its work.
const checkpointEvery = 30 * time.Second

// runBench runs the grid, keeping its runs in OUT.partial.json as it goes,
// and writes the reports at its end, or the partial file when it stops
// early.
func runBench(g bench.Grid, out string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	total := len(g.Policies) * len(g.Workloads) * len(g.Levels) * len(g.Seeds)
	todo := total - len(g.Done)
	fmt.Fprintf(os.Stderr, "kvlens bench routing: %d runs (%d policies × %d workloads × %d levels × %d seeds), %d at a time\n",
		total, len(g.Policies), len(g.Workloads), len(g.Levels), len(g.Seeds), g.Parallel)
	if len(g.Done) > 0 {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %d of them done before, %d to run\n", len(g.Done), todo)
	}
	partial := out + ".partial.json"
	kept := slices.Clone(g.Done)
	saved := time.Now()
	// keep writes the runs so far to the partial file, replacing it whole
	// so that a kill in the middle leaves the previous one.
	keep := func() error {
		res := g.Collect(kept)
		return writeAtomic(partial, func(w io.Writer) error { return bench.WriteJSON(w, &res) })
	}
	progress := func(r bench.Run, done, total int) {}
	finish := func() {}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		bar := progressbar.NewOptions(todo, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowCount(), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSetItsString("runs"))
		progress = func(r bench.Run, done, total int) {
			bar.Describe(fmt.Sprintf("%s %s @ %d seed %d", r.Workload, r.Policy, r.Level, r.Seed))
			bar.Set(done)
		}
		finish = func() { bar.Finish(); fmt.Fprintln(os.Stderr) }
	} else {
		// A log gets a line a run rather than a bar's carriage returns.
		progress = func(r bench.Run, done, total int) {
			fmt.Fprintf(os.Stderr, "kvlens bench routing: [%d/%d] %s %s @ %d seed %d\n", done, total, r.Workload, r.Policy, r.Level, r.Seed)
		}
	}
	var keepErr error
	g.OnRun = func(r bench.Run, done, total int) {
		progress(r, done, total)
		kept = append(kept, r)
		if time.Since(saved) >= checkpointEvery && keepErr == nil {
			keepErr = keep()
			saved = time.Now()
		}
	}
	start := time.Now()
	res, err := bench.Execute(ctx, g)
	finish()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted after %d of %d runs", len(res.Runs), total)
		}
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %v\n", err)
		if len(res.Runs) == 0 {
			return 1
		}
		kept = res.Runs
		if err := keep(); err != nil {
			fmt.Fprintf(os.Stderr, "kvlens bench routing: the %d runs finished are lost: %v\n", len(res.Runs), err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "kvlens bench routing: kept them in %s; go on with: kvlens bench routing --resume %s\n", partial, partial)
		return 1
	}
	if keepErr != nil {
		// The grid finished; only its safety copy failed on the way.
		fmt.Fprintf(os.Stderr, "kvlens bench routing: could not keep the runs on the way: %v\n", keepErr)
	}
	fmt.Fprintf(os.Stderr, "kvlens bench routing: %d runs in %s of wall time\n", todo, time.Since(start).Round(time.Second))
	files, err := writeBench(out, &res)
	for _, f := range files {
		fmt.Fprintf(stdout, "kvlens bench routing: wrote %s\n", f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %v\n", err)
		return 1
	}
	// OUT.json holds every run now; the partial file is this grid's own.
	if err := os.Remove(partial); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %v\n", err)
	}
	return 0
}

// benchResume goes on with an interrupted grid from its partial file.
func benchResume(fset *flag.FlagSet, from, out string, parallel int) int {
	given := givenFlags(fset)
	var extra []string
	fset.Visit(func(f *flag.Flag) {
		if f.Name != "resume" && f.Name != "out" && f.Name != "parallel" {
			extra = append(extra, "--"+f.Name)
		}
	})
	if len(extra) > 0 {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: --resume runs the grid its file holds: drop %s\n", strings.Join(extra, ", "))
		return 2
	}
	if parallel < 1 {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: --parallel %d: need at least 1\n", parallel)
		return 2
	}
	if !given["out"] {
		out = strings.TrimSuffix(strings.TrimSuffix(from, ".json"), ".partial")
	}
	res, err := readBench(from, kindPartial)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: --resume: %v\n", err)
		return 1
	}
	if !res.Partial() {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %s holds the whole grid: draw its reports with --from %s\n", from, from)
		return 1
	}
	if err := writable(out+".md", out+".json", out+".png", out+".partial.json"); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: --out: %v\n", err)
		return 2
	}
	g := res.Grid
	g.Done, g.Parallel = res.Runs, parallel
	return runBench(g, out)
}

// benchFrom draws the reports of an earlier run again from its JSON.
func benchFrom(fs *flag.FlagSet, from, out string) int {
	var extra []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "from" && f.Name != "out" {
			extra = append(extra, "--"+f.Name)
		}
	})
	if len(extra) > 0 {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: --from draws an earlier run's reports: drop %s\n", strings.Join(extra, ", "))
		return 2
	}
	res, err := readBench(from, kindBench)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: --from: %v\n", err)
		return 1
	}
	if res.Partial() {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %s holds %d runs of an interrupted grid: finish it with --resume %s\n", from, len(res.Runs), from)
		return 1
	}
	if err := writable(out+".md", out+".png"); err != nil {
		// Named, as a grid's --out is: it was "mkdir /proc/x: ...".
		fmt.Fprintf(os.Stderr, "kvlens bench routing: --out: %v\n", err)
		return 2
	}
	files, err := writeBench(out, res, ".md", ".png")
	for _, f := range files {
		fmt.Fprintf(stdout, "kvlens bench routing: wrote %s\n", f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens bench routing: %v\n", err)
		return 1
	}
	return 0
}

// readBench reads the bench report at path, naming another of kvlens's
// files given in its place (want is the kind the caller reads: a finished
// grid or an interrupted one).
func readBench(path, want string) (*bench.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	res, err := bench.ReadJSON(f)
	f.Close()
	if err == nil {
		return res, nil
	}
	// Another of kvlens's files is a few MB at most: one larger is not
	// worth reading whole to name it.
	if data, rerr := readInput(path, 16<<20); rerr == nil {
		if k := fileKind(data); k != kindBench && k != kindPartial {
			if kind := wrongKind(path, data, want); kind != nil {
				return nil, kind
			}
		}
	}
	return nil, fmt.Errorf("%s: %v", path, strings.TrimPrefix(err.Error(), "bench: "))
}

// benchWriters write each report, by extension.
var benchWriters = map[string]func(io.Writer, *bench.Result) error{
	".md": bench.WriteMarkdown, ".json": bench.WriteJSON, ".png": bench.WriteChart,
}

// writeBench writes the reports of the given extensions (by default all
// three) next to each other.
func writeBench(out string, res *bench.Result, exts ...string) ([]string, error) {
	if len(exts) == 0 {
		exts = []string{".md", ".json", ".png"}
	}
	if dir := filepath.Dir(out); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	var files []string
	for _, ext := range exts {
		path := out + ext
		// Renamed into place: a process killed while writing leaves the
		// earlier report of that name whole.
		if err := writeAtomic(path, func(w io.Writer) error { return benchWriters[ext](w, res) }); err != nil {
			return files, fmt.Errorf("%s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}
