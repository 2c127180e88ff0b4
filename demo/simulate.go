package demo

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
	"github.com/kvlens/kvlens/store"
	"github.com/kvlens/kvlens/web"
)

// Simulation length per level: a minute of warmup and two measured minutes
// of virtual time, about half a second of wall time each on this kind of
// machine.
const (
	simWarmup  = 60 * time.Second
	simMeasure = 120 * time.Second
)

// simulator runs "simulate this curve" for the dashboard: the live fleet's
// settings as a virtual-time sweep over the slider's levels, round-robin
// against KV-aware, through the same sweep runner as kvlens sweep.
type simulator struct {
	sim   simulate.Config
	sweep baselines.SweepConfig
	db    *store.DB // nil keeps results in memory only
	// noStore says why db is nil, for the page.
	noStore string
	ctx     context.Context
	wg      sync.WaitGroup

	mu     sync.Mutex
	status web.SimStatus
}

var _ web.Simulator = (*simulator)(nil)

func newSimulator(ctx context.Context, cfg Config, db *store.DB, noStore string) (*simulator, error) {
	sw, sc := liveSweep(cfg, []string{"round_robin", "kv"}, simWarmup, simMeasure)
	if err := sw.Validate(); err != nil {
		return nil, fmt.Errorf("simulate this curve: %w", err)
	}
	return &simulator{sim: sc, sweep: sw, db: db, noStore: noStore, ctx: ctx}, nil
}

// liveSweep is a virtual-time sweep of cfg's simulated fleet and load over
// the slider's levels, for modes, with the page's SLOs: "simulate this
// curve" and the stored policy curves both measure with it.
func liveSweep(cfg Config, modes []string, warmup, measure time.Duration) (baselines.SweepConfig, simulate.Config) {
	load := cfg.Load
	load.SLO = loadgen.SLO{TTFT: cfg.Dashboard.SLOTTFT, TPOT: cfg.Dashboard.SLOTPOT}
	sc := simulate.Config{Profile: cfg.SimProfile, Workers: cfg.SimWorkers, Router: cfg.Router, Load: load, Seed: load.Seed}
	var levels []int
	for c := cfg.Dashboard.SliderMin; c <= cfg.Dashboard.SliderMax && cfg.Dashboard.SliderStep > 0; c += cfg.Dashboard.SliderStep {
		if c > 0 {
			levels = append(levels, c)
		}
	}
	sw := baselines.SweepConfig{
		Levels: levels, Modes: modes,
		Warmup: warmup, Measure: measure, Snapshots: 3, Repeats: 1,
		SLO:       baselines.SLO{TTFT: cfg.Dashboard.SLOTTFT, TPOT: cfg.Dashboard.SLOTPOT},
		TargetRPS: load.StartRate, Window: load.Window,
		Workload:   fmt.Sprintf("Multi-turn chat (%s turns per conversation, max_tokens %d)", load.Turns.String(), load.MaxTokens),
		Deployment: simulate.Deployment(sc),
	}
	return sw, sc
}

// Simulate implements web.Simulator.
func (s *simulator) Simulate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Running {
		return web.ErrSimulating
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("kvlens is shutting down")
	}
	s.status = web.SimStatus{Running: true, Steps: len(s.sweep.Levels) * len(s.sweep.Modes), Phase: "starting"}
	s.wg.Add(1)
	go s.run()
	return nil
}

// SimStatus implements web.Simulator.
func (s *simulator) SimStatus() web.SimStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *simulator) run() {
	defer s.wg.Done()
	if err := lowerPriority(); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens: simulate this curve: could not lower its priority (%v); the live demo may slow while it runs\n", err)
	}
	start := time.Now()
	c := s.sweep
	c.Name = "simulated " + start.Format("2006-01-02 15:04:05")
	results, err := simulate.Sweep(s.ctx, c, s.sim, func(p baselines.Progress) {
		s.mu.Lock()
		s.status.Finished, s.status.Steps = p.Finished, p.Steps
		s.status.Phase = fmt.Sprintf("%s: %s at %d", p.Phase, router.Describe(p.Step.Mode), p.Step.Concurrency)
		s.mu.Unlock()
	})
	st := web.SimStatus{Steps: s.sweep.Repeats * len(s.sweep.Levels) * len(s.sweep.Modes), Took: time.Since(start)}
	if err != nil {
		st.Err = err.Error()
	} else {
		set := c.Result("simulated in virtual time from the dashboard", results)
		set.Sort()
		st.Result, st.Finished = &set, st.Steps
		st.NotStored = s.noStore
		if s.db != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, serr := s.db.SaveSet(ctx, &set, false)
			cancel()
			if st.Stored = serr == nil; serr != nil {
				st.NotStored = serr.Error()
			}
		}
	}
	s.mu.Lock()
	s.status = st
	s.mu.Unlock()
	// The run's pipeline held about 110 MB, so at kvlens's GOGC=400
	// (loadgen.TuneGC) the heap grew to about 550 MB; once it is garbage
	// nothing allocates enough to start a collection that would lower that
	// goal, and the runtime keeps the pages: RSS stayed at 640 MB with
	// 65 MB live. One full collection and scavenge per run, which an
	// operator starts and which takes seconds itself, hands them back.
	debug.FreeOSMemory()
}

// wait returns once no simulation runs; the demo's context ends them.
func (s *simulator) wait() { s.wg.Wait() }

// fleetFaults injects the dashboard's faults into every simulated worker of
// every lane, so that both sides of the A/B view suffer alike.
type fleetFaults []*sim.Fleet

var _ web.FaultInjector = fleetFaults{}

// InjectFault implements web.FaultInjector: one kind at a time, so a new
// choice replaces the last.
func (f fleetFaults) InjectFault(kind string, amount float64) error {
	var fs sim.Faults
	frac := amount / 100
	switch kind {
	case "none":
	case "503":
		fs.Error503 = frac
	case "429":
		fs.Error429 = frac
	case "500":
		fs.Error500 = frac
	case "cut":
		fs.StreamCut = frac
	case "slow":
		fs.Slowdown = amount
	default:
		return fmt.Errorf("unknown fault %q", kind)
	}
	for _, fleet := range f {
		for _, w := range fleet.Workers {
			if err := w.SetFaults(fs); err != nil {
				return err
			}
		}
	}
	return nil
}
