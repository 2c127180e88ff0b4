package demo

import (
	"context"
	_ "embed"
	"fmt"
	"reflect"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
)

// policyCurvesJSON holds every routing policy's curve on the default demo's
// simulated fleet and load, measured in virtual time by measurePolicyCurves
// (go test ./demo -run TestPolicyCurvesComeFromTheSimulator -update-curves).
// The
// baseline chart draws a lane's policy's curve under its live point, named
// for what it is, such as "kvlens kv · simulated", beside the curves
// measured on hardware.
//
//go:embed policycurves.json
var policyCurvesJSON []byte

// PolicyCurvesName names the stored set of simulated policy curves.
const PolicyCurvesName = "kvlens policies · simulated"

// PolicyCurves returns the stored simulated curve of every policy.
func PolicyCurves() (*baselines.Set, error) {
	s, _, err := baselines.Decode(policyCurvesJSON)
	if err != nil {
		return nil, fmt.Errorf("demo: the stored policy curves: %w", err)
	}
	s.Sort()
	return &s, nil
}

// policySweep is the virtual-time sweep that measures one policy's stored
// curve: the default demo's fleet and load over the slider's levels, with
// the seeds' method (60 s warmup, 300 s measured in 3 snapshots), seed 1,
// each policy on a fresh deployment so that any one can be measured again
// alone.
func policySweep(policy string) (baselines.SweepConfig, simulate.Config) {
	sw, sc := liveSweep(DefaultConfig(), []string{policy}, 60*time.Second, 300*time.Second)
	sw.Name = PolicyCurvesName
	return sw, sc
}

// measurePolicyCurves sweeps each policy in virtual time, two at a time,
// and gathers their curves into one set.
func measurePolicyCurves(ctx context.Context, policies []string) (baselines.Set, error) {
	sets := make([]baselines.Set, len(policies))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i, p := range policies {
		g.Go(func() error {
			sw, sc := policySweep(p)
			runs, err := simulate.Sweep(ctx, sw, sc, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			sets[i] = sw.Result("kvlens, in virtual time: each policy swept alone on the default demo's simulated fleet and load", runs)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return baselines.Set{}, err
	}
	all := sets[0]
	for _, s := range sets[1:] {
		all.Levels = append(all.Levels, s.Levels...)
	}
	all.Sort()
	return all, nil
}

// curveSettings is what a stored policy curve depends on: the simulated
// fleet, the router's settings and the whole load but for its level, seed
// and objectives, which move a point along the curve or judge it, not the
// curve itself.
type curveSettings struct {
	Workers      int
	Profile      sim.Profile
	Router       router.Config
	MaxBatchSize int
	Load         loadgen.Config
}

func settingsOf(cfg Config) curveSettings {
	l := cfg.Load
	l.Concurrency, l.Seed, l.SLO = 0, 0, loadgen.SLO{}
	return curveSettings{Workers: cfg.SimWorkers, Profile: cfg.SimProfile, Router: cfg.Router, MaxBatchSize: cfg.MaxBatchSize, Load: l}
}

// PolicyCurvesFit says whether the stored policy curves describe cfg's
// fleet: the simulated one, with the default demo's settings. Against real
// workers, another profile or another workload they would mislead, so the
// chart leaves them out.
func PolicyCurvesFit(cfg Config) bool {
	return len(cfg.Workers) == 0 && cfg.Target == "" &&
		reflect.DeepEqual(settingsOf(cfg), settingsOf(DefaultConfig()))
}
