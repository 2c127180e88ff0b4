package baselines

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files and the built-in sets from the seed texts")

// The built-in sets' descriptions. Their figures come from the seed texts in
// testdata/ (copies of shared/seeds), never from this file.
const (
	deployment = "3× H200 (3 nodes, 1 GPU each), 3 workers at TP=1; Llama 3.1 70B Instruct FP8; " +
		"TensorRT-LLM via Dynamo 0.9.0 (Rust frontend, DYN_ROUTER_MODE round_robin or kv); " +
		"max batch size 64, max num tokens 16384, FP8 KV cache, free GPU memory fraction 0.90, chunked prefill"
	prefix = "3×H200 · Llama 3.1 70B FP8 · TRT-LLM · Dynamo 0.9"
)

var builtinSeeds = []struct {
	file, seed string
	parse      func(t *testing.T, text string) Set
	meta       Set
}{
	{"01-averaged.json", "seed003.txt", parseSeed003, Set{
		Name:       prefix + " (averaged, 6 sweeps)",
		Source:     "seed 003, Results: the RR and KV columns, 6 independent sweeps averaged",
		Deployment: deployment,
		Method:     "60 s warmup per level (summary window flush), 300 s measurement (3 snapshots @ 100 s, averaged), 6 sweeps averaged",
		Metric:     "loadgen_ttft_all_seconds",
	}},
	{"02-sweep-2026-02-27.json", "seed000.txt", parseReferenceJSON, Set{
		Name:       prefix + " · sweep 2026-02-27",
		Source:     "seed 000, Reference Data (JSON)",
		Deployment: deployment,
		Method:     "warmup per level (summary window flush), 3 snapshots averaged per level",
	}},
	{"03-kv-160-200.json", "seed001.txt", parseReferenceJSON, Set{
		Name:       prefix + " · KV 160–200",
		Source:     "seed 001, Reference Data (JSON)",
		Deployment: deployment,
		Method:     "60 s warmup per level (summary window flush), 300 s measurement (3 snapshots @ 100 s, averaged)",
		Metric:     "loadgen_ttft_all_seconds",
	}},
}

// TestBuiltinMatchesSeeds checks every built-in figure against the seed text
// it was published in. With -update it writes the built-in files instead.
func TestBuiltinMatchesSeeds(t *testing.T) {
	got, err := Builtin()
	if err != nil && !*update {
		t.Fatal(err)
	}
	if !*update && len(got) != len(builtinSeeds) {
		t.Fatalf("%d built-in sets, want %d", len(got), len(builtinSeeds))
	}
	for i, b := range builtinSeeds {
		t.Run(b.file, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("testdata", b.seed))
			if err != nil {
				t.Fatal(err)
			}
			want := b.parse(t, string(text))
			want.Name, want.Source, want.Deployment, want.Method = b.meta.Name, b.meta.Source, b.meta.Deployment, b.meta.Method
			if b.meta.Metric != "" {
				want.Metric = b.meta.Metric
			}
			want.Sort()
			if *update {
				data, err := Encode(&want, FormatKvlens)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join("builtin", b.file), data, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !reflect.DeepEqual(got[i], want) {
				for _, d := range diffSets(got[i], want) {
					t.Error(d)
				}
				t.FailNow()
			}
		})
	}
}

// diffSets lists the figures that differ, one line each.
func diffSets(got, want Set) []string {
	var out []string
	if got.Name != want.Name || got.Source != want.Source || got.Deployment != want.Deployment ||
		got.Method != want.Method || got.Generated != want.Generated || got.Metric != want.Metric {
		out = append(out, fmt.Sprintf("header = %+v, want %+v", got, want))
	}
	if len(got.Levels) != len(want.Levels) {
		return append(out, fmt.Sprintf("%d levels, want %d", len(got.Levels), len(want.Levels)))
	}
	for i := range got.Levels {
		g, w := got.Levels[i], want.Levels[i]
		if g.Mode != w.Mode || g.Concurrency != w.Concurrency {
			out = append(out, fmt.Sprintf("levels[%d] is %s@%d, want %s@%d", i, g.Mode, g.Concurrency, w.Mode, w.Concurrency))
			continue
		}
		for _, f := range Fields {
			gv, gok := f.Value(&g.Metrics)
			wv, wok := f.Value(&w.Metrics)
			if gv != wv || gok != wok {
				out = append(out, fmt.Sprintf("%s@%d %s = %v (present %v), seed says %v (present %v)", g.Mode, g.Concurrency, f.Key, gv, gok, wv, wok))
			}
		}
	}
	return out
}

func TestBuiltinSetsHaveTheSeedsLevels(t *testing.T) {
	sets, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		set    int
		modes  []string
		levels []int
		ttft95 map[string]float64 // a spot check at the first level, per mode
	}{
		// seed 003 averages six sweeps at 60–180 in steps of 20
		{"the averaged set covers RR and KV from 60 to 180", 0, []string{"round_robin", "kv"}, []int{60, 80, 100, 120, 140, 160, 180}, map[string]float64{"round_robin": 655, "kv": 446}},
		// seed 000 sweeps 40–120 in steps of 10
		{"the 2026-02-27 sweep covers RR and KV from 40 to 120", 1, []string{"round_robin", "kv"}, []int{40, 50, 60, 70, 80, 90, 100, 110, 120}, map[string]float64{"round_robin": 677.7, "kv": 370.9}},
		// seed 001 measures KV alone at 160, 180, 200
		{"the KV 160–200 set has KV alone", 2, []string{"kv"}, []int{160, 180, 200}, map[string]float64{"kv": 804.7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sets[tt.set]
			if got := s.Modes(); !reflect.DeepEqual(got, tt.modes) {
				t.Errorf("modes = %v, want %v", got, tt.modes)
			}
			if got := s.Concurrencies(); !reflect.DeepEqual(got, tt.levels) {
				t.Errorf("levels = %v, want %v", got, tt.levels)
			}
			for mode, want := range tt.ttft95 {
				if l, _ := s.Level(mode, tt.levels[0]); l.TTFTP95 != want {
					t.Errorf("%s TTFT p95 at %d = %v, want %v", mode, tt.levels[0], l.TTFTP95, want)
				}
			}
		})
	}
}

// parseReferenceJSON reads the JSON block under "Reference Data (JSON)".
func parseReferenceJSON(t *testing.T, text string) Set {
	t.Helper()
	_, after, ok := strings.Cut(text, "## Reference Data (JSON)")
	if !ok {
		t.Fatal("seed has no Reference Data section")
	}
	_, block, _ := strings.Cut(after, "```json\n")
	block, _, _ = strings.Cut(block, "```")
	s, _, err := Decode([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// parseSeed003 reads seed 003's Results tables: TTFT (p50, p95, hit rates),
// Throughput and Actual RPS, ITL (its TPOT), and End-to-End Latency (in s).
func parseSeed003(t *testing.T, text string) Set {
	t.Helper()
	type both struct{ rr, kv Metrics }
	rows := map[int]*both{}
	var order []int
	row := func(c int) *both {
		if rows[c] == nil {
			rows[c] = &both{}
			order = append(order, c)
		}
		return rows[c]
	}
	_, results, _ := strings.Cut(text, "## Results")
	ttft := table(t, results, "### TTFT — Time to First Token")
	for _, r := range ttft {
		b := row(atoi(t, r[0]))
		b.rr.TTFTP50, b.kv.TTFTP50 = num(t, r[1], "ms"), num(t, r[2], "ms")
		b.rr.TTFTP95, b.kv.TTFTP95 = num(t, r[4], "ms"), num(t, r[5], "ms")
		b.rr.KVHitRate, b.kv.KVHitRate = new(num(t, r[7], "%")), new(num(t, r[8], "%"))
	}
	for _, r := range table(t, results, "### Throughput and Actual RPS") {
		b := row(atoi(t, r[0]))
		b.rr.TOPS, b.kv.TOPS = num(t, r[1], ""), num(t, r[2], "")
		rr, kv := num(t, r[4], ""), num(t, r[5], "")
		b.rr.ActualRPS, b.kv.ActualRPS = &rr, &kv
	}
	for _, r := range table(t, results, "### ITL — Inter-Token Latency") {
		b := row(atoi(t, r[0]))
		b.rr.TPOTP50, b.kv.TPOTP50 = num(t, r[1], "ms"), num(t, r[2], "ms")
		b.rr.TPOTP95, b.kv.TPOTP95 = num(t, r[3], "ms"), num(t, r[4], "ms")
	}
	for _, r := range table(t, results, "### End-to-End Latency") {
		b := row(atoi(t, r[0]))
		b.rr.LatencyP50, b.kv.LatencyP50 = secondsAsMs(t, r[1]), secondsAsMs(t, r[2])
		b.rr.LatencyP95, b.kv.LatencyP95 = secondsAsMs(t, r[3]), secondsAsMs(t, r[4])
	}
	if len(order) != len(ttft) {
		t.Fatalf("tables disagree on the levels: %v", order)
	}
	var s Set
	for _, mode := range []string{"round_robin", "kv"} {
		for _, c := range order {
			m := rows[c].rr
			if mode == "kv" {
				m = rows[c].kv
			}
			s.Levels = append(s.Levels, Level{Concurrency: c, Mode: mode, Metrics: m})
		}
	}
	return s
}

// table returns the body rows of the Markdown table under heading, as cells.
func table(t *testing.T, text, heading string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(text, heading+"\n")
	if !ok {
		t.Fatalf("no table under %q", heading)
	}
	var rows [][]string
	for i, line := range strings.Split(strings.TrimLeft(after, "\n"), "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 { // the header and the alignment row
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("empty table under %q", heading)
	}
	return rows
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return n
}

func num(t *testing.T, s, unit string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSuffix(s, unit), ",", ""), 64)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return v
}

// secondsAsMs turns "24.6s" into 24600 exactly, by moving the decimal point
// in the text rather than multiplying a binary float.
func secondsAsMs(t *testing.T, s string) float64 {
	t.Helper()
	whole, frac, _ := strings.Cut(strings.TrimSuffix(s, "s"), ".")
	frac = (frac + "000")[:3]
	return num(t, whole+frac, "")
}
