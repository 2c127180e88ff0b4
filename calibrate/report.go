package calibrate

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kvlens/kvlens/baselines"
)

// Report is a calibration's outcome: each simulated level beside the
// measured one.
type Report struct {
	// Profile names the simulated engines' profile.
	Profile string
	// Workers is the number of simulated engines.
	Workers int
	// Seeds are the seeds averaged.
	Seeds []uint64
	// Warmup and Measure timed each level, in virtual time.
	Warmup, Measure time.Duration
	// Reference names the measured set.
	Reference string
	// Turns is the simulated load's turns per conversation, as ParseTurns
	// reads it; empty means the load generator's default.
	Turns string
	// Staggered says the simulated load started conversations part-way
	// through (Config.Staggered).
	Staggered bool
	// Command is the command line that made the report, printed when set.
	Command string
	// Rows are the levels, by mode and then concurrency.
	Rows []Row
}

// Row is one level of one mode, simulated and measured.
type Row struct {
	// Concurrency is the number of simultaneous conversations.
	Concurrency int
	// Mode is the simulated policy, and Measured the reference's mode it is
	// held against.
	Mode, Measured string
	// Sim is the mean over the seeds; Seeds is the reference's level.
	Sim, Seeds baselines.Metrics
	// PerSeed is each seed's level, in the report's seed order.
	PerSeed []baselines.Metrics
}

// Figure is one compared figure of a Row.
type Figure struct {
	// Name heads the figure's column.
	Name string
	// Get reads the figure from a level's metrics.
	Get func(baselines.Metrics) float64
	// Format prints a value of the figure.
	Format func(float64) string
}

// Figures are the figures a report compares, in its column order: those
// issue 18 holds the simulator to.
var Figures = []Figure{
	{"TTFT p50 ms", func(m baselines.Metrics) float64 { return m.TTFTP50 }, whole},
	{"TTFT p95 ms", func(m baselines.Metrics) float64 { return m.TTFTP95 }, whole},
	{"TPOT p50 ms", func(m baselines.Metrics) float64 { return m.TPOTP50 }, tenths},
	{"output tok/s", func(m baselines.Metrics) float64 { return m.TOPS }, whole},
}

func whole(v float64) string  { return strconv.FormatFloat(v, 'f', 0, 64) }
func tenths(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// Diff is the simulated figure's difference from the measured one, as a
// fraction of the measured one; NaN when nothing was measured.
func Diff(sim, measured float64) float64 {
	if measured == 0 {
		return math.NaN()
	}
	return sim/measured - 1
}

// Within says whether a difference lies inside Tolerance.
func Within(d float64) bool { return !math.IsNaN(d) && math.Abs(d) <= Tolerance+1e-9 }

// Misses counts the compared cells outside Tolerance, and all of them.
func (r *Report) Misses() (miss, cells int) {
	for _, row := range r.Rows {
		for _, f := range Figures {
			cells++
			if !Within(Diff(f.Get(row.Sim), f.Get(row.Seeds))) {
				miss++
			}
		}
	}
	return miss, cells
}

// WriteMarkdown writes the report as a Markdown table: per level and mode,
// "simulated / measured (difference)" for each figure, a cell outside
// Tolerance in bold, and the KV hit rates for reading the rest.
func (r *Report) WriteMarkdown(w io.Writer) error {
	b := bufio.NewWriter(w)
	seeds := make([]string, len(r.Seeds))
	for i, s := range r.Seeds {
		seeds[i] = strconv.FormatUint(s, 10)
	}
	turns := ""
	if r.Turns != "" {
		turns = ", " + r.Turns + " turns per conversation"
	}
	if r.Staggered {
		turns += ", staggered starts"
	}
	fmt.Fprintf(b, "Simulated: %d × %s in virtual time%s, %s warmup + %s measure per level, mean of seeds %s.\n",
		r.Workers, r.Profile, turns, shortDuration(r.Warmup), shortDuration(r.Measure), strings.Join(seeds, ", "))
	fmt.Fprintf(b, "Measured: %s.\n", r.Reference)
	if r.Command != "" {
		fmt.Fprintf(b, "Command: `%s`\n", r.Command)
	}
	miss, cells := r.Misses()
	fmt.Fprintf(b, "\nEach cell is simulated / measured (difference); **bold** is outside ±%.0f%%: %d of %d cells.\n\n",
		100*Tolerance, miss, cells)

	fmt.Fprint(b, "| conc | policy (measured) |")
	for _, f := range Figures {
		fmt.Fprintf(b, " %s |", f.Name)
	}
	fmt.Fprint(b, " KV hit % |\n|--:|:--|")
	for range Figures {
		fmt.Fprint(b, "--:|")
	}
	fmt.Fprint(b, "--:|\n")
	for _, row := range r.Rows {
		mode := row.Mode
		if row.Measured != row.Mode {
			mode += " (" + row.Measured + ")"
		}
		fmt.Fprintf(b, "| %d | %s |", row.Concurrency, mode)
		for _, f := range Figures {
			got, want := f.Get(row.Sim), f.Get(row.Seeds)
			fmt.Fprintf(b, " %s / %s (%s) |", f.Format(got), f.Format(want), percent(Diff(got, want)))
		}
		fmt.Fprintf(b, " %s / %s |\n", hit(row.Sim.KVHitRate), hit(row.Seeds.KVHitRate))
	}
	r.writeMisses(b)
	return b.Flush()
}

// writeMisses lists each cell outside Tolerance seed by seed, so that a
// reader can tell a miss every seed makes (the model's) from one the
// mean takes from one or two seeds (the draws').
func (r *Report) writeMisses(b *bufio.Writer) {
	first := true
	for _, row := range r.Rows {
		if len(row.PerSeed) != len(r.Seeds) {
			continue
		}
		for _, f := range Figures {
			want := f.Get(row.Seeds)
			if Within(Diff(f.Get(row.Sim), want)) {
				continue
			}
			if first {
				fmt.Fprintf(b, "\nThe cells outside ±%.0f%%, seed by seed:\n\n", 100*Tolerance)
				first = false
			}
			vals := make([]string, len(row.PerSeed))
			in := 0
			for i, m := range row.PerSeed {
				vals[i] = f.Format(f.Get(m))
				if Within(Diff(f.Get(m), want)) {
					in++
				}
			}
			fmt.Fprintf(b, "- %s, %s at %d: measured %s; seed by seed %s; %d of %d seeds within ±%.0f%%\n",
				row.Mode, f.Name, row.Concurrency, f.Format(want), strings.Join(vals, ", "), in, len(vals), 100*Tolerance)
		}
	}
}

// percent prints a difference as a signed percentage, bold when outside
// Tolerance.
// hit formats a hit rate in percent, "n/a" when it was not reported.
func hit(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*p, 'f', 1, 64)
}

func percent(d float64) string {
	if math.IsNaN(d) {
		return "n/a"
	}
	s := strconv.FormatFloat(100*d, 'f', 1, 64) + "%"
	if d >= 0 {
		s = "+" + s
	}
	if !Within(d) {
		s = "**" + s + "**"
	}
	return s
}

// shortDuration prints 60s as "60 s" and 5m0s as "300 s".
func shortDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + " s"
	}
	return d.String()
}
