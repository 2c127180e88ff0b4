package baselines

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/loadgen"
)

// Param is one row of a report's deployment table.
type Param struct {
	// Name is the parameter, such as "GPU".
	Name string `json:"name"`
	// Value is its value, such as "3x H200 (3 nodes)".
	Value string `json:"value"`
}

// SweepConfig says what a sweep measures and how. It is stored with the run,
// so that a resumed sweep needs nothing else.
type SweepConfig struct {
	// Name is the baseline set the sweep produces.
	Name string `json:"name"`
	// Levels are the concurrencies to measure, in order.
	Levels []int `json:"levels"`
	// Modes are the routing policies to compare, in order; the first is the
	// baseline the reports compare the second against.
	Modes []string `json:"modes"`
	// Warmup is how long each level runs before its measurement starts.
	Warmup time.Duration `json:"warmup_ns"`
	// Measure is how long each level is measured; the window is reset at its
	// start.
	Measure time.Duration `json:"measure_ns"`
	// Snapshots is how many snapshots are taken, one every Measure/Snapshots,
	// and averaged into the level.
	Snapshots int `json:"snapshots"`
	// Repeats is how many times the whole sweep runs; levels are averaged
	// over the repeats, and their spread kept.
	Repeats int `json:"repeats"`
	// Cooldown is a pause with the load stopped after each level.
	Cooldown time.Duration `json:"cooldown_ns"`
	// SLO is the objective reports measure the levels against.
	SLO SLO `json:"slo"`
	// TargetRPS is the load generator's conversation start rate, per second.
	TargetRPS float64 `json:"target_rps"`
	// Window is the length of the load generator's rolling window.
	Window time.Duration `json:"window_ns"`
	// Workload describes the conversations, for the report.
	Workload string `json:"workload"`
	// Deployment describes what is measured, for the report and the set.
	Deployment []Param `json:"deployment"`
	// Started is when the sweep began, RFC 3339 in UTC.
	Started string `json:"started"`
}

// maxSnapshots and maxSteps bound a sweep, whose plan lists every step
// and whose every snapshot reads the window's quantiles: each step is
// minutes of load, so 10,000 are weeks, and more is a typo.
const (
	maxSnapshots = 1000
	maxSteps     = 10_000
)

// Validate checks that the sweep can run.
func (c *SweepConfig) Validate() error {
	switch {
	case len(c.Levels) == 0:
		return errors.New("no concurrency levels")
	case len(c.Modes) == 0:
		return errors.New("no routing modes")
	case c.Snapshots < 1 || c.Snapshots > maxSnapshots:
		return fmt.Errorf("snapshots %d: need 1 to %d", c.Snapshots, maxSnapshots)
	case c.Repeats < 1 || c.Repeats > maxSteps:
		return fmt.Errorf("repeats %d: need 1 to %d", c.Repeats, maxSteps)
	case len(c.Levels)*len(c.Modes)*c.Repeats > maxSteps:
		return fmt.Errorf("%d levels × %d modes × %d repeats are %d steps: at most %d", len(c.Levels), len(c.Modes), c.Repeats, len(c.Levels)*len(c.Modes)*c.Repeats, maxSteps)
	case c.Measure <= 0:
		return fmt.Errorf("measure %v: must be positive", c.Measure)
	case c.Warmup < 0 || c.Cooldown < 0:
		return errors.New("warmup and cooldown must not be negative")
	}
	if err := CheckName(c.Name); err != nil {
		return err
	}
	for _, l := range c.Levels {
		if l < 1 || l > loadgen.MaxConcurrency {
			return fmt.Errorf("level %d is outside 1..%d", l, loadgen.MaxConcurrency)
		}
	}
	for i, l := range c.Levels {
		if slices.Contains(c.Levels[:i], l) {
			return fmt.Errorf("level %d is given twice", l)
		}
	}
	for i, m := range c.Modes {
		if !modeName.MatchString(m) {
			return fmt.Errorf("mode %q is not a mode name", m)
		}
		if slices.Contains(c.Modes[:i], m) {
			return fmt.Errorf("mode %s is given twice", m)
		}
	}
	return nil
}

// Step is one level of one mode in one repeat.
type Step struct {
	// Repeat numbers the sweep's repetitions from 1.
	Repeat int
	// Mode is the routing policy.
	Mode string
	// Concurrency is the number of simultaneous conversations.
	Concurrency int
}

// Plan lists the steps in the order they run: every level of one mode before
// the next mode, so that a sweep switches modes as seldom as it can (each
// switch may be a redeployment), and every mode before the next repeat.
func (c *SweepConfig) Plan() []Step {
	var steps []Step
	for r := 1; r <= c.Repeats; r++ {
		for _, m := range c.Modes {
			for _, l := range c.Levels {
				steps = append(steps, Step{r, m, l})
			}
		}
	}
	return steps
}

// Target is the system a sweep drives: a load generator in front of a router
// whose mode it can switch. *loadgen.Generator provides all but SetMode.
type Target interface {
	// SetMode switches the routing policy. The sweep stops the load first.
	SetMode(ctx context.Context, mode string) error
	SetConcurrency(n int) error
	Start()
	Stop()
	Reset()
	Snapshot() loadgen.Snapshot
}

// Phase is what a sweep is doing.
type Phase string

// The phases of a sweep, in the order each level goes through them.
const (
	PhaseSwitch   Phase = "switching mode"
	PhaseWarmup   Phase = "warming up"
	PhaseMeasure  Phase = "measuring"
	PhaseCooldown Phase = "cooling down"
	PhaseDone     Phase = "done"
)

// Progress reports where a sweep is. It is sent at the start of every phase
// and after every snapshot.
type Progress struct {
	// Step is the level being measured.
	Step Step
	// Finished and Steps count the levels stored so far and in all.
	Finished, Steps int
	// Phase is what the sweep is doing now.
	Phase Phase
	// Snapshot counts the snapshots taken of this level so far.
	Snapshot int
	// PhaseStart and PhaseLength time the current phase; PhaseLength is 0
	// for a mode switch, whose length is unknown.
	PhaseStart  time.Time
	PhaseLength time.Duration
	// Elapsed is how much of Planned lies behind the current phase's start.
	Elapsed time.Duration
	// Planned is the sweep's total timed length, mode switches excluded.
	Planned time.Duration
}

// Sweep measures a Target at each level of each mode.
type Sweep struct {
	// Config is what to measure.
	Config SweepConfig
	// Target is what is measured.
	Target Target
	// Clock times the phases; nil means the wall clock.
	Clock clock.Clock
	// Done are levels an interrupted run already finished; they are skipped.
	Done []RunLevel
	// Save stores each level as soon as it is measured; a sweep whose Save
	// fails stops.
	Save func(context.Context, RunLevel) error
	// OnProgress, if set, is called at every phase and snapshot.
	OnProgress func(Progress)
}

// Run performs the steps not yet done and returns every finished level,
// those of Done included. The load is stopped when it returns.
func (s *Sweep) Run(ctx context.Context) ([]RunLevel, error) {
	c := &s.Config
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	clk := s.Clock
	if clk == nil {
		clk = clock.Real
	}
	done := map[Step]bool{}
	results := slices.Clone(s.Done)
	for _, rl := range s.Done {
		done[Step{rl.Repeat, rl.Mode, rl.Concurrency}] = true
	}
	plan := c.Plan()
	var todo []Step
	for _, st := range plan {
		if !done[st] {
			todo = append(todo, st)
		}
	}
	perStep := c.Warmup + c.Measure
	p := Progress{Steps: len(plan), Finished: len(plan) - len(todo),
		Planned: time.Duration(len(todo))*perStep + time.Duration(max(len(todo)-1, 0))*c.Cooldown}
	phase := func(st Step, ph Phase, length time.Duration) {
		p.Step, p.Phase, p.Snapshot, p.PhaseStart, p.PhaseLength = st, ph, 0, clk.Now(), length
		if s.OnProgress != nil {
			s.OnProgress(p)
		}
	}

	t := s.Target
	mode, running := "", false
	defer func() {
		if running {
			t.Stop()
		}
	}()
	for i, st := range todo {
		if st.Mode != mode {
			if running {
				t.Stop()
				running = false
			}
			phase(st, PhaseSwitch, 0)
			if err := t.SetMode(ctx, st.Mode); err != nil {
				return results, fmt.Errorf("sweep: switch to %s: %w", st.Mode, err)
			}
			mode = st.Mode
		}
		if err := t.SetConcurrency(st.Concurrency); err != nil {
			return results, fmt.Errorf("sweep: %w", err)
		}
		if !running {
			t.Start()
			running = true
		}
		phase(st, PhaseWarmup, c.Warmup)
		if err := sleep(ctx, clk, c.Warmup); err != nil {
			return results, err
		}
		p.Elapsed += c.Warmup
		t.Reset()
		phase(st, PhaseMeasure, c.Measure)
		every := c.Measure / time.Duration(c.Snapshots)
		var snaps []loadgen.Stats
		for range c.Snapshots {
			if err := sleep(ctx, clk, every); err != nil {
				return results, err
			}
			snaps = append(snaps, t.Snapshot().Window)
			p.Snapshot++
			if s.OnProgress != nil {
				s.OnProgress(p)
			}
		}
		p.Elapsed += c.Measure
		if !finishedAny(snaps) {
			return results, fmt.Errorf("sweep: %s at %d: no request finished during the %s measurement, so there is nothing to report: lengthen --measure (a turn can take 20 s or more)",
				st.Mode, st.Concurrency, shortDuration(c.Measure))
		}
		if failed := failedOnly(snaps); failed != "" {
			// Every latency would read 0 ms, inside any objective.
			return results, fmt.Errorf("sweep: %s at %d: no request succeeded during the %s measurement (%s), so there are no latencies to report: check the workers, or --target",
				st.Mode, st.Concurrency, shortDuration(c.Measure), failed)
		}
		rl := RunLevel{Repeat: st.Repeat, Level: LevelFromStats(st.Mode, st.Concurrency, snaps)}
		if s.Save != nil {
			if err := s.Save(ctx, rl); err != nil {
				return results, fmt.Errorf("sweep: %w", err)
			}
		}
		results = append(results, rl)
		p.Finished++
		if c.Cooldown > 0 && i < len(todo)-1 {
			t.Stop()
			running = false
			phase(st, PhaseCooldown, c.Cooldown)
			if err := sleep(ctx, clk, c.Cooldown); err != nil {
				return results, err
			}
			p.Elapsed += c.Cooldown
		}
	}
	if running {
		t.Stop()
		running = false
	}
	phase(Step{}, PhaseDone, 0)
	return results, nil
}

// finishedAny reports whether any request, successful or failed, finished
// within the snapshots' windows: without one, every figure would read 0.
func finishedAny(snaps []loadgen.Stats) bool {
	for _, s := range snaps {
		if s.Completed+s.Errors > 0 {
			return true
		}
	}
	return false
}

// failedOnly says which errors the snapshots' windows held, as "12
// connect", when none held a successful request; "" when one did.
func failedOnly(snaps []loadgen.Stats) string {
	classes := map[loadgen.ErrorClass]int{}
	for _, s := range snaps {
		if s.Completed > 0 {
			return ""
		}
		for c, n := range s.ErrorsByClass {
			classes[c] = max(classes[c], n)
		}
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(classes)) {
		parts = append(parts, fmt.Sprintf("%d %s", classes[c], c))
	}
	if len(parts) == 0 {
		return "every request failed"
	}
	return strings.Join(parts, ", ") + " failed"
}

// sleep waits d on clk, or until ctx ends; on a discrete-event loop's clock
// it runs the loop for d.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	return clock.Sleep(ctx, clk, d)
}

// LevelFromStats averages snapshots of the rolling window into a level. Each
// quantile is averaged over the snapshots that had data for it, so that an
// early snapshot with no finished request does not pull it towards zero.
// Figures are rounded as in the seeds: ms and percentages to 0.1, rates to
// 6 decimals.
func LevelFromStats(mode string, concurrency int, snaps []loadgen.Stats) Level {
	l := Level{Mode: mode, Concurrency: concurrency}
	quantile := func(get func(loadgen.Stats) loadgen.Quantiles, p func(loadgen.Quantiles) float64) float64 {
		var sum float64
		n := 0
		for _, s := range snaps {
			if q := get(s); q.Count > 0 {
				sum += p(q)
				n++
			}
		}
		if n == 0 {
			return 0
		}
		return round(sum/float64(n), 1)
	}
	mean := func(get func(loadgen.Stats) float64, digits int) float64 {
		if len(snaps) == 0 {
			return 0
		}
		var sum float64
		for _, s := range snaps {
			sum += get(s)
		}
		return round(sum/float64(len(snaps)), digits)
	}
	ttft := func(s loadgen.Stats) loadgen.Quantiles { return s.TTFT }
	tpot := func(s loadgen.Stats) loadgen.Quantiles { return s.TPOT }
	e2e := func(s loadgen.Stats) loadgen.Quantiles { return s.E2E }
	p50 := func(q loadgen.Quantiles) float64 { return q.P50 }
	p95 := func(q loadgen.Quantiles) float64 { return q.P95 }
	l.TTFTP50, l.TTFTP95 = quantile(ttft, p50), quantile(ttft, p95)
	l.TPOTP50, l.TPOTP95 = quantile(tpot, p50), quantile(tpot, p95)
	l.LatencyP50, l.LatencyP95 = quantile(e2e, p50), quantile(e2e, p95)
	l.KVHitRate = hitMean(snaps)
	l.OracleHitRate = oracleMean(snaps)
	l.TOPS = mean(func(s loadgen.Stats) float64 { return s.OutputTokensPerSec }, 6)
	errPct := mean(func(s loadgen.Stats) float64 { return 100 * s.ErrorRate }, 1)
	rps := mean(func(s loadgen.Stats) float64 { return s.RequestsPerSec }, 6)
	goodput := mean(func(s loadgen.Stats) float64 { return s.GoodputPerSec }, 6)
	l.ErrorPct, l.ActualRPS, l.Goodput = &errPct, &rps, &goodput
	// Shed stays absent: the load generator cannot tell a router's shed 503
	// from a worker's, so a sweep counts it among the errors (ErrorPct).
	// kvlens plan, which runs the router in process, counts shed apart.
	return l
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// Aggregate averages the repeats of each level into one, keeping the sample
// standard deviation of every figure as its spread when there are at least
// two. Levels come out in the order of modes and then concurrencies given.
func Aggregate(runs []RunLevel, modes []string, levels []int) []Level {
	var out []Level
	for _, mode := range modes {
		for _, c := range levels {
			var group []Metrics
			for _, rl := range runs {
				if rl.Mode == mode && rl.Concurrency == c {
					group = append(group, rl.Metrics)
				}
			}
			if len(group) == 0 {
				continue
			}
			l := Level{Mode: mode, Concurrency: c, Repeats: len(group)}
			var spread Metrics
			for _, f := range Fields {
				var xs []float64
				for i := range group {
					if v, ok := f.Value(&group[i]); ok {
						xs = append(xs, v)
					}
				}
				if len(xs) == 0 {
					continue
				}
				mean := 0.0
				for _, x := range xs {
					mean += x
				}
				mean /= float64(len(xs))
				f.Set(&l.Metrics, round(mean, 6))
				if len(xs) > 1 {
					ss := 0.0
					for _, x := range xs {
						ss += (x - mean) * (x - mean)
					}
					f.Set(&spread, round(math.Sqrt(ss/float64(len(xs)-1)), 6))
				}
			}
			if len(group) > 1 {
				l.Spread = &spread
			}
			out = append(out, l)
		}
	}
	return out
}

// Result builds the baseline set a finished sweep produced.
func (c *SweepConfig) Result(source string, runs []RunLevel) Set {
	var deployment []string
	for _, p := range c.Deployment {
		deployment = append(deployment, p.Name+": "+p.Value)
	}
	rps := c.TargetRPS
	return Set{
		Name:       c.Name,
		Source:     source,
		Deployment: strings.Join(deployment, "; "),
		Method:     c.Method(),
		Generated:  c.Started,
		Metric:     fmt.Sprintf("kvlens rolling window (%s, client-side, AIPerf definitions)", shortDuration(c.Window)),
		TargetRPS:  &rps,
		Levels:     Aggregate(runs, c.Modes, c.Levels),
	}
}

// Method describes the measurement in one line.
func (c *SweepConfig) Method() string {
	m := fmt.Sprintf("%s warmup per level, %s measurement (%d snapshots @ %s, averaged)",
		shortDuration(c.Warmup), shortDuration(c.Measure), c.Snapshots, shortDuration(c.Measure/time.Duration(c.Snapshots)))
	if c.Cooldown > 0 {
		m += fmt.Sprintf(", %s cooldown", shortDuration(c.Cooldown))
	}
	if c.Repeats > 1 {
		m += fmt.Sprintf(", %d sweeps averaged", c.Repeats)
	}
	return m
}

// shortDuration writes durations in seconds as the seeds do: 1m0s as 60s,
// 40s/3 as 13.3s.
func shortDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return strconv.FormatFloat(round(d.Seconds(), 1), 'f', -1, 64) + "s"
}

// hitMean averages the hit rate, in percent, over the snapshots whose
// requests reported cached tokens; nil when none did, since a hit rate the
// workers never reported is unknown, not 0%.
func hitMean(snaps []loadgen.Stats) *float64 {
	var sum float64
	n := 0
	for _, s := range snaps {
		if s.KVHitRequests > 0 {
			sum += 100 * s.KVHitRate
			n++
		}
	}
	if n == 0 {
		return nil
	}
	v := round(sum/float64(n), 1)
	return &v
}

// oracleMean averages the snapshots' oracle hit rates, in percent, over
// those that have one; nil when none has.
func oracleMean(snaps []loadgen.Stats) *float64 {
	var sum float64
	n := 0
	for _, s := range snaps {
		if s.OracleHitRate != nil {
			sum += 100 * *s.OracleHitRate
			n++
		}
	}
	if n == 0 {
		return nil
	}
	v := round(sum/float64(n), 1)
	return &v
}
