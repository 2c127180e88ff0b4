package calibrate

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// reference is a measured set with two levels per mode.
func reference() *baselines.Set {
	lv := func(mode string, c int, p50, p95, tpot, tops, hit float64) baselines.Level {
		return baselines.Level{Concurrency: c, Mode: mode, Metrics: baselines.Metrics{
			TTFTP50: p50, TTFTP95: p95, TPOTP50: tpot, TOPS: tops, KVHitRate: &hit}}
	}
	return &baselines.Set{Name: "seeds (averaged)", Levels: []baselines.Level{
		lv("round_robin", 60, 274, 655, 28, 2146.9, 90.9),
		lv("round_robin", 120, 375, 643, 45, 2642.6, 87.2),
		lv("kv", 60, 249, 446, 26, 2262.8, 91.6),
		lv("kv", 120, 382, 530, 43, 2805.7, 95.9),
	}}
}

func config() Config {
	return Config{
		Profile: sim.MustProfile(sim.DefaultProfile), Workers: 3,
		Levels: []int{60, 120}, Modes: []string{"round_robin", "dynamo"}, Seeds: []uint64{1, 2},
		Warmup: time.Minute, Measure: 5 * time.Minute, Parallel: 1, Reference: reference(),
	}
}

// runs are two seeds' sweeps, made up so that the means land on known
// differences; dynamo's TTFT p95 at 120 is out on average and in on seed 1.
func runs() [][]baselines.RunLevel {
	rl := func(mode string, c int, p50, p95, tpot, tops, hit float64) baselines.RunLevel {
		return baselines.RunLevel{Repeat: 1, Level: baselines.Level{Concurrency: c, Mode: mode, Metrics: baselines.Metrics{
			TTFTP50: p50, TTFTP95: p95, TPOTP50: tpot, TOPS: tops, KVHitRate: &hit}}}
	}
	return [][]baselines.RunLevel{
		{
			rl("round_robin", 60, 290, 600, 28, 2100, 85),
			rl("round_robin", 120, 440, 780, 49, 2450, 86),
			rl("dynamo", 60, 240, 420, 26, 2300, 96),
			rl("dynamo", 120, 370, 580, 44, 2600, 97),
		},
		{
			rl("round_robin", 60, 300, 620, 28.4, 2120, 86),
			rl("round_robin", 120, 460, 760, 49.4, 2470, 85),
			rl("dynamo", 60, 250, 440, 26.2, 2320, 95),
			rl("dynamo", 120, 380, 640, 44.4, 2640, 98),
		},
	}
}

func TestReportMatchesGolden(t *testing.T) {
	r, err := Compare(config(), runs())
	if err != nil {
		t.Fatal(err)
	}
	r.Command = "kvlens sim calibrate --levels 60,120 --seeds 1-2"
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("report differs from %s (rerun with -update to accept):\n%s", golden, buf.Bytes())
	}
}

func TestTurnsReachTheLoadAndTheReport(t *testing.T) {
	tests := []struct {
		name      string
		turns     loadgen.TurnDist
		staggered bool
		wantLoad  string
		wantTitle string
	}{
		{"no turns given runs kvlens's chat in step, and the report says nothing", loadgen.TurnDist{}, false, loadgen.DefaultConfig().Turns.String(), "in virtual time, 60 s warmup"},
		{"5 turns run 5, as the original demo did, and the report says so", loadgen.UniformTurns(5, 5), false, "5", "in virtual time, 5 turns per conversation, 60 s warmup"},
		{"staggered starts reach the load, and the report says so", loadgen.UniformTurns(5, 5), true, "5", "in virtual time, 5 turns per conversation, staggered starts, 60 s warmup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config()
			c.Turns, c.Staggered = tt.turns, tt.staggered
			load := c.Deployment(1).Load
			if got := load.Turns.String(); got != tt.wantLoad {
				t.Errorf("the load runs %s turns, want %s", got, tt.wantLoad)
			}
			if load.InStep == tt.staggered {
				t.Errorf("the load starts in step: %v, want %v", load.InStep, !tt.staggered)
			}
			r, err := Compare(c, runs())
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := r.WriteMarkdown(&buf); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), tt.wantTitle) {
				t.Errorf("the report does not say %q:\n%s", tt.wantTitle, buf.String())
			}
		})
	}
}

func TestCompareAveragesTheSeedsAndPairsDynamoWithKV(t *testing.T) {
	r, err := Compare(config(), runs())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want float64
	}{
		// (290 + 300) / 2
		{"round-robin's TTFT p50 at 60 is the seeds' mean", r.Rows[0].Sim.TTFTP50, 295},
		// (49 + 49.4) / 2
		{"round-robin's TPOT p50 at 120 is the seeds' mean", r.Rows[1].Sim.TPOTP50, 49.2},
		// the measured kv column, not round_robin's 274
		{"dynamo at 60 is held against the measured kv level", r.Rows[2].Seeds.TTFTP50, 249},
		// (97 + 98) / 2
		{"the hit rate is averaged too", *r.Rows[3].Sim.KVHitRate, 97.5},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if r.Rows[2].Measured != "kv" || r.Rows[0].Measured != "round_robin" {
		t.Errorf("counterparts: %s, %s", r.Rows[0].Measured, r.Rows[2].Measured)
	}
}

func TestWithinTolerance(t *testing.T) {
	tests := []struct {
		name      string
		sim, meas float64
		want      bool
	}{
		{"equal figures are within", 100, 100, true},
		{"10% above is within, at the edge", 110, 100, true},
		{"10% below is within, at the edge", 90, 100, true},
		{"10.1% above is outside", 110.1, 100, false},
		{"11% below is outside", 89, 100, false},
		{"nothing measured is never within", 5, 0, false},
	}
	for _, tt := range tests {
		if got := Within(Diff(tt.sim, tt.meas)); got != tt.want {
			t.Errorf("%s: Within(Diff(%v, %v)) = %v", tt.name, tt.sim, tt.meas, got)
		}
	}
}

func TestCheckRefusesWhatCannotBeCompared(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"a policy with no measured counterpart", func(c *Config) { c.Modes = []string{"random"} }, "no measured counterpart"},
		{"a level the reference lacks", func(c *Config) { c.Levels = []int{60, 90} }, "no round_robin level at 90"},
		{"no seed", func(c *Config) { c.Seeds = nil }, "no seed"},
		{"no worker", func(c *Config) { c.Workers = 0 }, "need at least 1"},
		{"more workers than a fleet may have", func(c *Config) { c.Workers = 1025 }, "1025 workers: at most 1024"},
		{"nothing run at once", func(c *Config) { c.Parallel = 0 }, "parallel 0"},
	}
	for _, tt := range tests {
		c := config()
		tt.change(&c)
		err := c.Check()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	if err := config().Check(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}

func TestCompareRefusesAMissingSeedLevel(t *testing.T) {
	rs := runs()
	rs[1] = rs[1][:3] // seed 2 never measured dynamo at 120
	if _, err := Compare(config(), rs); err == nil || !strings.Contains(err.Error(), "1 of 2 seeds") {
		t.Errorf("got %v, want an error naming the missing level", err)
	}
}
