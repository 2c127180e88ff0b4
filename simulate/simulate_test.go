package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
)

func smallSweep() baselines.SweepConfig {
	return baselines.SweepConfig{
		Levels: []int{6, 12}, Modes: []string{"round_robin", "kv"},
		Warmup: 10 * time.Second, Measure: 40 * time.Second, Snapshots: 2, Repeats: 1,
		SLO: baselines.DefaultSLO, Window: time.Minute,
	}
}

func smallConfig(seed uint64) Config {
	return Config{Profile: sim.MustProfile(sim.DefaultProfile), Workers: 2, Load: loadgen.DefaultConfig(), Seed: seed}
}

// run sweeps and returns the levels and the engines' counters as JSON.
func run(t *testing.T, seed uint64) []byte {
	t.Helper()
	c, cfg := smallSweep(), smallConfig(seed)
	cfg.Policy = c.Modes[0]
	cfg.Load.Concurrency = c.Levels[0]
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sw := baselines.Sweep{Config: c, Target: p.Target(), Clock: p.Loop}
	levels, err := sw.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(struct {
		Levels  []baselines.RunLevel
		Engines []sim.Stats
		Router  router.Counts
		Snap    loadgen.Snapshot
	}{levels, p.Engines(), p.Router.Counts(), p.Gen.Snapshot()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSeedDecidesTheRun(t *testing.T) {
	a, b, c := run(t, 7), run(t, 7), run(t, 8)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs with seed 7 differ:\n%s\n%s", a, b)
	}
	if bytes.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave identical runs")
	}
}

func TestVirtualRunMeasuresWhatTheEnginesDid(t *testing.T) {
	cfg := smallConfig(3)
	cfg.Policy = "kv"
	cfg.Load.Concurrency = 10
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Gen.Start()
	p.Loop.Run(3 * time.Minute)
	s := p.Gen.Snapshot()
	w := s.Window
	var prompt, hits uint64
	for _, e := range p.Engines() {
		prompt += e.PromptTokens
		hits += e.PrefixHits
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"requests complete without errors", w.Completed > 0 && w.Errors == 0},
		{"the whole target is live", s.Live == 10},
		{"TTFT is a prefill's time, not zero and not seconds", w.TTFT.P50 > 10 && w.TTFT.P50 < 2000},
		{"TPOT is a decode step's time", w.TPOT.P50 > 5 && w.TPOT.P50 < 100},
		{"follow-up turns hit the prefix cache through the KV index", w.KVHitRate > 0.5 && hits > 0 && hits < prompt},
		{"the router knows every worker's blocks from their events", p.Router.Index().Blocks("sim-0") > 0 && p.Router.Index().Blocks("sim-1") > 0},
		{"virtual time moved three minutes", p.Loop.Now().Sub(s.Time) == 0 && s.Time.Sub(des.Epoch) == 3*time.Minute},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: window %+v", tt.name, w)
		}
	}
	p.Gen.Stop()
	if n := p.Router.Counts().InFlight; n != 0 {
		t.Errorf("stopping the load left %d bookings open", n)
	}
}

func TestSheddingRouterAnswers503(t *testing.T) {
	cfg := smallConfig(1)
	cfg.Workers = 1
	cfg.Policy = "kv"
	cfg.Router.Admission = router.AdmitShed
	cfg.Router.BusyThreshold = 0.05 // busy at 4 of 64 in flight
	// Paced starts: unpaced, a conversation shed at once would be replaced
	// at once, forever, at one instant of virtual time.
	cfg.Load.Concurrency = 20
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Gen.Start()
	p.Loop.Run(time.Minute)
	w := p.Gen.Snapshot().Window
	if w.ErrorsByClass[loadgen.ErrHTTP503] == 0 || p.Router.Counts().Shed == 0 {
		t.Fatalf("no request was shed: %+v", w.ErrorsByClass)
	}
}

func TestSadPaths(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // in the error
	}{
		{"no workers", func(c *Config) { c.Workers = 0 }, "at least 1 worker, got 0"},
		{"an unknown policy", func(c *Config) { c.Policy = "fastest" }, `unknown routing policy "fastest"`},
		{"an invalid profile", func(c *Config) { c.Profile.BlockSize = 0 }, "block_size must be at least 1"},
		{"no max tokens", func(c *Config) { c.Load.MaxTokens = 0 }, "max tokens 0"},
	}
	t.Run("the valid config the cases edit is accepted", func(t *testing.T) {
		cfg := smallConfig(1)
		cfg.Policy = "kv"
		if _, err := New(cfg); err != nil {
			t.Fatal(err)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallConfig(1)
			cfg.Policy = "kv"
			tt.mutate(&cfg)
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one naming %q", err, tt.want)
			}
		})
	}
	t.Run("a cancelled sweep stops", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Sweep(ctx, smallSweep(), smallConfig(1), nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})
}

func TestSweepReportsProgressInVirtualTime(t *testing.T) {
	var phases []baselines.Phase
	var last baselines.Progress
	levels, err := Sweep(context.Background(), smallSweep(), smallConfig(2), func(p baselines.Progress) {
		phases = append(phases, p.Phase)
		last = p
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(levels) != 4 || last.Phase != baselines.PhaseDone || last.Finished != 4 {
		t.Fatalf("%d levels, last progress %+v", len(levels), last)
	}
	if want := 4 * 50 * time.Second; last.Elapsed != want {
		t.Errorf("elapsed %v of virtual time, want %v", last.Elapsed, want)
	}
}

func TestPlanFindsTheKneeAndTheWorkersForATarget(t *testing.T) {
	pc := PlanConfig{
		Base:     smallConfig(1),
		Policies: []string{"kv"},
		Workers:  []int{1},
		Target:   30,
		SLO:      baselines.SLO{TTFT: 600 * time.Millisecond, TPOT: 60 * time.Millisecond},
		Warmup:   20 * time.Second, Measure: 40 * time.Second,
		PerWorker: 100,
	}
	// A small batch makes one worker saturate at a concurrency the search
	// reaches quickly.
	pc.Base.Profile.MaxBatchSize = 16
	var probes []Probe
	pc.OnProbe = func(p Probe) { probes = append(probes, p) }
	res, err := Plan(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Capacities[0]
	if c.MaxConcurrency < 8 || c.MaxConcurrency > 24 {
		t.Fatalf("one worker with a batch of 16 holds the SLO up to %d conversations, want about 16 (probes %+v)", c.MaxConcurrency, probes)
	}
	// The envelope is honest: every grid level up to it was probed under
	// every seed and held; the next level failed under the seed it names.
	held := map[[2]int]bool{}
	for _, p := range probes {
		if p.Workers == 1 && p.Holds {
			held[[2]int{p.Concurrency, int(p.Seed)}] = true
		}
	}
	for n := DefaultPlanStep; n <= c.MaxConcurrency; n += DefaultPlanStep {
		for _, seed := range []int{1, 2, 3} {
			if !held[[2]int{n, seed}] {
				t.Errorf("level %d under seed %d is below the envelope %d but did not hold", n, seed, c.MaxConcurrency)
			}
		}
	}
	// The figures at the envelope are the worst seed's, each: what every
	// seed met, not the first seed's.
	var at []Probe
	for _, p := range probes {
		if p.Workers == 1 && p.Concurrency == c.MaxConcurrency {
			at = append(at, p)
		}
	}
	ttft := func(p Probe) float64 { return p.Level.TTFTP95 }
	tpot := func(p Probe) float64 { return p.Level.TPOTP95 }
	hit := func(p Probe) float64 { return *p.Level.KVHitRate }
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"TTFT p95", c.At.TTFTP95, slices.Max(mapProbes(at, ttft))},
		{"TPOT p95", c.At.TPOTP95, slices.Max(mapProbes(at, tpot))},
		{"KV hit rate", *c.At.KVHitRate, slices.Min(mapProbes(at, hit))},
	} {
		if f.got != f.want || len(at) != 3 {
			t.Errorf("%s at the envelope %v, want the worst of the %d seeds' %v", f.name, f.got, len(at), f.want)
		}
	}
	if c.FirstFail != c.MaxConcurrency+DefaultPlanStep || held[[2]int{c.FirstFail, int(c.FailSeed)}] {
		t.Errorf("first failure %d under seed %d, want the next grid level %d, failing under that seed", c.FirstFail, c.FailSeed, c.MaxConcurrency+DefaultPlanStep)
	}
	if n := res.Needed["kv"]; n < 2 || n > 4 {
		t.Errorf("%d workers needed for 30 conversations at about 16 each, want 2 to 4", n)
	}
}

func mapProbes(ps []Probe, f func(Probe) float64) []float64 {
	var out []float64
	for _, p := range ps {
		out = append(out, f(p))
	}
	return out
}

func TestFewestWorkersSearch(t *testing.T) {
	tests := []struct {
		name    string
		lo, hi  int
		holdsAt func(n int) bool
		want    int
		// never are counts the search must not probe.
		never []int
	}{
		{"doubling then bisecting finds the first count that holds", 0, 0, func(n int) bool { return n >= 5 }, 5, nil},
		{"a count the capacity rows showed holding bounds the search, though a noisy count above it fails",
			2, 3, func(n int) bool { return n == 3 || n >= 8 }, 3, []int{4, 5, 6, 7, 8}},
		{"a count the capacity rows showed failing is not probed again", 3, 0, func(n int) bool { return n >= 4 }, 4, []int{1, 2, 3}},
		{"no count up to the maximum holds", 0, 0, func(int) bool { return false }, -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []int
			got, err := fewestWorkers(tt.lo, tt.hi, 64, func(n int) (bool, error) {
				asked = append(asked, n)
				return tt.holdsAt(n), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("fewest workers %d, want %d (probed %v)", got, tt.want, asked)
			}
			for _, n := range tt.never {
				if slices.Contains(asked, n) {
					t.Errorf("probed %d workers (probed %v)", n, asked)
				}
			}
		})
	}
}

func TestTargetBoundsComeFromTheCapacityRows(t *testing.T) {
	rows := []Capacity{
		{Policy: "kv", Workers: 1, MaxConcurrency: 63},
		{Policy: "kv", Workers: 2, MaxConcurrency: 112},
		{Policy: "kv", Workers: 3, MaxConcurrency: 159},
		{Policy: "round_robin", Workers: 3, MaxConcurrency: 200},
	}
	tests := []struct {
		name           string
		policy         string
		target         int
		wantLo, wantHi int
	}{
		{"the fewest rows reaching the target bound it above, the most falling short below", "kv", 150, 2, 3},
		{"no row reaching it leaves the upper bound open", "kv", 170, 3, 0},
		{"another policy's rows say nothing", "dynamo", 150, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := targetBounds(rows, tt.policy, tt.target)
			if lo != tt.wantLo || hi != tt.wantHi {
				t.Fatalf("bounds %d..%d, want %d..%d", lo, hi, tt.wantLo, tt.wantHi)
			}
		})
	}
}

func TestPlanRefusesAnEmptyQuestion(t *testing.T) {
	// Each case is a valid question but for one thing, which the error must
	// name: a Plan that skipped a check would fail later, for another reason.
	valid := func(edit func(*PlanConfig)) PlanConfig {
		pc := PlanConfig{Base: smallConfig(1), Policies: []string{"kv"}, Workers: []int{1}, PerWorker: 10, Measure: time.Second}
		edit(&pc)
		return pc
	}
	tests := []struct {
		name string
		pc   PlanConfig
		want string
	}{
		{"no policies", valid(func(pc *PlanConfig) { pc.Policies = nil }), "no policies"},
		{"neither worker counts nor a target", valid(func(pc *PlanConfig) { pc.Workers = nil }), "no worker counts and no target"},
		{"no measurement", valid(func(pc *PlanConfig) { pc.Measure = 0 }), "measurement"},
		{"a grid coarser than 5 conversations", valid(func(pc *PlanConfig) { pc.Step = 10 }), "a grid step of 10 conversations"},
		{"fewer than 3 seeds", valid(func(pc *PlanConfig) { pc.Seeds = []uint64{1, 2} }), "2 seeds; an envelope needs at least 3"},
		{"a negative warmup", valid(func(pc *PlanConfig) { pc.Warmup = -time.Second }), "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Plan(context.Background(), tt.pc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one naming %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

// BenchmarkSweepLevel simulates one seed-000 level (3 workers, 120
// conversations, 60 s warmup and 300 s measurement) and reports how many
// times faster than real time it ran.
func BenchmarkSweepLevel(b *testing.B) {
	c := baselines.SweepConfig{Levels: []int{120}, Modes: []string{"kv"}, Warmup: time.Minute, Measure: 5 * time.Minute,
		Snapshots: 3, Repeats: 1, SLO: baselines.DefaultSLO}
	cfg := smallConfig(1)
	cfg.Workers = 3
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if _, err := Sweep(context.Background(), c, cfg, nil); err != nil {
			b.Fatal(err)
		}
	}
	virtual := float64(b.N) * (c.Warmup + c.Measure).Seconds()
	b.ReportMetric(virtual/time.Since(start).Seconds(), "x_real_time")
}

// TestTransportOnTheWallClockServesConcurrentTurns runs the pipeline's
// in-process transport on the wall clock, as the demo's warm-up does: its
// turns' callbacks then run on many goroutines at once (the race detector
// watches them), and each turn still gets its first token, its answer and
// its cached prefix, and leaves no booking behind when the load stops.
func TestTransportOnTheWallClockServesConcurrentTurns(t *testing.T) {
	cfg := smallConfig(5)
	cfg.Policy = "kv"
	cfg.Load.Concurrency = 12
	cfg.Load.MaxTokens = 6 // a turn is a prefill and a few decode steps: tenths of a second
	cfg.Load.SLO = loadgen.SLO{TTFT: time.Second, TPOT: time.Second}
	p, err := build(cfg, clock.Real)
	if err != nil {
		t.Fatal(err)
	}
	p.Gen.Start()
	time.Sleep(3 * time.Second)
	p.Gen.Stop()
	w := p.Gen.Snapshot().Window
	for _, r := range p.runners {
		r.Close()
	}
	inFlight := p.Router.Counts().InFlight
	tests := []struct {
		name string
		ok   bool
	}{
		{"turns complete without errors", w.Completed >= 12 && w.Errors == 0},
		{"each has a first token after a prefill's time", w.TTFT.P50 > 1 && w.TTFT.P50 < 2000},
		{"answers stop at max_tokens", w.OSL.P50 > 0 && w.OSL.P50 <= 6},
		{"follow-up turns find their prefix cached", w.KVHitRate > 0.3},
		{"the router learnt the workers' blocks", p.Router.Index().Blocks("sim-0")+p.Router.Index().Blocks("sim-1") > 0},
		{"stopping the load freed every booking", inFlight == 0},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: window %+v, %d booked", tt.name, w, inFlight)
		}
	}
}

// TestMissesSaysWhyALevelFails: a plan names the first failure with its
// reason, so each way of failing the SLO must say itself.
func TestMissesSaysWhyALevelFails(t *testing.T) {
	slo := baselines.SLO{TTFT: 600 * time.Millisecond, TPOT: 60 * time.Millisecond}
	pct := func(v float64) *float64 { return &v }
	lv := func(m baselines.Metrics) baselines.Level { return baselines.Level{Metrics: m} }
	tests := []struct {
		name string
		l    baselines.Level
		want string
	}{
		{"a level within both objectives and no error holds", lv(baselines.Metrics{TTFTP95: 582, TPOTP95: 46, ErrorPct: pct(0)}), ""},
		{"a level at the objective exactly holds", lv(baselines.Metrics{TTFTP95: 600, TPOTP95: 60, ErrorPct: pct(0)}), ""},
		{"a slow first token is named with its p95", lv(baselines.Metrics{TTFTP95: 827.4, TPOTP95: 30, ErrorPct: pct(0)}), "TTFT p95 827 ms"},
		{"a slow stream is named with its p95", lv(baselines.Metrics{TTFTP95: 500, TPOTP95: 63.25, ErrorPct: pct(0)}), "TPOT p95 63.2 ms"},
		{"failures come before the latencies", lv(baselines.Metrics{TTFTP95: 900, TPOTP95: 30, ErrorPct: pct(0.4)}), "0.4% failed or shed"},
		{"a level without error counts does not hold", lv(baselines.Metrics{TTFTP95: 500, TPOTP95: 30}), "errors not counted"},
		{"a level with no answer does not hold", lv(baselines.Metrics{ErrorPct: pct(100)}), "no request answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := misses(tt.l, slo); got != tt.want {
				t.Fatalf("misses = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPipelineTokenizesThroughItsOwnCache checks that a virtual-time run
// leaves the live proxy's token cache as it found it: its conversations
// are tokenized through the pipeline's cache, which goes with the pipeline.
func TestPipelineTokenizesThroughItsOwnCache(t *testing.T) {
	c, cfg := smallSweep(), smallConfig(3)
	c.Levels, c.Modes = c.Levels[:1], c.Modes[1:]
	cfg.Policy, cfg.Load.Concurrency = c.Modes[0], c.Levels[0]
	before, _ := router.ChatTokensCached()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sw := baselines.Sweep{Config: c, Target: p.Target(), Clock: p.Loop}
	if _, err := sw.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, _ := router.ChatTokensCached(); after != before {
		t.Errorf("the proxy's token cache went from %d to %d messages during a virtual-time run", before, after)
	}
	if n, _ := p.Tokens.Size(); n == 0 {
		t.Error("the pipeline's own token cache is empty after a run")
	}
}

// TestTheRouterIndexesTheProfilesBlocks: the simulated workers' blocks are
// their profile's, and an index of another size drops every one of them
// (a100-qwen3-8b's 64-token blocks under the router's default 32): kv
// routed blind, and plan, bench routing and sim calibrate said nothing.
func TestTheRouterIndexesTheProfilesBlocks(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		router  int // the router configuration's block size
	}{
		{"64-token blocks, the router's left at its default", "a100-qwen3-8b", 0},
		{"64-token blocks, the router's set to 32 as calibrate sets it", "a100-qwen3-8b", router.DefaultBlockSize},
		{"32-token blocks, the default profile's", sim.DefaultProfile, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallConfig(5)
			cfg.Profile = sim.MustProfile(tt.profile)
			cfg.Router.BlockSize = tt.router
			cfg.Policy = "kv"
			cfg.Load.Concurrency = 6
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.Gen.Start()
			p.Loop.Run(time.Minute)
			p.Gen.Stop()
			if got, want := p.Router.Index().BlockSize(), cfg.Profile.BlockSize; got != want {
				t.Errorf("the index's blocks are %d tokens, the workers' %d", got, want)
			}
			if n := p.Router.Index().Blocks("sim-0") + p.Router.Index().Blocks("sim-1"); n == 0 {
				t.Errorf("the index holds no block after a minute of load: %v", p.Router.Index().Stats())
			}
		})
	}
}
