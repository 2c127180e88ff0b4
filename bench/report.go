package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

// about describes the grid in one paragraph, for the report's head.
func (r *Result) about() string {
	g := &r.Grid
	var warm []string
	for _, w := range g.Workloads {
		warm = append(warm, fmt.Sprintf("%s %s", w.Name, short(g.warmup(w).Seconds())))
	}
	return fmt.Sprintf("%d × %s simulated workers in virtual time, one fresh deployment per run; seeds %s; "+
		"each run warms up (%s) and is then measured for %s as one window; goodput counts requests with TTFT ≤ %d ms and TPOT ≤ %d ms.",
		g.Workers, g.Profile.Name, seedsText(g.Seeds), strings.Join(warm, ", "), short(g.Measure.Seconds()),
		g.SLO.TTFT.Milliseconds(), g.SLO.TPOT.Milliseconds())
}

// short writes seconds as "90 s".
func short(sec float64) string { return fmt.Sprintf("%g s", sec) }

// WriteMarkdown writes the report: which policy wins each workload at each
// level, then per workload a table of TTFT p95 (mean over the seeds and
// their range) and one of KV hit rate against the oracle's, with goodput.
func WriteMarkdown(w io.Writer, r *Result) error {
	if err := r.whole(); err != nil {
		return err
	}
	var b strings.Builder
	rows := r.rows()
	levels := r.Grid.Levels
	fmt.Fprintf(&b, "# Routing benchmark\n\n%s\n\n", r.about())

	winners := func(title string, win func(row) int) {
		fmt.Fprintf(&b, "%s\n\n| workload |", title)
		for _, l := range levels {
			fmt.Fprintf(&b, " %d |", l)
		}
		b.WriteString("\n|:--|" + strings.Repeat(":--|", len(levels)) + "\n")
		for _, wl := range r.Grid.Workloads {
			fmt.Fprintf(&b, "| %s |", wl.Name)
			for _, rw := range rows {
				if rw.workload == wl.Name {
					fmt.Fprintf(&b, " %s |", rw.cells[win(rw)].Policy)
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	winners("Lowest mean TTFT p95, by workload and level:", row.winnerTTFT)
	winners("Highest mean goodput, by workload and level:", row.winnerGoodput)

	header := func(first string) {
		fmt.Fprintf(&b, "| %s |", first)
		for _, p := range r.Grid.Policies {
			fmt.Fprintf(&b, " %s |", p)
		}
		b.WriteString("\n|--:|" + strings.Repeat("--:|", len(r.Grid.Policies)) + "\n")
	}
	for _, wl := range r.Grid.Workloads {
		fmt.Fprintf(&b, "## %s\n\n", wl.Name)
		if wl.OpenLoop() {
			b.WriteString("The level is sessions in flight by Little's law (an arrival rate, see docs/workloads.md); the level column gives, in brackets, the range over the runs of the mean number of conversations (for a trace, requests) in flight.\n\n")
		}
		b.WriteString("TTFT p95, ms: mean over the seeds [min–max]; **bold** is the lowest mean in the row.\n\n")
		header("level")
		for _, rw := range rows {
			if rw.workload != wl.Name {
				continue
			}
			fmt.Fprintf(&b, "| %s |", levelText(rw, wl.OpenLoop()))
			win := rw.winnerTTFT()
			for i, c := range rw.cells {
				fmt.Fprintf(&b, " %s |", bold(statText(c.TTFT(), "%.0f"), i == win))
			}
			b.WriteString("\n")
		}
		b.WriteString("\nKV hit rate, % (the oracle's, %) · goodput, requests/s; means over the seeds; **bold** is the highest goodput in the row.\n\n")
		header("level")
		for _, rw := range rows {
			if rw.workload != wl.Name {
				continue
			}
			fmt.Fprintf(&b, "| %d |", rw.level)
			win := rw.winnerGoodput()
			for i, c := range rw.cells {
				fmt.Fprintf(&b, " %s |", bold(fmt.Sprintf("%.1f (%.1f) · %.2f", c.Hit().Mean, c.Oracle().Mean, c.Goodput().Mean), i == win))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	writeShortfalls(&b, r)
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// levelText is a row's level, with for an open loop the range of what was
// in flight.
func levelText(rw row, open bool) string {
	if !open {
		return fmt.Sprint(rw.level)
	}
	lo, hi := -1.0, 0.0
	for _, c := range rw.cells {
		s := c.InFlight()
		if lo < 0 || s.Min < lo {
			lo = s.Min
		}
		hi = max(hi, s.Max)
	}
	return fmt.Sprintf("%d [%.0f–%.0f]", rw.level, lo, hi)
}

// statText writes a Stat as "mean [min–max]", or the mean alone when every
// seed gave the same figure.
func statText(s Stat, format string) string {
	mean := fmt.Sprintf(format, s.Mean)
	if lo, hi := fmt.Sprintf(format, s.Min), fmt.Sprintf(format, s.Max); lo != hi {
		return mean + " [" + lo + "–" + hi + "]"
	}
	return mean
}

func bold(s string, on bool) string {
	if on {
		return "**" + s + "**"
	}
	return s
}

// report is the JSON form of a result.
type report struct {
	Workers int    `json:"workers"`
	Profile string `json:"profile"`
	// Engine is the profile's every setting, so that a grid run with a
	// profile file (--sim-profile FILE) reads back without the file.
	// Reports written before it was added name a built-in profile.
	Engine    *sim.Profile       `json:"engine,omitempty"`
	Policies  []string           `json:"policies"`
	Workloads []string           `json:"workloads"`
	Levels    []int              `json:"levels"`
	Seeds     []uint64           `json:"seeds"`
	WarmupSec map[string]float64 `json:"warmup_s"`
	Measure   float64            `json:"measure_s"`
	SLOTTFT   float64            `json:"slo_ttft_ms"`
	SLOTPOT   float64            `json:"slo_tpot_ms"`
	// Partial marks a grid interrupted before its end: Runs holds the runs
	// finished, in the grid's order, and the grid can be resumed.
	Partial bool  `json:"partial,omitempty"`
	Runs    []Run `json:"runs"`
}

// whole says why a result's reports cannot be drawn: it lacks runs.
func (r *Result) whole() error {
	if r.Partial() {
		return fmt.Errorf("bench: %d of the grid's %.0f runs: resume the grid to draw its reports", len(r.Runs), r.Grid.size())
	}
	return nil
}

// WriteJSON writes the grid's settings and its runs: every run, or for an
// interrupted grid those finished, marked partial.
func WriteJSON(w io.Writer, r *Result) error {
	g := &r.Grid
	rep := report{
		Workers: g.Workers, Profile: g.Profile.Name, Engine: &g.Profile, Policies: g.Policies, Levels: g.Levels, Seeds: g.Seeds,
		WarmupSec: map[string]float64{}, Measure: g.Measure.Seconds(),
		SLOTTFT: float64(g.SLO.TTFT.Milliseconds()), SLOTPOT: float64(g.SLO.TPOT.Milliseconds()), Partial: r.Partial(), Runs: r.Runs,
	}
	for _, wl := range g.Workloads {
		rep.Workloads = append(rep.Workloads, wl.Name)
		rep.WarmupSec[wl.Name] = g.warmup(wl).Seconds()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("bench: write JSON: %w", err)
	}
	return nil
}

// ReadJSON reads back what WriteJSON wrote, so that the reports can be
// drawn again without running the grid: the grid's settings (its workloads
// from the suite, its profile as written or, in older reports, by name) and
// every run, checked against them. A partial report reads back with the
// runs it holds, for the grid to be resumed.
func ReadJSON(r io.Reader) (*Result, error) {
	var rep report
	dec := json.NewDecoder(io.LimitReader(r, 256<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("bench: read JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("bench: read JSON: more after the report's JSON object")
	}
	g := Grid{Workers: rep.Workers, Policies: rep.Policies, Levels: rep.Levels, Seeds: rep.Seeds,
		Measure: time.Duration(rep.Measure * float64(time.Second)),
		SLO:     baselines.SLO{TTFT: time.Duration(rep.SLOTTFT) * time.Millisecond, TPOT: time.Duration(rep.SLOTPOT) * time.Millisecond}}
	if rep.Profile == "" {
		// A JSON object of other things reads as an empty report.
		return nil, errors.New(`bench: read JSON: no "profile": not a report of kvlens bench routing`)
	}
	var err error
	switch {
	case rep.Engine == nil:
		if g.Profile, err = sim.LookupProfile(rep.Profile); err != nil {
			return nil, fmt.Errorf("bench: read JSON: %w", err)
		}
	case rep.Engine.Name != rep.Profile:
		return nil, fmt.Errorf("bench: read JSON: the engine is profile %q, the report names %q", rep.Engine.Name, rep.Profile)
	default:
		g.Profile = *rep.Engine
	}
	// One warmup for every workload, or each workload's own.
	own, same := true, true
	for i, name := range rep.Workloads {
		w, err := loadgen.LookupWorkload(name)
		if err != nil {
			return nil, fmt.Errorf("bench: read JSON: %w", err)
		}
		g.Workloads = append(g.Workloads, w)
		sec := rep.WarmupSec[name]
		own = own && sec == w.Warmup.Seconds()
		same = same && sec == rep.WarmupSec[rep.Workloads[0]]
		if i == 0 {
			g.Warmup = time.Duration(sec * float64(time.Second))
		}
	}
	switch {
	case own:
		g.Warmup = 0
	case !same:
		return nil, fmt.Errorf("bench: read JSON: the workloads' warmups are neither their own nor one for all")
	}
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("bench: read JSON: %s", strings.TrimPrefix(err.Error(), "bench: "))
	}
	n := g.size()
	switch {
	case !rep.Partial && n != float64(len(rep.Runs)):
		return nil, fmt.Errorf("bench: read JSON: %d runs, but the grid has %.0f", len(rep.Runs), n)
	case rep.Partial && n <= float64(len(rep.Runs)):
		return nil, fmt.Errorf("bench: read JSON: marked partial, with %d runs of a grid of %.0f", len(rep.Runs), n)
	}
	// A partial report's runs are some of the grid's, in its order.
	next := 0
	for _, j := range g.jobs() {
		if next == len(rep.Runs) {
			break
		}
		r := rep.Runs[next]
		if r.key() == j.key() {
			next++
			continue
		}
		if !rep.Partial {
			return nil, fmt.Errorf("bench: read JSON: run %d is %s on %s at %d, seed %d; the grid's order wants %s on %s at %d, seed %d",
				next+1, r.Policy, r.Workload, r.Level, r.Seed, j.policy, j.w.Name, j.level, j.seed)
		}
	}
	if next < len(rep.Runs) {
		r := rep.Runs[next]
		return nil, fmt.Errorf("bench: read JSON: run %d, %s on %s at %d, seed %d, is not in the grid or not in its order",
			next+1, r.Policy, r.Workload, r.Level, r.Seed)
	}
	return &Result{Grid: g, Runs: rep.Runs}, nil
}
