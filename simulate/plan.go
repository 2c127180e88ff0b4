package simulate

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
)

// An envelope is searched on a grid no coarser than DefaultPlanStep
// conversations, each level under at least MinPlanSeeds seeds.
const (
	DefaultPlanStep = 5
	MinPlanSeeds    = 3
)

// DefaultSeeds are the seeds a plan probes every level with when it is
// given none: seed and the MinPlanSeeds-1 after it.
func DefaultSeeds(seed uint64) []uint64 {
	seeds := make([]uint64, MinPlanSeeds)
	for i := range seeds {
		seeds[i] = seed + uint64(i)
	}
	return seeds
}

// PlanConfig asks the capacity planner a question.
type PlanConfig struct {
	// Base is the deployment and workload; its Workers and Policy are set
	// by the planner.
	Base Config
	// Policies are the routing policies to plan for.
	Policies []string
	// Workers are the worker counts to find the highest concurrency for.
	Workers []int
	// Target, when positive, is a concurrency to find the worker count for.
	Target int
	// MaxWorkers bounds the search for Target's worker count.
	MaxWorkers int
	// SLO is what a level must hold: TTFT p95 ≤ SLO.TTFT, TPOT p95 ≤
	// SLO.TPOT, and no failed or shed request.
	SLO baselines.SLO
	// Warmup and Measure time each probe, as a sweep's level.
	Warmup, Measure time.Duration
	// PerWorker bounds the concurrency searched: PerWorker × workers.
	PerWorker int
	// Step is the envelope's grid, in conversations (at most 5; 0 means 5).
	Step int
	// Seeds are the seeds every level is probed with (at least 3); a level
	// holds only if it holds under each. Empty means Base.Seed and the two
	// after it.
	Seeds []uint64
	// Parallel is how many probes run at once; 0 means 2.
	Parallel int
	// PerSeed walks each policy's grid on past the envelope, under the
	// seeds that still hold, until every seed has failed (or the bound is
	// reached), to give each seed's own envelope in Capacity.PerSeed.
	PerSeed bool
	// OnProbe, if not nil, sees every probe once its level is done, one
	// call at a time, in seed order.
	OnProbe func(Probe)
}

// Probe is one simulated level under one seed.
type Probe struct {
	Policy      string
	Workers     int
	Concurrency int
	Seed        uint64
	// Level holds the level's figures, as a sweep stores them.
	Level baselines.Level
	// Holds says the level met the SLO with no failed request; Misses,
	// when it did not, says why, as "TTFT p95 827 ms".
	Holds  bool
	Misses string
}

// Capacity is the planner's answer for one policy and worker count.
type Capacity struct {
	Policy  string
	Workers int
	// MaxConcurrency is the envelope: the highest level of the grid such
	// that it and every level below it hold the SLO under every seed; 0 if
	// the first level does not.
	MaxConcurrency int
	// At is the level measured at MaxConcurrency, each of its figures the
	// worst over the seeds (see worst).
	At baselines.Level
	// FirstFail is the grid's first level that failed under some seed,
	// FailSeed that seed and FailWhy why (as Probe.Misses); 0 when every
	// level searched held.
	FirstFail int
	FailSeed  uint64
	FailWhy   string
	// PerSeed, with PlanConfig.PerSeed, is each seed's own envelope, in
	// the order of PlanConfig.Seeds: the highest level such that it and
	// every level below it hold under that seed.
	PerSeed []int
}

// PlanResult is the planner's answer.
type PlanResult struct {
	// Capacities holds one row per policy and worker count.
	Capacities []Capacity
	// Needed is, per policy, the fewest workers holding the SLO at the
	// target concurrency; -1 when MaxWorkers do not.
	Needed map[string]int
}

// misses says why a level does not meet the SLO with no failed request
// (shed requests fail with 503, so they count), or "" when it does: the
// first reason, as "TTFT p95 827 ms".
func misses(l baselines.Level, slo baselines.SLO) string {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	switch {
	case l.TTFTP95 <= 0:
		return "no request answered"
	case l.ErrorPct == nil:
		return "errors not counted"
	case *l.ErrorPct > 0:
		return fmt.Sprintf("%.2g%% failed or shed", *l.ErrorPct)
	case l.TTFTP95 > ms(slo.TTFT):
		return fmt.Sprintf("TTFT p95 %.0f ms", l.TTFTP95)
	case l.TPOTP95 > ms(slo.TPOT):
		return fmt.Sprintf("TPOT p95 %.1f ms", l.TPOTP95)
	}
	return ""
}

// worst is the seeds' probes of one level as one level: the first seed's,
// with the figures the SLO and the routing are judged on each taken from
// the seed that did worst on it (the highest TTFT and TPOT p95, the lowest
// KV hit rate), so that a figure printed at the envelope is one every
// seed met, not one seed's luck.
func worst(probes []Probe) baselines.Level {
	l := probes[0].Level
	for _, pr := range probes[1:] {
		m := pr.Level.Metrics
		l.TTFTP95 = max(l.TTFTP95, m.TTFTP95)
		l.TPOTP95 = max(l.TPOTP95, m.TPOTP95)
		if l.KVHitRate != nil && (m.KVHitRate == nil || *m.KVHitRate < *l.KVHitRate) {
			l.KVHitRate = m.KVHitRate
		}
	}
	return l
}

// probe simulates one level under one seed on a fresh pipeline.
func (pc *PlanConfig) probe(ctx context.Context, policy string, workers, concurrency int, seed uint64) (Probe, error) {
	cfg := pc.Base
	cfg.Workers, cfg.Policy, cfg.Seed = workers, policy, seed
	cfg.Load.Concurrency = concurrency
	cfg.Load.SLO = loadgen.SLO{TTFT: pc.SLO.TTFT, TPOT: pc.SLO.TPOT}
	p, err := New(cfg)
	if err != nil {
		return Probe{}, err
	}
	defer p.Close()
	c := baselines.SweepConfig{Levels: []int{concurrency}, Modes: []string{policy}, Warmup: pc.Warmup, Measure: pc.Measure,
		Snapshots: 3, Repeats: 1, SLO: pc.SLO}
	sw := baselines.Sweep{Config: c, Target: p.Target(), Clock: p.Loop}
	levels, err := sw.Run(ctx)
	if err != nil {
		return Probe{}, err
	}
	l := levels[0].Level
	why := misses(l, pc.SLO)
	return Probe{Policy: policy, Workers: workers, Concurrency: concurrency, Seed: seed, Level: l, Holds: why == "", Misses: why}, nil
}

// level probes one grid level under every seed, Parallel at a time, and
// returns the first seed's probe and the first seed under which the level
// fails (ok false), in seed order.
func (pc *PlanConfig) level(ctx context.Context, policy string, workers, concurrency int) (first Probe, failSeed uint64, ok bool, err error) {
	probes, err := pc.probeSeeds(ctx, policy, workers, concurrency, pc.Seeds)
	if err != nil {
		return Probe{}, 0, false, err
	}
	for _, pr := range probes {
		if !pr.Holds {
			return probes[0], pr.Seed, false, nil
		}
	}
	return probes[0], 0, true, nil
}

// probeSeeds probes one grid level under each of seeds, Parallel at a
// time, and returns the probes in seed order.
func (pc *PlanConfig) probeSeeds(ctx context.Context, policy string, workers, concurrency int, seeds []uint64) ([]Probe, error) {
	probes := make([]Probe, len(seeds))
	errs := make([]error, len(seeds))
	sem := make(chan struct{}, max(1, pc.Parallel))
	var wg sync.WaitGroup
	for i, seed := range seeds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			probes[i], errs[i] = pc.probe(ctx, policy, workers, concurrency, seed)
		}()
	}
	wg.Wait()
	// The seeds share their settings, so one bad setting fails each alike:
	// the first error says it once.
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if pc.OnProbe != nil {
		for _, pr := range probes {
			pc.OnProbe(pr)
		}
	}
	return probes, nil
}

// maxConcurrency walks the grid up from its first level, each level under
// every seed, and stops at the first level that fails under any: the
// envelope is the level below it. Nothing is assumed about levels not
// probed, so a curve that holds again above a failure does not count.
//
// With PerSeed it walks on under the seeds that still hold, recording each
// seed's envelope, until none is left.
func (pc *PlanConfig) maxConcurrency(ctx context.Context, policy string, workers int) (Capacity, error) {
	c := Capacity{Policy: policy, Workers: workers}
	if pc.PerSeed {
		c.PerSeed = make([]int, len(pc.Seeds))
	}
	left := slices.Clone(pc.Seeds) // the seeds that have held at every level so far
	for n := pc.Step; n <= pc.PerWorker*workers && len(left) > 0; n += pc.Step {
		probes, err := pc.probeSeeds(ctx, policy, workers, n, left)
		if err != nil {
			return c, err
		}
		var still []uint64
		for _, pr := range probes {
			if !pr.Holds {
				if c.FirstFail == 0 {
					c.FirstFail, c.FailSeed, c.FailWhy = n, pr.Seed, pr.Misses
				}
				continue
			}
			still = append(still, pr.Seed)
			if c.PerSeed != nil {
				c.PerSeed[slices.Index(pc.Seeds, pr.Seed)] = n
			}
		}
		if c.FirstFail == 0 {
			c.MaxConcurrency, c.At = n, worst(probes)
		}
		left = still
		if !pc.PerSeed && c.FirstFail > 0 {
			break
		}
	}
	return c, nil
}

// Plan answers a PlanConfig by simulating levels: per policy and worker
// count, the highest concurrency holding the SLO; and per policy, the fewest
// workers that hold it at the target concurrency.
func Plan(ctx context.Context, pc PlanConfig) (PlanResult, error) {
	switch {
	case len(pc.Policies) == 0:
		return PlanResult{}, fmt.Errorf("simulate: plan: no policies")
	case len(pc.Workers) == 0 && pc.Target <= 0:
		return PlanResult{}, fmt.Errorf("simulate: plan: no worker counts and no target concurrency")
	case pc.PerWorker < 1 || pc.Measure <= 0:
		return PlanResult{}, fmt.Errorf("simulate: plan: need a positive per-worker bound and measurement")
	case pc.Warmup < 0:
		return PlanResult{}, fmt.Errorf("simulate: plan: warmup %v must not be negative", pc.Warmup)
	}
	if pc.MaxWorkers < 1 {
		pc.MaxWorkers = 64
	}
	switch {
	case pc.Step == 0:
		pc.Step = DefaultPlanStep
	case pc.Step < 1 || pc.Step > DefaultPlanStep:
		return PlanResult{}, fmt.Errorf("simulate: plan: a grid step of %d conversations; want 1 to %d", pc.Step, DefaultPlanStep)
	}
	if len(pc.Seeds) == 0 {
		pc.Seeds = DefaultSeeds(pc.Base.Seed)
	}
	if len(pc.Seeds) < MinPlanSeeds {
		return PlanResult{}, fmt.Errorf("simulate: plan: %d seeds; an envelope needs at least %d", len(pc.Seeds), MinPlanSeeds)
	}
	if pc.Parallel == 0 {
		pc.Parallel = 2
	}
	res := PlanResult{Needed: map[string]int{}}
	for _, pol := range pc.Policies {
		for _, n := range pc.Workers {
			c, err := pc.maxConcurrency(ctx, pol, n)
			if err != nil {
				return res, err
			}
			res.Capacities = append(res.Capacities, c)
		}
		if pc.Target <= 0 {
			continue
		}
		// The fewest workers: what the rows above already showed bounds the
		// search, and the rest is probed at the target concurrency.
		lo, hi := targetBounds(res.Capacities, pol, pc.Target)
		n, err := fewestWorkers(lo, hi, pc.MaxWorkers, func(n int) (bool, error) {
			_, _, ok, err := pc.level(ctx, pol, n, pc.Target)
			return ok, err
		})
		if err != nil {
			return res, err
		}
		res.Needed[pol] = n
	}
	return res, nil
}

// targetBounds reads the capacity rows of policy for the worker counts they
// settle at concurrency target: hi, the fewest workers whose highest
// concurrency reaches it (0 if none does), and lo, the most workers below
// hi whose highest concurrency falls short (0 if none). The capacity search
// already assumes a level that holds implies every lower one does, so a
// row reaching the target holds at it; without this, a search doubling
// from one worker could step over that count, where levels near the SLO
// are noisy, and answer more workers than the table shows are needed.
func targetBounds(rows []Capacity, policy string, target int) (lo, hi int) {
	for _, c := range rows {
		if c.Policy == policy && c.MaxConcurrency >= target && (hi == 0 || c.Workers < hi) {
			hi = c.Workers
		}
	}
	for _, c := range rows {
		if c.Policy == policy && c.MaxConcurrency < target && c.Workers > lo && (hi == 0 || c.Workers < hi) {
			lo = c.Workers
		}
	}
	return lo, hi
}

// fewestWorkers finds the fewest workers, above lo (known to fail) and at
// most hi (known to hold, when positive) or maxWorkers, for which holds
// reports true: it doubles from lo until a count holds, then bisects. It
// returns -1 when maxWorkers do not hold.
func fewestWorkers(lo, hi, maxWorkers int, holds func(int) (bool, error)) (int, error) {
	if hi <= 0 {
		if lo >= maxWorkers {
			return -1, nil
		}
		for n := min(max(1, 2*lo), maxWorkers); ; n = min(2*n, maxWorkers) {
			ok, err := holds(n)
			if err != nil {
				return 0, err
			}
			if ok {
				hi = n
				break
			}
			if n >= maxWorkers {
				return -1, nil
			}
			lo = n
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := holds(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

var planColors = []color.Color{
	color.RGBA{R: 0x6b, G: 0x72, B: 0x80, A: 0xff},
	color.RGBA{R: 0x25, G: 0x63, B: 0xeb, A: 0xff},
	color.RGBA{R: 0x76, G: 0xb9, B: 0x00, A: 0xff},
	color.RGBA{R: 0xd9, G: 0x77, B: 0x06, A: 0xff},
}

// WritePlanChart draws the highest concurrency holding the SLO against the
// worker count, one line per policy, and writes it to w as a PNG.
func WritePlanChart(w io.Writer, r PlanResult, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Workers"
	p.Y.Label.Text = "Highest concurrency holding the SLO"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	var order []string
	byPolicy := map[string]plotter.XYs{}
	for _, c := range r.Capacities {
		if _, ok := byPolicy[c.Policy]; !ok {
			order = append(order, c.Policy)
		}
		byPolicy[c.Policy] = append(byPolicy[c.Policy], plotter.XY{X: float64(c.Workers), Y: float64(c.MaxConcurrency)})
	}
	for i, pol := range order {
		line, points, err := plotter.NewLinePoints(byPolicy[pol])
		if err != nil {
			return fmt.Errorf("plan chart: %s: %w", pol, err)
		}
		c := planColors[i%len(planColors)]
		line.Color, line.Width = c, vg.Points(2)
		points.Color, points.Shape = c, draw.CircleGlyph{}
		p.Add(line, points)
		short, long := baselines.Label(pol)
		p.Legend.Add(fmt.Sprintf("%s (%s)", long, short), line, points)
	}
	if math.IsInf(p.Y.Max, 0) || p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	c := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(10*vg.Inch, 5.625*vg.Inch), vgimg.UseDPI(150))}
	p.Draw(draw.New(c))
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("plan chart: write PNG: %w", err)
	}
	return nil
}
