package baselines

import (
	"bytes"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/internal/chartcheck"
)

// synthetic is a fixed two-mode sweep: KV halves RR's TTFT at 60 and gains
// less at higher load, and errors appear at 100.
func synthetic(modes ...string) *Set {
	rps := 10.0
	s := &Set{Name: "synthetic", Generated: "2026-11-22T05:00:00Z", TargetRPS: &rps}
	for mi, mode := range modes {
		for i, c := range []int{60, 80, 100} {
			f := float64(i + 1)
			gain := 1 - 0.5/f*float64(mi) // RR 1; KV 0.5, 0.75, 0.833
			errPct, actual := 0.0, 2.5*f
			if c == 100 {
				errPct = 1.5 * float64(mi+1)
			}
			s.Levels = append(s.Levels, Level{Mode: mode, Concurrency: c, Metrics: Metrics{
				TTFTP50: 300 * f * gain, TTFTP95: 500 * f * gain, KVHitRate: new(80 + 5*float64(mi) + f),
				TOPS: 2000 + 250*f + 100*float64(mi), TPOTP50: 25 + 2*f, TPOTP95: 30 + 3*f,
				LatencyP50: 20000 + 1000*f, LatencyP95: 30000 + 1500*f, ErrorPct: &errPct, ActualRPS: &actual,
				Goodput: new(actual * gain * 0.9),
			}})
		}
	}
	return s
}

// unreported removes the hit rate of every level but kv's at 60, as a sweep
// of workers that report no cached tokens would, with one that did.
func unreported(s *Set) *Set {
	for i := range s.Levels {
		if l := &s.Levels[i]; l.Mode != "kv" || l.Concurrency != 60 {
			l.KVHitRate = nil
		}
	}
	return s
}

func syntheticConfig() SweepConfig {
	return SweepConfig{
		Levels: []int{60, 80, 100}, Warmup: 20 * time.Second, Measure: 40 * time.Second, Snapshots: 3, Repeats: 2,
		SLO: DefaultSLO, TargetRPS: 10, Window: time.Minute, Workload: "Multi-turn chat (3-5 turns per conversation)",
		Deployment: []Param{{"Model", "Llama 3.1 70B Instruct FP8"}, {"Workers", "3 simulated H200"}},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file (go test ./baselines -update to accept):\n%s", name, got)
	}
}

func TestReportGolden(t *testing.T) {
	tests := []struct {
		name   string
		set    *Set
		golden string
	}{
		{"two modes give seed 000's comparison layout", synthetic("round_robin", "kv"), "report_dual.md"},
		{"one mode gives seed 001's scaling layout", synthetic("kv"), "report_single.md"},
		{"a hit rate the workers did not report reads n/a, never 0%", unreported(synthetic("round_robin", "kv")), "report_unreported.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteMarkdown(&b, Report{Set: tt.set, Config: syntheticConfig()}); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, b.Bytes())
		})
	}
}

// TestReportKeepsABarInItsCell: a deployment value holding "|", such as a
// --mode-switch-cmd piping into another command, stays in its cell rather
// than splitting the row into columns the table does not have.
func TestReportKeepsABarInItsCell(t *testing.T) {
	c := syntheticConfig()
	c.Deployment = append(c.Deployment, Param{"Mode switch", "`switch {mode} | tee log`"})
	var b bytes.Buffer
	if err := WriteMarkdown(&b, Report{Set: synthetic("round_robin", "kv"), Config: c}); err != nil {
		t.Fatal(err)
	}
	want := "| Mode switch | `switch {mode} \\| tee log` |\n"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("report lacks the row %q:\n%s", want, b.String())
	}
}

// skeleton keeps what makes a report's layout and drops its figures: the
// headings, the tables' header rows, and the bold labels of its bullets.
func skeleton(md string) []string {
	label := regexp.MustCompile(`^- \*\*([^(:*]*)`)
	var out []string
	prev := ""
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			out = append(out, line[:strings.IndexByte(line, ' ')+1]+"heading")
		case strings.HasPrefix(line, "|") && !strings.HasPrefix(prev, "|"):
			out = append(out, regexp.MustCompile(`\d+`).ReplaceAllString(line, "N"))
		case label.MatchString(line):
			out = append(out, "- "+strings.TrimSpace(label.FindStringSubmatch(line)[1]))
		}
		prev = line
	}
	return out
}

// TestReportFollowsSeed000 renders seed 000's own figures and checks that the
// report has the seed's sections, tables and summary bullets, in its order.
func TestReportFollowsSeed000(t *testing.T) {
	seed, err := os.ReadFile("testdata/seed000.txt")
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := Decode(seedJSON(t, "seed000.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, Report{Set: &set, Config: syntheticConfig()}); err != nil {
		t.Fatal(err)
	}
	want, got := skeleton(string(seed)), skeleton(b.String())
	// Ours may add bullets (the SLO envelope), never drop or reorder the seed's.
	i := 0
	for _, line := range got {
		if i < len(want) && line == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("the report lacks the seed's %q (item %d of its layout)\nseed:\n%s\nours:\n%s", want[i], i, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	// The summary's computed figures match the seed's where they coincide.
	for _, s := range []string{
		"**TTFT p50 improvement at lowest concurrency (40):** 17.9%",
		"**TTFT p50 improvement at highest concurrency (120):** 1.2%",
		"**Peak benefit:** Concurrency 40 shows the maximum p50 improvement at 17.9%.",
		"This may indicate cache pressure at higher loads.", // KV's hit rate falls from 100.0% to 94.9%
		"**KV cache hit rate (KV mode):** 93.1% (at 50) to 100.0% (at 40), average 95.8%.",
		"**KV cache hit rate (RR mode):** 82.2% (at 80) to 99.7% (at 40), average 89.9%.",
		"| 40 | 271ms | 223ms | 17.9% | 678ms | 371ms | 45.3% | 99.7% | 100.0% |",
		"| 110 | 35548ms | 36687ms | 52871ms | 46969ms |",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the report lacks %q", s)
		}
		if !strings.Contains(string(seed), strings.TrimSuffix(s, ".")) {
			t.Errorf("the seed itself lacks %q: the check is wrong", s)
		}
	}
}

func TestWriteChart(t *testing.T) {
	var b bytes.Buffer
	if err := WriteChart(&b, synthetic("round_robin", "kv"), DefaultSLO); err != nil {
		t.Fatal(err)
	}
	img, drawn, err := chartcheck.Colours(&b)
	if err != nil {
		t.Fatal(err)
	}
	if sz := img.Bounds().Size(); sz.X != 1500 || sz.Y < 840 || sz.Y > 845 {
		t.Fatalf("size %v, want 1500×~844", sz)
	}
	// The lines are drawn: the KV green and the SLO red both appear.
	found := map[string]bool{
		"kv":  drawn[color.RGBA{R: 0x76, G: 0xb9, B: 0x00, A: 0xff}],
		"slo": drawn[color.RGBA{R: 0xdc, G: 0x26, B: 0x26, A: 0xff}],
	}
	if !found["kv"] || !found["slo"] {
		t.Fatalf("colours found: %v; want the KV line and the SLO line", found)
	}
}

// TestChartLeavesTheLegendARoomOfItsOwn: a curve whose first level is its
// highest would run from the top left corner, where the legend is; the
// chart leaves a band above the highest point, so no curve pixel lies in
// the legend's band right of its swatches. The axis reads whole
// milliseconds.
func TestChartLeavesTheLegendARoomOfItsOwn(t *testing.T) {
	s := synthetic("round_robin", "kv")
	for i := range s.Levels {
		// Falling curves: the first level is each one's highest.
		s.Levels[i].TTFTP95 = 3000 - 10*float64(s.Levels[i].Concurrency)
	}
	var b bytes.Buffer
	if err := WriteChart(&b, s, DefaultSLO); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	grey, green := color.RGBA{R: 0x6b, G: 0x72, B: 0x80, A: 0xff}, color.RGBA{R: 0x76, G: 0xb9, B: 0x00, A: 0xff}
	under := 0
	// The legend's three entries take the top 120 px of 844, its swatches
	// the first 170 px from the left; its text is black.
	for y := 0; y < 120; y++ {
		for x := 170; x < 700; x++ {
			if c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA); c == grey || c == green {
				under++
			}
		}
	}
	if under > 0 {
		t.Fatalf("%d pixels of the curves lie in the legend's band", under)
	}
}
