package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/internal/chartcheck"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func workloads(t testing.TB, names ...string) []loadgen.Workload {
	t.Helper()
	var ws []loadgen.Workload
	for _, n := range names {
		w, err := loadgen.LookupWorkload(n)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws
}

// fixedResult is a small grid's result with made-up figures: two policies,
// a closed and an open workload, two levels, two seeds.
func fixedResult(t testing.TB) *Result {
	g := Grid{
		Policies: []string{"round_robin", "kv"}, Workloads: workloads(t, "chat", "open-loop"),
		Levels: []int{40, 80}, Seeds: []uint64{1, 2}, Workers: 3, Profile: sim.MustProfile(sim.DefaultProfile),
		Measure: 120 * time.Second, SLO: baselines.DefaultSLO,
	}
	var runs []Run
	for wi, w := range g.Workloads {
		for li, l := range g.Levels {
			for pi, p := range g.Policies {
				for si, s := range g.Seeds {
					// kv is faster everywhere but in open-loop at 80, where
					// round-robin wins TTFT and kv still wins goodput.
					ttft := 500 + 100*float64(li) - 150*float64(pi) + 10*float64(si) + 5*float64(wi)
					if w.Name == "open-loop" && l == 80 && p == "kv" {
						ttft = 640 + float64(si)
					}
					runs = append(runs, Run{
						Workload: w.Name, Policy: p, Level: l, Seed: s, WarmupSec: g.warmup(w).Seconds(), MeasureSec: 120,
						TTFTP95: ttft, HitRate: 85 + 12*float64(pi) + float64(si)/10, OracleHitRate: 99.2,
						Goodput: 1.5 + 0.5*float64(pi) + 0.25*float64(li), InFlight: float64(l - 2 + 3*si + pi),
					})
				}
			}
		}
	}
	return &Result{Grid: g, Runs: runs}
}

func TestMarkdownReportGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, fixedResult(t)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("report differs from %s (run with -update if the change is intended):\n%s", path, buf.Bytes())
	}
}

func TestWinners(t *testing.T) {
	rows := fixedResult(t).rows()
	tests := []struct {
		name       string
		row        int
		ttft, good string
	}{
		{"kv has the lowest TTFT and the highest goodput on the chat at 40", 0, "kv", "kv"},
		{"round-robin has the lowest TTFT on open-loop at 80, kv the highest goodput", 3, "round_robin", "kv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rw := rows[tt.row]
			if got := rw.cells[rw.winnerTTFT()].Policy; got != tt.ttft {
				t.Errorf("TTFT winner %s, want %s", got, tt.ttft)
			}
			if got := rw.cells[rw.winnerGoodput()].Policy; got != tt.good {
				t.Errorf("goodput winner %s, want %s", got, tt.good)
			}
		})
	}
}

func tinyGrid(t *testing.T, parallel int) Grid {
	return Grid{
		Policies: []string{"round_robin", "kv"}, Workloads: workloads(t, "chat"), Levels: []int{8}, Seeds: []uint64{3},
		Workers: 2, Profile: sim.MustProfile(sim.DefaultProfile), Warmup: 10 * time.Second, Measure: 30 * time.Second,
		SLO: baselines.DefaultSLO, Parallel: parallel,
	}
}

func TestTinyGridRunsAndReports(t *testing.T) {
	var seen []string
	g := tinyGrid(t, 2)
	g.OnRun = func(r Run, done, total int) { seen = append(seen, r.Policy) }
	res, err := Execute(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || len(seen) != 2 || res.Runs[0].Policy != "round_robin" || res.Runs[1].Policy != "kv" {
		t.Fatalf("runs %+v, progress %v: want round_robin then kv", res.Runs, seen)
	}
	for _, r := range res.Runs {
		if r.Completed == 0 || r.TTFTP95 <= 0 || r.HitRate <= 0 || r.OracleHitRate < r.HitRate || r.InFlight != 8 {
			t.Fatalf("run %+v: want requests measured, a hit rate at most the oracle's, 8 in flight", r)
		}
	}
	// The parallelism does not change a figure.
	again, err := Execute(context.Background(), tinyGrid(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Runs, again.Runs) {
		t.Fatalf("2 at a time: %+v\n1 at a time: %+v", res.Runs, again.Runs)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, &res); err != nil {
		t.Fatal(err)
	}
	var back struct{ Runs []Run }
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !slices.Equal(back.Runs, res.Runs) {
		t.Fatalf("JSON does not read back as the runs: %v", err)
	}
	var chart bytes.Buffer
	if err := WriteChart(&chart, &res); err != nil {
		t.Fatal(err)
	}
	// Each policy's line is drawn in its own colour.
	_, drawn, err := chartcheck.Colours(&chart)
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	// Each policy is drawn in its own colour, the one it has in every
	// grid: kv's is the last of the palette, though it is second here.
	for _, pol := range g.Policies {
		c := policyColors[slices.Index(DefaultPolicies, pol)].(color.RGBA)
		if !drawn[c] {
			t.Errorf("the chart has no pixel of %s's colour %v", pol, c)
		}
	}
}

// TestAnInterruptedGridResumesToTheSameRuns: a grid stopped after its first
// run returns that run with the error; written and read back it is partial,
// its reports refuse to be drawn, and resumed from it the grid runs only
// the rest and ends with the runs an uninterrupted grid has.
func TestAnInterruptedGridResumesToTheSameRuns(t *testing.T) {
	whole, err := Execute(context.Background(), tinyGrid(t, 1))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	g := tinyGrid(t, 1)
	g.OnRun = func(Run, int, int) { cancel() }
	part, err := Execute(ctx, g)
	if err != context.Canceled || len(part.Runs) != 1 || part.Runs[0] != whole.Runs[0] || !part.Partial() {
		t.Fatalf("interrupted: %d runs, partial %v, err %v; want the first run and context.Canceled", len(part.Runs), part.Partial(), err)
	}
	back := roundTrip(t, &part)
	if !back.Partial() || !slices.Equal(back.Runs, part.Runs) {
		t.Fatalf("read back: partial %v, runs %+v", back.Partial(), back.Runs)
	}
	for name, write := range map[string]func(*bytes.Buffer, *Result) error{
		"Markdown": func(b *bytes.Buffer, r *Result) error { return WriteMarkdown(b, r) },
		"chart":    func(b *bytes.Buffer, r *Result) error { return WriteChart(b, r) },
	} {
		if err := write(new(bytes.Buffer), back); err == nil || !strings.Contains(err.Error(), "1 of the grid's 2 runs") {
			t.Errorf("%s of a partial grid: err %v, want it refused", name, err)
		}
	}

	g = back.Grid
	g.Done, g.Parallel = back.Runs, 1
	var ran []string
	g.OnRun = func(r Run, done, total int) { ran = append(ran, fmt.Sprintf("%s %d/%d", r.Policy, done, total)) }
	resumed, err := Execute(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []string{"kv 1/1"}) || !slices.Equal(resumed.Runs, whole.Runs) || resumed.Partial() {
		t.Fatalf("resumed: ran %v, runs %+v; want kv alone run and %+v", ran, resumed.Runs, whole.Runs)
	}
}

func TestEarlierRunsThatAreNotTheGridsAreRefused(t *testing.T) {
	run := Run{Workload: "chat", Policy: "kv", Level: 8, Seed: 3, WarmupSec: 10, MeasureSec: 30}
	other := func(edit func(*Run)) Run { r := run; edit(&r); return r }
	tests := []struct {
		name string
		done []Run
		want string
	}{
		{"a seed the grid has not", []Run{other(func(r *Run) { r.Seed = 4 })}, "the earlier run of kv on chat at 8, seed 4 is not in the grid"},
		{"the same cell twice", []Run{run, run}, "kv on chat at 8, seed 3 was run twice"},
		{"another measurement", []Run{other(func(r *Run) { r.MeasureSec = 60 })}, "had 10s of warmup and 60s measured, the grid 10s and 30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tinyGrid(t, 1)
			g.Done = tt.done
			_, err := Execute(context.Background(), g)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCollectOrdersRunsAsTheReportsRead(t *testing.T) {
	res := fixedResult(t)
	shuffled := slices.Clone(res.Runs[:5])
	slices.Reverse(shuffled)
	stray := Run{Workload: "think", Policy: "kv", Level: 40, Seed: 1}
	got := res.Grid.Collect(append(shuffled, stray, res.Runs[2]))
	if !slices.Equal(got.Runs, res.Runs[:5]) || !got.Partial() {
		t.Fatalf("collected %+v, want the first five runs in the grid's order, partial", got.Runs)
	}
}

func TestColorsOfKeepAPolicysColourAcrossGrids(t *testing.T) {
	kv := policyColors[len(policyColors)-1]
	tests := []struct {
		name     string
		policies []string
		want     []color.Color
	}{
		{"the default grid in its order", DefaultPolicies, policyColors},
		{"kv first keeps kv's colour", []string{"kv", "round_robin"}, []color.Color{kv, policyColors[0]}},
		{"a policy not in the defaults takes the first colour unused", []string{"round_robin", "kv_approx", "kv"}, []color.Color{policyColors[0], policyColors[1], kv}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := colorsOf(tt.policies); !slices.Equal(got, tt.want) {
				t.Fatalf("colours %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGridCheck(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Grid)
		want string
	}{
		{"an unknown policy", func(g *Grid) { g.Policies = []string{"kv", "fastest"} }, "fastest"},
		{"no seeds", func(g *Grid) { g.Seeds = nil }, "no seeds"},
		{"no workers", func(g *Grid) { g.Workers = 0 }, "at least 1 worker, got 0"},
		{"more workers than a fleet may have", func(g *Grid) { g.Workers = 5000 }, "a fleet of 5000 workers: at most 1024"},
		{"a level of 0", func(g *Grid) { g.Levels = []int{0} }, "level 0"},
		{"no measurement", func(g *Grid) { g.Measure = 0 }, "measure 0s"},
		// Each list within its bound, the product ran out of memory.
		{"more runs than a grid may have", func(g *Grid) {
			g.Levels, g.Seeds = make([]int, 1000), make([]uint64, 1000)
			for i := range 1000 {
				g.Levels[i], g.Seeds[i] = i+1, uint64(i)
			}
		}, "2000000 runs (2 policies × 1 workloads × 1000 levels × 1000 seeds): at most 100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tinyGrid(t, 1)
			tt.edit(&g)
			err := g.Check()
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tt.want)
			}
		})
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  string
	}{
		{"40,60,80", []int{40, 60, 80}, ""},                                // a list, in its order
		{"40-200/20", []int{40, 60, 80, 100, 120, 140, 160, 180, 200}, ""}, // the full grid's levels
		{"1-5", []int{1, 2, 3, 4, 5}, ""},                                  // a range, step 1
		{"7, 1-2", []int{7, 1, 2}, ""},                                     // items mix, spaces allowed
		{"40-100/25", []int{40, 65, 90}, ""},                               // a step that misses the end stops before it

		// Sad path.
		{"", nil, "no value"},
		{"5-1", nil, "low to high"},
		{"0", nil, "from 1 to 10000"},
		{"1-3/0", nil, "step must be at least 1"},
		{"1,1", nil, "1 is given twice"},
		{"1-5,3", nil, "3 is given twice"},
		{"ten", nil, "not a number"},
		{"1-100000", nil, "from 1 to 10000"},
	}
	for _, tt := range tests {
		got, err := ParseList(tt.in, 1, 10000)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseList(%q) = %v, %v; want error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParseList(f *testing.F) {
	for _, s := range []string{"40-200/20", "1-5", "1,2,3", "", "5-1", "1-3/0", "9223372036854775807-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseList(s, 1, 10000)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		if len(got) == 0 || len(got) > maxListed {
			t.Fatalf("%q gave %d values", s, len(got))
		}
		for i, v := range got {
			if v < 1 || v > 10000 || slices.Contains(got[:i], v) {
				t.Fatalf("%q gave %v", s, got)
			}
		}
	})
}

// roundTrip writes res as JSON and reads it back.
func roundTrip(t *testing.T, res *Result) *Result {
	t.Helper()
	var js bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func TestJSONReadsBackIntoTheSameReports(t *testing.T) {
	res := fixedResult(t)
	back := roundTrip(t, res)
	var a, b bytes.Buffer
	WriteMarkdown(&a, res)
	WriteMarkdown(&b, back)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("the report drawn from the JSON differs:\n%s", b.Bytes())
	}
}

// TestAProfileFilesReportReadsBackWithoutTheFile: a grid run with
// --sim-profile FILE is drawn again from its JSON alone, and a report
// written before the engine was recorded still reads by the profile's name.
func TestAProfileFilesReportReadsBackWithoutTheFile(t *testing.T) {
	res := fixedResult(t)
	res.Grid.Profile.Name, res.Grid.Profile.EagerStepMs = "my-h200", 30
	if back := roundTrip(t, res); back.Grid.Profile.Name != "my-h200" || back.Grid.Profile.EagerStepMs != 30 {
		t.Fatalf("read back profile %q with an eager floor of %v ms, want my-h200 with 30", back.Grid.Profile.Name, back.Grid.Profile.EagerStepMs)
	}

	var js bytes.Buffer
	WriteJSON(&js, fixedResult(t))
	old, err := ReadJSON(strings.NewReader(noEngine(t, js.String())))
	if err != nil {
		t.Fatalf("a report without its engine: %v", err)
	}
	if want := sim.MustProfile(sim.DefaultProfile); old.Grid.Profile.KVBlocks != want.KVBlocks || old.Grid.Profile.Name != want.Name {
		t.Fatalf("a report without its engine read back %+v, want the built-in default", old.Grid.Profile)
	}
}

// noEngine takes the engine out of a report's JSON, as reports written
// before it was recorded are.
func noEngine(t *testing.T, js string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["engine"]; !ok {
		t.Fatal("the report has no engine to take out")
	}
	delete(m, "engine")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadJSONRefusesWhatItDidNotWrite(t *testing.T) {
	var js bytes.Buffer
	WriteJSON(&js, fixedResult(t))
	good := js.String()
	js.Reset()
	res := fixedResult(t)
	res.Runs = res.Runs[:3]
	WriteJSON(&js, res)
	partial := js.String()
	tests := []struct {
		name, edit, want string
	}{
		{"an unknown workload", strings.Replace(good, `"open-loop"`, `"rush-hour"`, 1), `unknown workload "rush-hour"`},
		{"an unknown profile and no engine, as in older reports", strings.Replace(noEngine(t, good), "h200-llama3.1-70b-fp8-tp1", "tpu-v9", 1), `no profile "tpu-v9"`},
		{"an engine the report does not name", strings.Replace(good, `"profile": "h200-llama3.1-70b-fp8-tp1"`, `"profile": "tpu-v9"`, 1), `the engine is profile "h200-llama3.1-70b-fp8-tp1", the report names "tpu-v9"`},
		{"an engine that is no engine", strings.Replace(good, `"kv_blocks": 12300`, `"kv_blocks": 0`, 1), "kv_blocks must be at least 1"},
		{"a run out of order", strings.Replace(good, `"seed": 1`, `"seed": 7`, 1), "run 1 is round_robin on chat at 40, seed 7"},
		{"a partial report with a run out of order", strings.Replace(partial, `"seed": 1`, `"seed": 7`, 1), "run 1, round_robin on chat at 40, seed 7, is not in the grid or not in its order"},
		{"a partial report of every run", strings.Replace(good, `"slo_tpot_ms": 60,`, `"slo_tpot_ms": 60, "partial": true,`, 1), "marked partial, with 16 runs of a grid of 16"},
		{"an unknown field", strings.Replace(good, `"workers"`, `"gpus"`, 1), `unknown field "gpus"`},
		{"not JSON", "<html>", "invalid character"},
		{"a report with more after it", good + `{"runs":[]}`, "more after the report's JSON object"},
		{"no profile, as in JSON of something else", `{"runs":[]}`, `no "profile": not a report of kvlens bench routing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadJSON(strings.NewReader(tt.edit))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tt.want)
			}
		})
	}
}

func FuzzReadJSON(f *testing.F) {
	var js bytes.Buffer
	if err := WriteJSON(&js, fixedResult(f)); err != nil {
		f.Fatal(err)
	}
	f.Add(js.Bytes())
	f.Add([]byte(`{"runs":[]}`))
	part := fixedResult(f)
	part.Runs = part.Runs[1:4]
	js.Reset()
	if err := WriteJSON(&js, part); err != nil {
		f.Fatal(err)
	}
	f.Add(js.Bytes())
	f.Add([]byte(`{"workers":3,"profile":"h200-llama3.1-70b-fp8-tp1","policies":["kv"],"workloads":["chat"],"levels":[1],"seeds":[1],"warmup_s":{"chat":60},"measure_s":1,"slo_ttft_ms":600,"slo_tpot_ms":60,"runs":[{"workload":"chat","policy":"kv","level":1,"seed":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		if res.Partial() {
			// What a resumed grid keeps: each run once, in the grid.
			if got := res.Grid.Collect(res.Runs); !slices.Equal(got.Runs, res.Runs) {
				t.Fatalf("a partial report's runs %+v are not the grid's, in order", res.Runs)
			}
			return
		}
		var md bytes.Buffer
		if err := WriteMarkdown(&md, res); err != nil {
			t.Fatal(err)
		}
	})
}
