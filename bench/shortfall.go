package bench

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Tolerance is how far from the best a policy may be and still count as
// level with it, as a fraction of the best: the 2% of issue 17's criterion.
const Tolerance = 0.02

// A Shortfall is a row where the policy under study is neither the best
// nor within Tolerance of it on one figure.
type Shortfall struct {
	Workload string
	Level    int
	// Figure is "TTFT p95" (lower is better) or "goodput" (higher is better).
	Figure string
	// Mine and Best are the means over the seeds of the policy under study
	// and of the row's best other policy, BestPolicy.
	Mine, Best float64
	BestPolicy string
	// Gap is how much worse Mine is than Best, in percent of Best.
	Gap float64
	// Low and High bound the 95% confidence interval of Gap from the runs
	// paired by seed (Student's t over the per-seed gaps); NaN with one
	// seed. An interval that holds 2 or less cannot tell this shortfall
	// from the runs' own noise.
	Low, High float64
}

// figures are the two figures issue 17 judges a policy on: the value of a
// run and whether higher is better.
var figures = []struct {
	name string
	of   func(Run) float64
	high bool
}{
	{"TTFT p95", func(r Run) float64 { return r.TTFTP95 }, false},
	{"goodput", func(r Run) float64 { return r.Goodput }, true},
}

// Shortfalls lists, row by row, every figure on which policy is neither
// the best nor within Tolerance of the best of the others.
func (r *Result) Shortfalls(policy string) []Shortfall {
	var out []Shortfall
	for _, rw := range r.rows() {
		mine := -1
		for i, c := range rw.cells {
			if c.Policy == policy {
				mine = i
			}
		}
		if mine < 0 || len(rw.cells) < 2 {
			continue
		}
		for _, f := range figures {
			mean := func(c Cell) float64 { return c.stat(f.of).Mean }
			best := -1
			for i, c := range rw.cells {
				if i != mine && (best < 0 || (f.high && mean(c) > mean(rw.cells[best])) || (!f.high && mean(c) < mean(rw.cells[best]))) {
					best = i
				}
			}
			m, b := mean(rw.cells[mine]), mean(rw.cells[best])
			gap := 100 * (m - b) / b
			if f.high {
				gap = -gap
			}
			if b == 0 || gap <= 100*Tolerance {
				continue
			}
			low, high := pairedInterval(rw.cells[mine], rw.cells[best], f.of, f.high, b)
			out = append(out, Shortfall{
				Workload: rw.workload, Level: rw.level, Figure: f.name,
				Mine: m, Best: b, BestPolicy: rw.cells[best].Policy, Gap: gap, Low: low, High: high,
			})
		}
	}
	return out
}

// pairedInterval is the 95% confidence interval of the mean per-seed gap
// between two cells, in percent of base, where higher says a higher figure
// is better; NaN unless at least two seeds are in both.
func pairedInterval(mine, best Cell, of func(Run) float64, higher bool, base float64) (low, high float64) {
	bySeed := map[uint64]float64{}
	for _, r := range best.Runs {
		bySeed[r.Seed] = of(r)
	}
	var gaps []float64
	for _, r := range mine.Runs {
		b, ok := bySeed[r.Seed]
		if !ok {
			continue
		}
		g := 100 * (of(r) - b) / base
		if higher {
			g = -g
		}
		gaps = append(gaps, g)
	}
	n := float64(len(gaps))
	if n < 2 {
		return math.NaN(), math.NaN()
	}
	mean, sd := stat.MeanStdDev(gaps, nil) // sd with n − 1
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(0.975)
	half := t * sd / math.Sqrt(n)
	return mean - half, mean + half
}

// writeShortfalls writes the report's last section: every row where kv is
// not the best or within Tolerance of it, with the paired interval that
// says whether the seeds can tell the difference.
func writeShortfalls(b *strings.Builder, r *Result) {
	const policy = "kv"
	has := false
	for _, p := range r.Grid.Policies {
		has = has || p == policy
	}
	if !has || len(r.Grid.Policies) < 2 {
		return
	}
	fs := r.Shortfalls(policy)
	rows := len(r.rows())
	fmt.Fprintf(b, "## Where %s is not the best\n\n", policy)
	for _, f := range figures {
		n := 0
		for _, s := range fs {
			if s.Figure == f.name {
				n++
			}
		}
		fmt.Fprintf(b, "%s: %s is the best or within %.0f%% of it in %d of %d rows.\n", f.name, policy, 100*Tolerance, rows-n, rows)
	}
	if len(fs) == 0 {
		b.WriteString("\n")
		return
	}
	b.WriteString("\nThe gap is how much worse than the best other policy, in % of its mean; the interval is the 95% confidence interval of the gap from the runs paired by seed (Student's t). Where the interval reaches 2% or below, the seeds cannot tell the shortfall from their own noise. The best is picked after the fact from several policies, which flatters it: the intervals lean towards calling a shortfall real.\n\n")
	b.WriteString("| workload | level | figure | " + policy + " | best | gap, % | 95% interval, % |\n|:--|--:|:--|--:|:--|--:|:--|\n")
	for _, s := range fs {
		format := "%.0f"
		if s.Figure == "goodput" {
			format = "%.2f"
		}
		interval := "—"
		if !math.IsNaN(s.Low) {
			interval = fmt.Sprintf("%.1f to %.1f", s.Low, s.High)
		}
		fmt.Fprintf(b, "| %s | %d | %s | "+format+" | %s "+format+" | %.1f | %s |\n",
			s.Workload, s.Level, s.Figure, s.Mine, s.BestPolicy, s.Best, s.Gap, interval)
	}
	b.WriteString("\n")
}
