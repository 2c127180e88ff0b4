// Package calibrate holds the simulator against a measured baseline set: it
// sweeps simulated routing policies in virtual time over several seeds,
// averages each level over the seeds, and reports every figure beside the
// measured one with their difference, marking those outside a tolerance.
//
// It answers one question, issue 18's: is the simulated fleet under
// round_robin and under dynamo within ±10% of the seeds' averaged curves?
package calibrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
)

// Tolerance is how far, as a fraction of the measured figure, a simulated
// figure may lie from it and still count as calibrated.
const Tolerance = 0.10

// Counterpart names, for each simulated policy, the measured mode it is held
// against. The seeds' "kv" column is Dynamo 0.9's KV router, which the
// dynamo policy replicates.
var Counterpart = map[string]string{
	"round_robin": "round_robin",
	"dynamo":      "kv",
	"kv":          "kv",
}

// Config is what a calibration runs.
type Config struct {
	// Profile is every simulated engine's profile.
	Profile sim.Profile
	// Workers is the number of simulated engines.
	Workers int
	// Levels are the concurrencies, run in this order as one sweep does.
	Levels []int
	// Modes are the simulated policies, each with a Counterpart.
	Modes []string
	// Seeds are the seeds each sweep runs with; levels are averaged over them.
	Seeds []uint64
	// Warmup and Measure time each level, in virtual time.
	Warmup, Measure time.Duration
	// Parallel is how many seeds' sweeps run at once.
	Parallel int
	// Reference is the measured set the figures are held against.
	Reference *baselines.Set
	// Turns is the distribution of turns per conversation; empty means the
	// load generator's default, kvlens's chat: 5, as the original demo's
	// code, which measured the reference, ran them (docs/simulator.md).
	Turns loadgen.TurnDist
	// Staggered starts the conversations a level starts at once part-way
	// through, as kvlens's own load does. By default they start in step,
	// every one from its first turn, as the original demo's generator
	// started them when it measured the reference: the waves that follow
	// are part of what was measured (docs/simulator.md).
	Staggered bool
}

// Check reports the first setting that cannot run.
func (c Config) Check() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("calibrate: %d workers: need at least 1", c.Workers)
	case c.Workers > sim.MaxWorkers:
		// Found by the first seed's sweep otherwise, as a failure.
		return fmt.Errorf("calibrate: %d workers: at most %d", c.Workers, sim.MaxWorkers)
	case len(c.Levels) == 0:
		return errors.New("calibrate: no level given")
	case len(c.Modes) == 0:
		return errors.New("calibrate: no mode given")
	case len(c.Seeds) == 0:
		return errors.New("calibrate: no seed given")
	case c.Parallel < 1:
		return fmt.Errorf("calibrate: parallel %d: need at least 1", c.Parallel)
	case c.Reference == nil:
		return errors.New("calibrate: no reference set")
	}
	for _, m := range c.Modes {
		want, ok := Counterpart[m]
		if !ok {
			return fmt.Errorf("calibrate: mode %s has no measured counterpart (want one of round_robin, dynamo, kv)", m)
		}
		for _, l := range c.Levels {
			if _, ok := c.Reference.Level(want, l); !ok {
				return fmt.Errorf("calibrate: the reference set %q has no %s level at %d", c.Reference.Name, want, l)
			}
		}
	}
	sc := c.sweep()
	return sc.Validate()
}

// sweep is the sweep each seed runs: the settings of
// `kvlens sweep --virtual` with the config's levels, modes and times.
func (c Config) sweep() baselines.SweepConfig {
	load := loadgen.DefaultConfig()
	return baselines.SweepConfig{
		Levels: c.Levels, Modes: c.Modes, Warmup: c.Warmup, Measure: c.Measure,
		Snapshots: 3, Repeats: 1, SLO: baselines.DefaultSLO,
		TargetRPS: load.StartRate, Window: load.Window,
	}
}

// Deployment is the simulated deployment of one seed, as
// `kvlens sweep --virtual` builds it.
func (c Config) Deployment(seed uint64) simulate.Config {
	load := loadgen.DefaultConfig()
	load.SLO = loadgen.SLO{TTFT: baselines.DefaultSLO.TTFT, TPOT: baselines.DefaultSLO.TPOT}
	if len(c.Turns.Counts) > 0 {
		load.Turns = c.Turns
	}
	load.InStep = !c.Staggered
	return simulate.Config{
		Profile: c.Profile, Workers: c.Workers, Load: load, Seed: seed,
		Router: router.Config{BlockSize: router.DefaultBlockSize, Admission: router.AdmitQueue, BusyThreshold: 1},
	}
}

// Progress says that one seed's sweep finished a level.
type Progress struct {
	// Seed is the sweep's seed.
	Seed uint64
	// Step is the level finished.
	Step baselines.Step
	// Done and Total count the levels finished so far over all seeds, and in all.
	Done, Total int
}

// Run sweeps every seed (Parallel at a time) and compares the averaged
// levels with the reference. onProgress, if not nil, is called after every
// level, from one goroutine at a time.
func Run(ctx context.Context, c Config, onProgress func(Progress)) (*Report, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	sc := c.sweep()
	total := len(c.Seeds) * len(sc.Plan())
	var (
		mu    sync.Mutex
		done  int
		runs  = make([][]baselines.RunLevel, len(c.Seeds))
		errs  = make([]error, len(c.Seeds))
		slots = make(chan struct{}, c.Parallel)
		wg    sync.WaitGroup
	)
	for i, seed := range c.Seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			runs[i], errs[i] = simulate.Sweep(ctx, sc, c.Deployment(seed), func(p baselines.Progress) {
				// A level is measured at its last snapshot.
				if p.Phase != baselines.PhaseMeasure || p.Snapshot < sc.Snapshots {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				done++
				if onProgress != nil {
					onProgress(Progress{Seed: seed, Step: p.Step, Done: done, Total: total})
				}
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("calibrate: seed %d: %w", c.Seeds[i], err)
		}
	}
	return Compare(c, runs)
}

// Compare averages each level over the seeds' sweeps (runs[i] is seed i's)
// and sets it beside the reference's.
func Compare(c Config, runs [][]baselines.RunLevel) (*Report, error) {
	r := &Report{
		Profile: c.Profile.Name, Workers: c.Workers, Seeds: slices.Clone(c.Seeds),
		Warmup: c.Warmup, Measure: c.Measure, Reference: c.Reference.Name,
		Turns: c.Turns.String(), Staggered: c.Staggered,
	}
	for _, m := range c.Modes {
		for _, l := range c.Levels {
			var got []baselines.Metrics
			for _, levels := range runs {
				for _, rl := range levels {
					if rl.Mode == m && rl.Concurrency == l {
						got = append(got, rl.Metrics)
					}
				}
			}
			if len(got) != len(runs) {
				return nil, fmt.Errorf("calibrate: %s at %d: %d of %d seeds measured it", m, l, len(got), len(runs))
			}
			ref, _ := c.Reference.Level(Counterpart[m], l)
			r.Rows = append(r.Rows, Row{Concurrency: l, Mode: m, Measured: Counterpart[m], Sim: mean(got), Seeds: ref.Metrics, PerSeed: got})
		}
	}
	return r, nil
}

// mean averages the figures the report compares, and the hit rate over
// the seeds that reported one.
func mean(ms []baselines.Metrics) baselines.Metrics {
	var s baselines.Metrics
	hit, hits := 0.0, 0
	for _, m := range ms {
		s.TTFTP50 += m.TTFTP50
		s.TTFTP95 += m.TTFTP95
		s.TPOTP50 += m.TPOTP50
		s.TOPS += m.TOPS
		if m.KVHitRate != nil {
			hit += *m.KVHitRate
			hits++
		}
	}
	n := float64(len(ms))
	s.TTFTP50, s.TTFTP95, s.TPOTP50, s.TOPS = s.TTFTP50/n, s.TTFTP95/n, s.TPOTP50/n, s.TOPS/n
	if hits > 0 {
		v := hit / float64(hits)
		s.KVHitRate = &v
	}
	return s
}
