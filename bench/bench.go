// Package bench runs routing benchmarks in virtual time: every routing
// policy on every workload of the suite at every level, once per seed, each
// run on a fresh simulated deployment (package simulate), and reports the
// grid as Markdown tables, JSON and a PNG.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
)

// DefaultPolicies are the policies a routing benchmark compares by default:
// the field's routers, the baselines and kvlens's own.
var DefaultPolicies = []string{"round_robin", "random", "least_loaded", "dynamo", "dynamo_latest", "dynamo_tuned", "sglang", "sglang_events", "llmd", "kv"}

// Grid is what a routing benchmark runs.
type Grid struct {
	// Policies are the routing policies, in the reports' column order.
	Policies []string
	// Workloads are the workloads, in the reports' order.
	Workloads []loadgen.Workload
	// Levels are the load levels: conversations for a closed loop, sessions
	// in flight by Little's law for an open one.
	Levels []int
	// Seeds are the seeds each cell is run with.
	Seeds []uint64
	// Workers is the number of simulated workers.
	Workers int
	// Profile is every worker's engine profile.
	Profile sim.Profile
	// Warmup is the load before each run's measurement; 0 means each
	// workload's own (loadgen.Workload.Warmup).
	Warmup time.Duration
	// Measure is each run's measurement, one window over all of it.
	Measure time.Duration
	// SLO judges goodput.
	SLO baselines.SLO
	// Parallel is how many runs go at once; 0 means one per CPU.
	Parallel int
	// OnRun, if not nil, sees every run as it finishes, with the count
	// finished so far and in all (Done's runs not among them). Calls do not
	// overlap.
	OnRun func(r Run, done, total int)
	// Done are runs of this grid finished earlier, by an interrupted
	// benchmark: Execute keeps them rather than running them again.
	Done []Run
}

// Run is one policy on one workload at one level with one seed.
type Run struct {
	Workload string `json:"workload"`
	Policy   string `json:"policy"`
	Level    int    `json:"level"`
	Seed     uint64 `json:"seed"`
	// WarmupSec and MeasureSec are the run's warmup and measurement, in
	// seconds of virtual time.
	WarmupSec  float64 `json:"warmup_s"`
	MeasureSec float64 `json:"measure_s"`
	// TTFTP50 and TTFTP95 are time to first token over the measurement, ms.
	TTFTP50 float64 `json:"ttft_p50_ms"`
	TTFTP95 float64 `json:"ttft_p95_ms"`
	// TPOTP50 and TPOTP95 are time per output token, ms.
	TPOTP50 float64 `json:"tpot_p50_ms"`
	TPOTP95 float64 `json:"tpot_p95_ms"`
	// HitRate is Σ cached / Σ prompt tokens, percent.
	HitRate float64 `json:"kv_hit_rate_pct"`
	// OracleHitRate is the best achievable hit rate over the same requests,
	// percent (see docs/routing.md, "The oracle").
	OracleHitRate float64 `json:"oracle_hit_rate_pct"`
	// Goodput is requests per second that met every SLO.
	Goodput float64 `json:"goodput_rps"`
	// RequestsPerSec is completed requests per second.
	RequestsPerSec float64 `json:"requests_per_sec"`
	// OutputTokensPerSec is output tokens per second.
	OutputTokensPerSec float64 `json:"output_tokens_per_sec"`
	// Completed and Errors count the measurement's requests.
	Completed int `json:"completed"`
	Errors    int `json:"errors"`
	// InFlight is the mean number of conversations (for a trace, requests)
	// in flight, sampled every InFlightEvery of the measurement.
	InFlight float64 `json:"in_flight"`
	// ContextFull counts conversations ended early at the model's context.
	ContextFull int64 `json:"context_full"`
}

// Check says whether the grid can run.
func (g *Grid) Check() error {
	switch {
	case len(g.Policies) == 0:
		return errors.New("bench: no policies")
	case len(g.Workloads) == 0:
		return errors.New("bench: no workloads")
	case len(g.Levels) == 0:
		return errors.New("bench: no levels")
	case len(g.Seeds) == 0:
		return errors.New("bench: no seeds")
	case g.Measure <= 0 || g.Warmup < 0:
		return fmt.Errorf("bench: measure %v must be positive and warmup %v not negative", g.Measure, g.Warmup)
	case g.SLO.TTFT <= 0 || g.SLO.TPOT <= 0:
		return errors.New("bench: the SLO's TTFT and TPOT must be positive")
	}
	for _, p := range g.Policies {
		if _, err := router.NewPolicy(p); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	for _, l := range g.Levels {
		if l < 1 || l > loadgen.MaxConcurrency {
			return fmt.Errorf("bench: level %d is outside 1..%d", l, loadgen.MaxConcurrency)
		}
	}
	var names []string
	for _, w := range g.Workloads {
		names = append(names, w.Name)
	}
	for _, d := range [][2]string{{"policy", twice(g.Policies)}, {"workload", twice(names)}, {"level", twice(g.Levels)}, {"seed", twice(g.Seeds)}} {
		if d[1] != "" {
			return fmt.Errorf("bench: %s %s is given twice", d[0], d[1])
		}
	}
	// Each list is bounded on its own, but not their product: 1000 levels
	// × 1000 seeds made 80 million runs, whose plan alone ran the process
	// out of memory.
	if n := len(g.Policies) * len(g.Workloads) * len(g.Levels) * len(g.Seeds); n > MaxRuns {
		return fmt.Errorf("bench: %d runs (%d policies × %d workloads × %d levels × %d seeds): at most %d; split the grid",
			n, len(g.Policies), len(g.Workloads), len(g.Levels), len(g.Seeds), MaxRuns)
	}
	if err := g.Profile.Validate(); err != nil {
		return err
	}
	return sim.CheckFleet(g.Workers, g.Profile)
}

// MaxRuns bounds a grid: 25 times docs/routing.md's full grid (3,960 runs),
// days of simulation on a small machine.
const MaxRuns = 100_000

// twice names the first value given twice in xs, or "".
func twice[T comparable](xs []T) string {
	for i, x := range xs {
		if slices.Contains(xs[:i], x) {
			return fmt.Sprint(x)
		}
	}
	return ""
}

// job is one run to do.
type job struct {
	w      loadgen.Workload
	policy string
	level  int
	seed   uint64
}

// jobs lists the grid's runs in the order the reports read them: by
// workload, level, policy and seed.
func (g *Grid) jobs() []job {
	var js []job
	for _, w := range g.Workloads {
		for _, l := range g.Levels {
			for _, p := range g.Policies {
				for _, s := range g.Seeds {
					js = append(js, job{w, p, l, s})
				}
			}
		}
	}
	return js
}

// key names a run within its grid.
type key struct {
	workload, policy string
	level            int
	seed             uint64
}

func (j job) key() key { return key{j.w.Name, j.policy, j.level, j.seed} }
func (r Run) key() key { return key{r.Workload, r.Policy, r.Level, r.Seed} }

// size is the number of runs in the grid, in floating point so that no
// product of a report's lists overflows.
func (g *Grid) size() float64 {
	return float64(len(g.Policies)) * float64(len(g.Workloads)) * float64(len(g.Levels)) * float64(len(g.Seeds))
}

// Result is a grid's runs: all of them once it has finished, those done
// so far when it was interrupted.
type Result struct {
	// Grid is what ran (its callback, parallelism and earlier runs aside).
	Grid Grid `json:"-"`
	// Runs are the runs, by workload, level, policy and seed.
	Runs []Run `json:"runs"`
}

// Partial reports whether some of the grid's runs are missing: the grid
// was interrupted, and its reports cannot be drawn until it is resumed.
func (r *Result) Partial() bool { return float64(len(r.Runs)) < r.Grid.size() }

// Collect puts runs of the grid in the reports' order, as a Result: the
// runs finished so far, to keep while the grid goes on. A run the grid
// does not hold is left out, and so is a second run of the same cell.
func (g Grid) Collect(runs []Run) Result {
	byKey := make(map[key]Run, len(runs))
	for _, r := range runs {
		if _, ok := byKey[r.key()]; !ok {
			byKey[r.key()] = r
		}
	}
	g.OnRun, g.Done = nil, nil
	res := Result{Grid: g}
	for _, j := range g.jobs() {
		if r, ok := byKey[j.key()]; ok {
			res.Runs = append(res.Runs, r)
		}
	}
	return res
}

// Execute runs the grid, Parallel runs at a time, and returns every run in
// the grid's order. Each run is a fresh deployment seeded by its seed, so
// the result does not depend on the parallelism. The runs in g.Done are
// kept, not run again. It stops at the first failure or when ctx ends, and
// then returns the runs finished so far with the error.
func Execute(ctx context.Context, g Grid) (Result, error) {
	if err := g.Check(); err != nil {
		return Result{}, err
	}
	all := g.jobs()
	done, err := g.done(all)
	if err != nil {
		return Result{}, err
	}
	var js []job
	for _, j := range all {
		if _, ok := done[j.key()]; !ok {
			js = append(js, j)
		}
	}
	runs := make([]Run, len(js))
	ran := make([]bool, len(js))
	par := g.Parallel
	if par < 1 {
		par = runtime.NumCPU()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		finished int
		first    error
		wg       sync.WaitGroup
	)
	next := make(chan int)
	for range min(par, len(js)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := g.run(ctx, js[i])
				mu.Lock()
				if err != nil && first == nil {
					first = err
					cancel()
				}
				if err == nil {
					runs[i], ran[i] = r, true
					finished++
					if g.OnRun != nil {
						g.OnRun(r, finished, len(js))
					}
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range js {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	kept := slices.Collect(maps.Values(done))
	for i, r := range runs {
		if ran[i] {
			kept = append(kept, r)
		}
	}
	return g.Collect(kept), first
}

// done checks the grid's earlier runs and returns them by cell: each must
// be a cell of the grid, once, measured as the grid measures.
func (g *Grid) done(jobs []job) (map[key]Run, error) {
	want := make(map[key]job, len(jobs))
	for _, j := range jobs {
		want[j.key()] = j
	}
	done := make(map[key]Run, len(g.Done))
	for _, r := range g.Done {
		j, ok := want[r.key()]
		_, dup := done[r.key()]
		switch {
		case !ok:
			return nil, fmt.Errorf("bench: the earlier run of %s on %s at %d, seed %d is not in the grid", r.Policy, r.Workload, r.Level, r.Seed)
		case dup:
			return nil, fmt.Errorf("bench: %s on %s at %d, seed %d was run twice", r.Policy, r.Workload, r.Level, r.Seed)
		case r.WarmupSec != g.warmup(j.w).Seconds() || r.MeasureSec != g.Measure.Seconds():
			return nil, fmt.Errorf("bench: the earlier run of %s on %s at %d, seed %d had %gs of warmup and %gs measured, the grid %gs and %gs",
				r.Policy, r.Workload, r.Level, r.Seed, r.WarmupSec, r.MeasureSec, g.warmup(j.w).Seconds(), g.Measure.Seconds())
		}
		done[r.key()] = r
	}
	return done, nil
}

// InFlightEvery is how often a run counts what is in flight.
const InFlightEvery = 5 * time.Second

// warmup is a workload's warmup in this grid.
func (g *Grid) warmup(w loadgen.Workload) time.Duration {
	if g.Warmup > 0 {
		return g.Warmup
	}
	return w.Warmup
}

// run simulates one job: a fresh deployment, the warmup, then one window
// over the whole measurement.
func (g *Grid) run(ctx context.Context, j job) (Run, error) {
	warmup := g.warmup(j.w)
	load := loadgen.DefaultConfig()
	j.w.Apply(&load)
	load.Concurrency = j.level
	load.MaxContext = g.Profile.MaxModelLen
	load.Window = g.Measure
	load.SLO = loadgen.SLO{TTFT: g.SLO.TTFT, TPOT: g.SLO.TPOT}
	if j.w.Trace != nil {
		recs, err := j.w.TraceFor(j.level, j.seed, warmup+g.Measure)
		if err != nil {
			return Run{}, fmt.Errorf("bench: %w", err)
		}
		load.Trace, _ = loadgen.FitTrace(recs, g.Profile.MaxModelLen)
	}
	p, err := simulate.New(simulate.Config{
		Profile: g.Profile, Workers: g.Workers, Policy: j.policy,
		Router: router.Config{Admission: router.AdmitQueue}, Load: load, Seed: j.seed,
	})
	if err != nil {
		return Run{}, fmt.Errorf("bench: %s on %s at %d, seed %d: %w", j.policy, j.w.Name, j.level, j.seed, err)
	}
	defer p.Close()
	p.Gen.Start()
	if err := p.Loop.Sleep(ctx, warmup); err != nil {
		return Run{}, err
	}
	p.Gen.Reset()
	var inFlight float64
	samples := 0
	for left := g.Measure; left > 0; left -= InFlightEvery {
		if err := p.Loop.Sleep(ctx, min(left, InFlightEvery)); err != nil {
			return Run{}, err
		}
		inFlight += float64(p.Gen.Snapshot().Live)
		samples++
	}
	snap := p.Gen.Snapshot()
	s := snap.Window
	r := Run{
		Workload: j.w.Name, Policy: j.policy, Level: j.level, Seed: j.seed,
		WarmupSec: warmup.Seconds(), MeasureSec: g.Measure.Seconds(),
		TTFTP50: round(s.TTFT.P50, 1), TTFTP95: round(s.TTFT.P95, 1),
		TPOTP50: round(s.TPOT.P50, 1), TPOTP95: round(s.TPOT.P95, 1),
		HitRate: round(100*s.KVHitRate, 2), Goodput: round(s.GoodputPerSec, 4),
		RequestsPerSec: round(s.RequestsPerSec, 4), OutputTokensPerSec: round(s.OutputTokensPerSec, 1),
		Completed: s.Completed, Errors: s.Errors, InFlight: round(inFlight/float64(samples), 1), ContextFull: snap.ContextFull,
	}
	if s.OracleHitRate != nil {
		r.OracleHitRate = round(100**s.OracleHitRate, 2)
	}
	if s.Completed == 0 {
		return r, fmt.Errorf("bench: %s on %s at %d, seed %d: no request finished in the %v measurement: lengthen --measure", j.policy, j.w.Name, j.level, j.seed, g.Measure)
	}
	return r, nil
}

// Cell is one policy on one workload at one level, over the seeds.
type Cell struct {
	Workload, Policy string
	Level            int
	// Runs are the cell's runs, one per seed.
	Runs []Run
}

// Stat is a figure's mean, minimum and maximum over a cell's seeds.
type Stat struct{ Mean, Min, Max float64 }

// stat summarises f over the cell's runs.
func (c Cell) stat(f func(Run) float64) Stat {
	if len(c.Runs) == 0 {
		return Stat{}
	}
	s := Stat{Min: f(c.Runs[0]), Max: f(c.Runs[0])}
	for _, r := range c.Runs {
		v := f(r)
		s.Mean += v / float64(len(c.Runs))
		s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	}
	return s
}

// TTFT is the cell's TTFT p95, ms.
func (c Cell) TTFT() Stat { return c.stat(func(r Run) float64 { return r.TTFTP95 }) }

// Hit is the cell's KV hit rate, percent.
func (c Cell) Hit() Stat { return c.stat(func(r Run) float64 { return r.HitRate }) }

// Oracle is the cell's oracle hit rate, percent.
func (c Cell) Oracle() Stat { return c.stat(func(r Run) float64 { return r.OracleHitRate }) }

// Goodput is the cell's goodput, requests per second.
func (c Cell) Goodput() Stat { return c.stat(func(r Run) float64 { return r.Goodput }) }

// InFlight is the cell's mean conversations in flight.
func (c Cell) InFlight() Stat { return c.stat(func(r Run) float64 { return r.InFlight }) }

// Cells groups the runs by workload, level and policy, in the grid's order.
func (r *Result) Cells() []Cell {
	var cells []Cell
	index := map[[3]string]int{}
	for _, run := range r.Runs {
		k := [3]string{run.Workload, fmt.Sprint(run.Level), run.Policy}
		i, ok := index[k]
		if !ok {
			i = len(cells)
			index[k] = i
			cells = append(cells, Cell{Workload: run.Workload, Policy: run.Policy, Level: run.Level})
		}
		cells[i].Runs = append(cells[i].Runs, run)
	}
	return cells
}

// row is one workload at one level: a cell per policy, in policy order.
type row struct {
	workload string
	level    int
	cells    []Cell
}

// rows groups the cells by workload and level, keeping the grid's order.
func (r *Result) rows() []row {
	var rows []row
	for _, c := range r.Cells() {
		if n := len(rows); n == 0 || rows[n-1].workload != c.Workload || rows[n-1].level != c.Level {
			rows = append(rows, row{workload: c.Workload, level: c.Level})
		}
		rows[len(rows)-1].cells = append(rows[len(rows)-1].cells, c)
	}
	return rows
}

// best is the index of the cell whose figure f is lowest (or, with high,
// highest) in the row; ties go to the first.
func (rw row) best(f func(Cell) float64, high bool) int {
	i := 0
	for j, c := range rw.cells {
		v, b := f(c), f(rw.cells[i])
		if (!high && v < b) || (high && v > b) {
			i = j
		}
	}
	return i
}

// winnerTTFT is the policy with the lowest mean TTFT p95 in the row.
func (rw row) winnerTTFT() int { return rw.best(func(c Cell) float64 { return c.TTFT().Mean }, false) }

// winnerGoodput is the policy with the highest mean goodput in the row.
func (rw row) winnerGoodput() int {
	return rw.best(func(c Cell) float64 { return c.Goodput().Mean }, true)
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// seedsText names the seeds: "1–5" when consecutive, else a list.
func seedsText(seeds []uint64) string {
	s := slices.Clone(seeds)
	slices.SortFunc(s, cmp.Compare)
	consecutive := len(s) > 2
	for i := 1; i < len(s); i++ {
		consecutive = consecutive && s[i] == s[i-1]+1
	}
	if consecutive {
		return fmt.Sprintf("%d–%d", s[0], s[len(s)-1])
	}
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprint(v)
	}
	return out
}
