package baselines

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/loadgen"
)

// fakeClock jumps forward by each wait at once, so sweeps run instantly.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	go f()
	return stopped{}
}

type stopped struct{}

func (stopped) Stop() bool { return false }

// fakeTarget logs what the sweep asks of it and answers snapshots whose
// figures encode the mode, the concurrency and the snapshot's number.
type fakeTarget struct {
	mu        sync.Mutex
	log       []string
	mode      string
	conc      int
	snaps     int
	completed int // requests each snapshot says finished
	failed    int // requests each snapshot says failed, all to connect
	// noCacheReport: the answers said nothing of cached tokens (vLLM
	// without --enable-prompt-tokens-details).
	noCacheReport bool
}

func (t *fakeTarget) record(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = append(t.log, s)
}

func (t *fakeTarget) SetMode(_ context.Context, m string) error {
	t.record("mode " + m)
	t.mu.Lock()
	t.mode = m
	t.mu.Unlock()
	return nil
}

func (t *fakeTarget) SetConcurrency(n int) error {
	t.record(fmt.Sprint("concurrency ", n))
	t.mu.Lock()
	t.conc, t.snaps = n, 0
	t.mu.Unlock()
	return nil
}

func (t *fakeTarget) Start() { t.record("start") }
func (t *fakeTarget) Stop()  { t.record("stop") }
func (t *fakeTarget) Reset() { t.record("reset") }

func (t *fakeTarget) Snapshot() loadgen.Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.snaps++
	base := float64(t.conc)
	if t.mode == "kv" {
		base /= 2
	}
	k := float64(t.snaps)
	reported := t.completed
	if t.noCacheReport {
		reported = 0
	}
	var byClass map[loadgen.ErrorClass]int
	if t.failed > 0 {
		byClass = map[loadgen.ErrorClass]int{loadgen.ErrConnect: t.failed}
	}
	return loadgen.Snapshot{Window: loadgen.Stats{
		Errors: t.failed, ErrorsByClass: byClass,
		KVHitRequests:      reported,
		TTFT:               loadgen.Quantiles{Count: 10, P50: base + k, P95: 2*base + k},
		TPOT:               loadgen.Quantiles{Count: 10, P50: 20, P95: 30},
		E2E:                loadgen.Quantiles{Count: 10, P50: 1000 * k, P95: 2000 * k},
		Completed:          t.completed,
		ErrorRate:          0.01 * k,
		RequestsPerSec:     k,
		OutputTokensPerSec: 100 * k,
		GoodputPerSec:      0.5 * k,
		KVHitRate:          0.5,
	}}
}

func config() SweepConfig {
	return SweepConfig{Name: "t", Levels: []int{60, 80}, Modes: []string{"round_robin", "kv"},
		Warmup: 20 * time.Second, Measure: 30 * time.Second, Snapshots: 3, Repeats: 1, Window: time.Minute}
}

func TestPlanRunsEveryLevelOfAModeBeforeTheNext(t *testing.T) {
	c := config()
	c.Repeats = 2
	var got []string
	for _, s := range c.Plan() {
		got = append(got, fmt.Sprintf("%d/%s/%d", s.Repeat, s.Mode, s.Concurrency))
	}
	want := []string{
		"1/round_robin/60", "1/round_robin/80", "1/kv/60", "1/kv/80",
		"2/round_robin/60", "2/round_robin/80", "2/kv/60", "2/kv/80",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan = %v\nwant %v", got, want)
	}
}

func TestSweepRun(t *testing.T) {
	tgt := &fakeTarget{completed: 10}
	var saved []RunLevel
	var progress []Progress
	s := Sweep{Config: config(), Target: tgt, Clock: &fakeClock{now: time.Unix(0, 0)},
		Save:       func(_ context.Context, rl RunLevel) error { saved = append(saved, rl); return nil },
		OnProgress: func(p Progress) { progress = append(progress, p) }}
	got, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the load is stopped before each mode switch and reset after each warmup", func(t *testing.T) {
		want := []string{
			"mode round_robin", "concurrency 60", "start", "reset", "concurrency 80", "reset",
			"stop", "mode kv", "concurrency 60", "start", "reset", "concurrency 80", "reset", "stop",
		}
		if !reflect.DeepEqual(tgt.log, want) {
			t.Fatalf("calls = %v\nwant %v", tgt.log, want)
		}
	})
	t.Run("each level is saved as soon as it is measured", func(t *testing.T) {
		if !reflect.DeepEqual(saved, got) || len(got) != 4 {
			t.Fatalf("saved %d levels, returned %d, want 4 of each", len(saved), len(got))
		}
	})
	t.Run("a level averages its three snapshots", func(t *testing.T) {
		l := got[0] // round_robin at 60: snapshots give TTFT p50 61, 62, 63
		if l.TTFTP50 != 62 || l.TTFTP95 != 122 || l.LatencyP50 != 2000 || l.TOPS != 200 || *l.ErrorPct != 2 || *l.ActualRPS != 2 || l.KVHitRate == nil || *l.KVHitRate != 50 {
			t.Fatalf("level = %+v", l)
		}
		if kv := got[2]; kv.Mode != "kv" || kv.TTFTP50 != 32 {
			t.Fatalf("kv level = %+v, want TTFT p50 32", kv)
		}
	})
	t.Run("goodput is averaged like the other rates; shed, which the client cannot tell from a worker's 503, stays absent", func(t *testing.T) {
		if got[0].Goodput == nil || *got[0].Goodput != 1 || got[0].Shed != nil {
			t.Fatalf("goodput %v, shed %v; want 1 (snapshots of 0.5, 1, 1.5) and none", got[0].Goodput, got[0].Shed)
		}
	})
	t.Run("progress counts levels and planned time", func(t *testing.T) {
		last := progress[len(progress)-1]
		if last.Phase != PhaseDone || last.Finished != 4 || last.Steps != 4 || last.Elapsed != last.Planned || last.Planned != 4*50*time.Second {
			t.Fatalf("last progress = %+v", last)
		}
		measures := 0
		for _, p := range progress {
			if p.Phase == PhaseMeasure && p.Snapshot > 0 {
				measures++
			}
		}
		if measures != 12 {
			t.Fatalf("%d snapshot reports, want 12", measures)
		}
	})
}

func TestSweepResumesWhereItStopped(t *testing.T) {
	cfg := config()
	ctx, cancel := context.WithCancel(context.Background())
	var saved []RunLevel
	first := Sweep{Config: cfg, Target: &fakeTarget{completed: 10}, Clock: &fakeClock{},
		Save: func(_ context.Context, rl RunLevel) error {
			saved = append(saved, rl)
			if len(saved) == 3 {
				cancel() // interrupted while warming up the fourth level
			}
			return nil
		}}
	if _, err := first.Run(ctx); err == nil {
		t.Fatal("the interrupted sweep reported success")
	}
	if len(saved) != 3 {
		t.Fatalf("%d levels saved before the interruption, want 3", len(saved))
	}

	tgt := &fakeTarget{completed: 10}
	second := Sweep{Config: cfg, Target: tgt, Clock: &fakeClock{}, Done: saved,
		Save: func(_ context.Context, rl RunLevel) error { saved = append(saved, rl); return nil }}
	all, err := second.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"mode kv", "concurrency 80", "start", "reset", "stop"}; !reflect.DeepEqual(tgt.log, want) {
		t.Fatalf("the resumed sweep did %v, want only the missing level: %v", tgt.log, want)
	}
	if len(all) != 4 || all[3].Mode != "kv" || all[3].Concurrency != 80 {
		t.Fatalf("resumed results = %+v", all)
	}
}

func TestSweepConfigRefuses(t *testing.T) {
	tests := []struct {
		name string
		edit func(*SweepConfig)
		want string
	}{
		{"no levels", func(c *SweepConfig) { c.Levels = nil }, "no concurrency levels"},
		{"a level given twice", func(c *SweepConfig) { c.Levels = []int{60, 60} }, "level 60 is given twice"},
		{"a zero level", func(c *SweepConfig) { c.Levels = []int{0} }, "level 0 is outside"},
		{"a mode given twice", func(c *SweepConfig) { c.Modes = []string{"kv", "kv"} }, "mode kv is given twice"},
		{"no snapshots", func(c *SweepConfig) { c.Snapshots = 0 }, "snapshots 0"},
		{"no measurement", func(c *SweepConfig) { c.Measure = 0 }, "measure 0s"},
		{"zero repeats", func(c *SweepConfig) { c.Repeats = 0 }, "repeats 0"},
		{"a hundred million repeats, whose plan would not fit in memory", func(c *SweepConfig) { c.Repeats = 100_000_000 }, "repeats 100000000: need 1 to 10000"},
		{"more steps in all than weeks of load", func(c *SweepConfig) { c.Repeats = 5001 }, "2 levels × 2 modes × 5001 repeats are 20004 steps: at most 10000"},
		{"a name across two lines, which would break every listing", func(c *SweepConfig) { c.Name = "a\nb" }, "name: holds the control character U+000A"},
		{"a name of blanks, which the store refuses only after the run", func(c *SweepConfig) { c.Name = "   " }, "name: is blank"},
		{"a billion snapshots a level", func(c *SweepConfig) { c.Snapshots = 1_000_000_000 }, "snapshots 1000000000: need 1 to 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config()
			tt.edit(&c)
			_, err := (&Sweep{Config: c, Target: &fakeTarget{}}).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSweepRefusesALevelWhereEveryRequestFailed(t *testing.T) {
	var saved int
	s := Sweep{Config: config(), Target: &fakeTarget{failed: 12}, Clock: &fakeClock{},
		Save: func(context.Context, RunLevel) error { saved++; return nil }}
	_, err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "round_robin at 60: no request succeeded during the 30s measurement (12 connect failed)") {
		t.Fatalf("err = %v", err)
	}
	if saved != 0 {
		t.Fatalf("saved %d levels of 0 ms latencies", saved)
	}
}

func TestSweepRefusesALevelWhereNothingFinished(t *testing.T) {
	var saved int
	s := Sweep{Config: config(), Target: &fakeTarget{completed: 0}, Clock: &fakeClock{},
		Save: func(context.Context, RunLevel) error { saved++; return nil }}
	_, err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "round_robin at 60: no request finished during the 30s measurement") {
		t.Fatalf("err = %v", err)
	}
	if saved != 0 {
		t.Fatalf("saved %d levels of zeros", saved)
	}
}

func TestLevelFromStatsSkipsSnapshotsWithoutData(t *testing.T) {
	snaps := []loadgen.Stats{
		{TTFT: loadgen.Quantiles{Count: 5, P50: 100, P95: 200}},                                                         // no request finished yet
		{TTFT: loadgen.Quantiles{Count: 9, P50: 110, P95: 220}, E2E: loadgen.Quantiles{Count: 3, P50: 9000, P95: 9500}}, // the first finished
	}
	l := LevelFromStats("kv", 60, snaps)
	if l.TTFTP50 != 105 || l.LatencyP50 != 9000 || l.LatencyP95 != 9500 {
		t.Fatalf("level = %+v; want TTFT averaged over both, latency from the second alone", l)
	}
}

func TestAggregateAveragesRepeatsAndKeepsTheSpread(t *testing.T) {
	e1, e2 := 1.0, 3.0
	runs := []RunLevel{
		{Repeat: 1, Level: Level{Mode: "kv", Concurrency: 60, Metrics: Metrics{TTFTP95: 400, ErrorPct: &e1}}},
		{Repeat: 2, Level: Level{Mode: "kv", Concurrency: 60, Metrics: Metrics{TTFTP95: 600, ErrorPct: &e2}}},
		{Repeat: 1, Level: Level{Mode: "kv", Concurrency: 80, Metrics: Metrics{TTFTP95: 700}}},
	}
	got := Aggregate(runs, []string{"kv"}, []int{60, 80})
	if len(got) != 2 {
		t.Fatalf("%d levels, want 2", len(got))
	}
	a := got[0]
	// mean of 400 and 600 is 500; sample standard deviation is √20000 ≈ 141.421356
	if a.TTFTP95 != 500 || a.Repeats != 2 || a.Spread == nil || a.Spread.TTFTP95 != 141.421356 || *a.ErrorPct != 2 || *a.Spread.ErrorPct != 1.414214 {
		t.Fatalf("level 60 = %+v spread %+v", a, a.Spread)
	}
	if b := got[1]; b.TTFTP95 != 700 || b.Repeats != 1 || b.Spread != nil || b.ErrorPct != nil {
		t.Fatalf("level 80 = %+v; a single repeat has no spread and no invented error rate", b)
	}
}

func TestWaitReady(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"data":[]}`))
	}))
	defer srv.Close()
	if err := WaitReady(context.Background(), clock.Real, srv.URL+"/v1", time.Millisecond, 5*time.Second); err != nil {
		t.Fatalf("a target that comes up on the third poll: %v", err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	// A second of polling every 10 ms: long enough that some polls answer
	// even on a loaded machine, so the error can name the last answer.
	err := WaitReady(context.Background(), clock.Real, down.URL+"/v1", 10*time.Millisecond, time.Second)
	if err == nil || !strings.Contains(err.Error(), "not ready after 1s") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a target that never comes up: %v", err)
	}
}

func TestSwitchCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mode")
	var log strings.Builder
	if err := SwitchCommand(context.Background(), "echo {mode} $KVLENS_MODE > "+out, "kv", &log); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); string(got) != "kv kv\n" {
		t.Fatalf("the command wrote %q, want the mode substituted and in the environment", got)
	}
	if err := SwitchCommand(context.Background(), "exit 3", "kv", &log); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("a failing command: %v", err)
	}
}

// TestSweepStoresAHitRateTheWorkersDidNotReportAsUnknown sweeps workers
// whose answers carry no cached-token counts: each level's hit rate is
// absent, never 0%.
func TestSweepStoresAHitRateTheWorkersDidNotReportAsUnknown(t *testing.T) {
	tgt := &fakeTarget{completed: 10, noCacheReport: true}
	s := Sweep{Config: config(), Target: tgt, Clock: &fakeClock{now: time.Unix(0, 0)},
		Save: func(context.Context, RunLevel) error { return nil }}
	got, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range got {
		if l.KVHitRate != nil {
			t.Errorf("%s at %d: hit rate %v, want none", l.Mode, l.Concurrency, *l.KVHitRate)
		}
	}
}

func TestLevelHitRateAveragesOnlySnapshotsThatReportedOne(t *testing.T) {
	snap := func(reported int, rate float64) loadgen.Stats {
		return loadgen.Stats{Completed: reported + 1, KVHitRequests: reported, KVHitRate: rate}
	}
	tests := []struct {
		name  string
		snaps []loadgen.Stats
		want  *float64
	}{
		{"every snapshot reported: their mean", []loadgen.Stats{snap(5, 0.8), snap(5, 0.9)}, new(85.0)},
		{"an early snapshot before any report does not pull the mean to 0", []loadgen.Stats{snap(0, 0), snap(5, 0.9), snap(8, 0.7)}, new(80.0)},
		{"no snapshot reported: unknown", []loadgen.Stats{snap(0, 0), snap(0, 0)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LevelFromStats("kv", 60, tt.snaps).KVHitRate
			switch {
			case (got == nil) != (tt.want == nil):
				t.Fatalf("hit rate %v, want %v", got, tt.want)
			case got != nil && math.Abs(*got-*tt.want) > 1e-9:
				t.Fatalf("hit rate %v, want %v", *got, *tt.want)
			}
		})
	}
}
