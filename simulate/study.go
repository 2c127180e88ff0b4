package simulate

import (
	"context"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
)

// Arm is one routing setup of a scaling study.
type Arm struct {
	// Policy is the routing policy.
	Policy string
	// Admission is the router's admission (queue or shed).
	Admission string
}

// StudyRow is one arm at one worker count.
type StudyRow struct {
	Arm
	Workers, Concurrency int
	// Level holds the sweep figures (TTFT, TPOT, KV hit rate, errors).
	Level baselines.Level
	// ShedPct is the share of requests refused with 503, in percent.
	ShedPct float64
	// GoodputPerSec is requests per second that met every SLO, averaged
	// over the snapshots.
	GoodputPerSec float64
}

// Study runs each arm at each worker count, with perWorker conversations per
// worker, as one sweep level (warmup, then measure with 3 snapshots) on a
// fresh deployment: the scaling curve of seed 004.
func Study(ctx context.Context, base Config, arms []Arm, workers []int, perWorker int, slo baselines.SLO, warmup, measure time.Duration) ([]StudyRow, error) {
	var rows []StudyRow
	for _, n := range workers {
		for _, a := range arms {
			cfg := base
			cfg.Workers, cfg.Policy = n, a.Policy
			cfg.Router.Admission = a.Admission
			cfg.Load.Concurrency = perWorker * n
			cfg.Load.SLO = loadgen.SLO{TTFT: slo.TTFT, TPOT: slo.TPOT}
			p, err := New(cfg)
			if err != nil {
				return rows, err
			}
			p.Gen.Start()
			if err := p.Loop.Sleep(ctx, warmup); err != nil {
				return rows, err
			}
			p.Gen.Reset()
			var snaps []loadgen.Stats
			var shed, total, good float64
			for range 3 {
				if err := p.Loop.Sleep(ctx, measure/3); err != nil {
					return rows, err
				}
				s := p.Gen.Snapshot().Window
				snaps = append(snaps, s)
				shed += float64(s.ErrorsByClass[loadgen.ErrHTTP503])
				total += float64(s.Completed + s.Errors)
				good += s.GoodputPerSec
			}
			p.Close()
			row := StudyRow{Arm: a, Workers: n, Concurrency: cfg.Load.Concurrency,
				Level: baselines.LevelFromStats(a.Policy, cfg.Load.Concurrency, snaps), GoodputPerSec: good / 3}
			if total > 0 {
				row.ShedPct = 100 * shed / total
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}
