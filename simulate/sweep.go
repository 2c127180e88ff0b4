package simulate

import (
	"context"
	"fmt"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
)

// target is a Pipeline as a baselines.Sweep drives it.
type target struct {
	*loadgen.Generator
	p *Pipeline
}

func (t target) SetMode(_ context.Context, mode string) error { return t.p.SetPolicy(mode) }

// Target returns the pipeline as a sweep's target; the sweep's Clock must be
// p.Loop.
func (p *Pipeline) Target() baselines.Target { return target{p.Gen, p} }

// Sweep runs a sweep over a fresh pipeline in virtual time, exactly as
// `kvlens sweep` runs one in real time (the same baselines.Sweep, with the
// loop as its clock), and returns every finished level. onProgress, if not
// nil, is called at every phase and snapshot, with times in virtual time;
// it is how a caller such as the dashboard shows a progress bar. cfg.Policy
// is ignored: the sweep sets each mode.
func Sweep(ctx context.Context, c baselines.SweepConfig, cfg Config, onProgress func(baselines.Progress)) ([]baselines.RunLevel, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	cfg.Policy = c.Modes[0]
	cfg.Load.Concurrency = c.Levels[0]
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	sw := baselines.Sweep{Config: c, Target: p.Target(), Clock: p.Loop, OnProgress: onProgress}
	return sw.Run(ctx)
}

// Deployment describes a simulated deployment for a report's deployment
// table, saying that it ran in virtual time and with which profile.
func Deployment(cfg Config) []baselines.Param {
	prof := cfg.Profile
	return []baselines.Param{
		{Name: "Simulated", Value: fmt.Sprintf("yes: virtual time (kvlens discrete-event simulation, seed %d), no GPUs or HTTP", cfg.Seed)},
		{Name: "GPU", Value: fmt.Sprintf("%dx simulated worker (kvlens sim)", cfg.Workers)},
		{Name: "Engine profile", Value: fmt.Sprintf("%s: max batch %d, max tokens %d, block size %d, %d KV blocks",
			prof.Name, prof.MaxBatchSize, prof.MaxNumTokens, prof.BlockSize, prof.KVBlocks)},
		{Name: "Frontend", Value: fmt.Sprintf("kvlens router in process (admission %s)", admission(cfg.Router.Admission))},
	}
}

func admission(a string) string {
	if a == "" {
		return "queue"
	}
	return a
}
