package baselines

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Label returns a mode's short column label and its name in prose.
func Label(mode string) (short, long string) {
	switch mode {
	case "round_robin":
		return "RR", "Round-robin"
	case "kv":
		return "KV", "KV cache-aware"
	case "kv_approx":
		return "KV~", "KV cache-aware (approximate)"
	case "dynamo":
		return "Dynamo", "KV cache-aware (Dynamo 0.9 cost)"
	case "least_loaded":
		return "LL", "Least-loaded"
	case "random":
		return "Random", "Random"
	case "dynamo_latest":
		return "DynamoLatest", "KV cache-aware (Dynamo latest defaults)"
	case "dynamo_tuned":
		return "DynamoTuned", "KV cache-aware (Dynamo latest, tuned)"
	case "sglang":
		return "SGLang", "Cache-aware (SGLang / vLLM router)"
	case "sglang_events":
		return "SGLangEvents", "Cache-aware with KV events (SGLang gateway)"
	case "llmd":
		return "llm-d", "Scorers (llm-d default profile)"
	}
	return mode, mode
}

// title is a mode's name in a report's title.
func title(mode string) string {
	switch mode {
	case "round_robin":
		return "Round-Robin"
	case "kv":
		return "KV Cache Routing"
	}
	_, long := Label(mode)
	return long
}

// Report is what the Markdown report of a sweep is made from.
type Report struct {
	// Set holds the measured levels.
	Set *Set
	// Config is how they were measured.
	Config SweepConfig
}

// WriteMarkdown writes the report laid out like the seeds' sweep reports:
// seed 000's when the set compares two or more modes (the first against the
// second), seed 001's when it has one.
func WriteMarkdown(w io.Writer, r Report) error {
	modes := r.Set.Modes()
	var b bytes.Buffer
	var err error
	switch len(modes) {
	case 0:
		return fmt.Errorf("report: the set has no levels")
	case 1:
		err = writeSingle(&b, r, modes[0])
	default:
		err = writeDual(&b, r, modes[0], modes[1])
		if err == nil && len(modes) > 2 {
			everyMode(&b, r.Set, modes)
		}
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}

// everyMode writes one table of every mode at every level, for sets that
// compare more than the two modes the rest of the report is about: TTFT and
// TPOT p95, hit rate and the oracle's best achievable hit rate beside it.
func everyMode(b *bytes.Buffer, s *Set, modes []string) {
	fmt.Fprintf(b, "## Every Mode\n\n")
	var rows [][]string
	for _, c := range s.Concurrencies() {
		for _, m := range modes {
			l, ok := s.Level(m, c)
			if !ok {
				continue
			}
			short, _ := Label(m)
			rows = append(rows, []string{strconv.Itoa(c), short, ms(l.TTFTP95), ms(l.TPOTP95), optPct(l.KVHitRate), optPct(l.OracleHitRate), optPct(l.ErrorPct)})
		}
	}
	mdTable(b, false, []string{"Concurrency", "Mode", "TTFT p95", "TPOT p95", "Hit Rate", "Oracle", "Error %"}, rows)
}

// mdTable writes a Markdown table: the first column is left-aligned when left
// is set, and every other column is centred, as in the seeds.
func mdTable(b *bytes.Buffer, left bool, header []string, rows [][]string) {
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for _, h := range header {
		dashes := strings.Repeat("-", len(h))
		if left {
			b.WriteString(":" + dashes + "-|")
		} else {
			b.WriteString(":" + dashes + ":|")
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			// A bar in a cell, such as a --mode-switch-cmd's pipe or a
			// deployment note's, would end the cell; GitHub's Markdown
			// reads \| as the bar itself, code spans included.
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
}

func ms(v float64) string  { return fmt.Sprintf("%.0fms", v) }
func pct(v float64) string { return fmt.Sprintf("%.1f%%", v) }

// hitRange says where a curve's hit rate ranges, over the levels whose
// workers reported it, with the average when avg is set.
func hitRange(curve []Level, avg bool) string {
	var minL, maxL Level
	sum, n := 0.0, 0
	for _, l := range curve {
		if l.KVHitRate == nil {
			continue
		}
		v := *l.KVHitRate
		if n == 0 || v < *minL.KVHitRate {
			minL = l
		}
		if n == 0 || v > *maxL.KVHitRate {
			maxL = l
		}
		sum += v
		n++
	}
	if n == 0 {
		return "not reported by the workers"
	}
	text := fmt.Sprintf("%s (at %d) to %s (at %d)", pct(*minL.KVHitRate), minL.Concurrency, pct(*maxL.KVHitRate), maxL.Concurrency)
	if avg {
		text += ", average " + pct(sum/float64(n))
	}
	if n < len(curve) {
		text += fmt.Sprintf(" (%d of %d levels reported it)", n, len(curve))
	}
	return text
}

// anyGoodput says whether any level of s measured goodput; a set imported
// from the seeds did not.
func anyGoodput(s *Set) bool {
	return slices.ContainsFunc(s.Levels, func(l Level) bool { return l.Goodput != nil })
}

// goodText says what makes one request good under o: every limit of the
// SLO holds for it (docs/metrics.md).
func goodText(o SLO) string { return thresholds(o, "", " and ") }

// optRate formats an optional rate per second, "n/a" when absent.
func optRate(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *p)
}

func optPct(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return pct(*p)
}

// improvement is how much lower b is than a, in percent of a.
func improvement(a, b float64) float64 {
	if a == 0 {
		return 0
	}
	return (a - b) / a * 100
}

func generated(c SweepConfig, s *Set) string {
	when := s.Generated
	if when == "" {
		when = c.Started
	}
	if t, err := time.Parse(time.RFC3339, when); err == nil {
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return when
}

func levelsList(cs []int) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, strconv.Itoa(c))
	}
	return strings.Join(parts, ", ")
}

func methodology(b *bytes.Buffer, r Report, modesLine string) {
	c := r.Config
	fmt.Fprintf(b, "## Test Methodology\n\n")
	b.WriteString(modesLine)
	fmt.Fprintf(b, "- **Concurrency levels:** %s\n", levelsList(r.Set.Concurrencies()))
	fmt.Fprintf(b, "- **Target RPS:** %.1f\n", c.TargetRPS)
	fmt.Fprintf(b, "- **Warmup:** %s per level (window reset at the start of the measurement)\n", shortDuration(c.Warmup))
	measure := fmt.Sprintf("%s per level (%d snapshots @ %s, averaged)", shortDuration(c.Measure), c.Snapshots, shortDuration(c.Measure/time.Duration(max(c.Snapshots, 1))))
	if c.Repeats > 1 {
		measure += fmt.Sprintf(", %d sweeps averaged", c.Repeats)
	}
	if c.Cooldown > 0 {
		measure += fmt.Sprintf(", %s cooldown between levels", shortDuration(c.Cooldown))
	}
	fmt.Fprintf(b, "- **Measurement:** %s\n", measure)
	fmt.Fprintf(b, "- **Workload:** %s\n", c.Workload)
	fmt.Fprintf(b, "- **Metric source:** kvlens rolling window (%s, client-side TTFT, AIPerf definitions)\n\n", shortDuration(c.Window))
	fmt.Fprintf(b, "## Deployment Details\n\n")
	var rows [][]string
	for _, p := range c.Deployment {
		rows = append(rows, []string{p.Name, p.Value})
	}
	mdTable(b, true, []string{"Parameter", "Value"}, rows)
}

func referenceJSON(b *bytes.Buffer, s *Set, f Format) error {
	data, err := Encode(s, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "## Reference Data (JSON)\n\n```json\n%s```\n\n", data)
	return nil
}

func writeDual(b *bytes.Buffer, r Report, base, cmp string) error {
	s := r.Set
	bs, bl := Label(base)
	cs, cl := Label(cmp)
	fmt.Fprintf(b, "# Benchmark Sweep: %s vs %s\n\n", title(cmp), title(base))
	fmt.Fprintf(b, "**Generated:** %s\n\n", generated(r.Config, s))
	methodology(b, r, fmt.Sprintf("- **Routing modes:** %s (baseline) vs %s\n", bl, cl))

	type pair struct {
		c    int
		a, b Level
	}
	var pairs []pair
	for _, c := range s.Concurrencies() {
		la, okA := s.Level(base, c)
		lb, okB := s.Level(cmp, c)
		if okA && okB {
			pairs = append(pairs, pair{c, la, lb})
		}
	}
	if len(pairs) == 0 {
		return fmt.Errorf("report: %s and %s share no concurrency level", base, cmp)
	}
	rows := func(f func(p pair) []string) [][]string {
		var out [][]string
		for _, p := range pairs {
			out = append(out, append([]string{strconv.Itoa(p.c)}, f(p)...))
		}
		return out
	}

	fmt.Fprintf(b, "## Results\n\n")
	header := []string{"Concurrency", bs + " TTFT p50", cs + " TTFT p50", "p50 Improvement", bs + " TTFT p95", cs + " TTFT p95", "p95 Improvement", bs + " Hit Rate", cs + " Hit Rate"}
	oracle := false
	for _, p := range pairs {
		oracle = oracle || p.a.OracleHitRate != nil || p.b.OracleHitRate != nil
	}
	if oracle {
		header = append(header, bs+" Oracle", cs+" Oracle")
	}
	mdTable(b, false, header,
		rows(func(p pair) []string {
			row := []string{ms(p.a.TTFTP50), ms(p.b.TTFTP50), pct(improvement(p.a.TTFTP50, p.b.TTFTP50)),
				ms(p.a.TTFTP95), ms(p.b.TTFTP95), pct(improvement(p.a.TTFTP95, p.b.TTFTP95)),
				optPct(p.a.KVHitRate), optPct(p.b.KVHitRate)}
			if oracle {
				row = append(row, optPct(p.a.OracleHitRate), optPct(p.b.OracleHitRate))
			}
			return row
		}))
	fmt.Fprintf(b, "### Error Rates\n\n")
	mdTable(b, false, []string{"Concurrency", bs + " Error %", cs + " Error %"},
		rows(func(p pair) []string { return []string{optPct(p.a.ErrorPct), optPct(p.b.ErrorPct)} }))
	fmt.Fprintf(b, "### Throughput (Output Tokens/s)\n\n")
	mdTable(b, false, []string{"Concurrency", bs + " TOPS", cs + " TOPS"},
		rows(func(p pair) []string { return []string{fmt.Sprintf("%.1f", p.a.TOPS), fmt.Sprintf("%.1f", p.b.TOPS)} }))
	if anyGoodput(s) {
		fmt.Fprintf(b, "### Goodput (Requests/s with %s)\n\n", goodText(r.Config.SLO))
		mdTable(b, false, []string{"Concurrency", bs + " Goodput", cs + " Goodput"},
			rows(func(p pair) []string { return []string{optRate(p.a.Goodput), optRate(p.b.Goodput)} }))
	}
	fmt.Fprintf(b, "### TPOT -- Time Per Output Token (ITL)\n\n")
	mdTable(b, false, []string{"Concurrency", bs + " TPOT p50", cs + " TPOT p50", bs + " TPOT p95", cs + " TPOT p95"},
		rows(func(p pair) []string {
			return []string{ms(p.a.TPOTP50), ms(p.b.TPOTP50), ms(p.a.TPOTP95), ms(p.b.TPOTP95)}
		}))
	fmt.Fprintf(b, "### End-to-End Latency\n\n")
	mdTable(b, false, []string{"Concurrency", bs + " Latency p50", cs + " Latency p50", bs + " Latency p95", cs + " Latency p95"},
		rows(func(p pair) []string {
			return []string{ms(p.a.LatencyP50), ms(p.b.LatencyP50), ms(p.a.LatencyP95), ms(p.b.LatencyP95)}
		}))
	if err := referenceJSON(b, s, FormatDual); err != nil {
		return err
	}

	fmt.Fprintf(b, "## Summary\n\n")
	first, last := pairs[0], pairs[len(pairs)-1]
	lo, hi := improvement(first.a.TTFTP50, first.b.TTFTP50), improvement(last.a.TTFTP50, last.b.TTFTP50)
	fmt.Fprintf(b, "- **TTFT p50 improvement at lowest concurrency (%d):** %s\n", first.c, pct(lo))
	fmt.Fprintf(b, "- **TTFT p50 improvement at highest concurrency (%d):** %s\n", last.c, pct(hi))
	trend := fmt.Sprintf("(%s at %d -> %s at %d)", pct(lo), first.c, pct(hi), last.c)
	switch {
	case hi < lo && first.b.KVHitRate != nil && last.b.KVHitRate != nil && *last.b.KVHitRate < *first.b.KVHitRate:
		// Only when the hit rate falls too does the data point at the cache.
		fmt.Fprintf(b, "- **Trend:** The TTFT improvement **decreases** at higher concurrency %s, and the %s hit rate falls (%s -> %s). This may indicate cache pressure at higher loads.\n",
			trend, cs, pct(*first.b.KVHitRate), pct(*last.b.KVHitRate))
	case hi < lo:
		fmt.Fprintf(b, "- **Trend:** The TTFT improvement **decreases** at higher concurrency %s.\n", trend)
	case hi > lo:
		fmt.Fprintf(b, "- **Trend:** The TTFT improvement **increases** at higher concurrency %s: cache-aware routing matters more as load grows.\n", trend)
	default:
		fmt.Fprintf(b, "- **Trend:** The TTFT improvement **holds steady** across concurrency %s.\n", trend)
	}
	peak := pairs[0]
	for _, p := range pairs {
		if improvement(p.a.TTFTP50, p.b.TTFTP50) > improvement(peak.a.TTFTP50, peak.b.TTFTP50) {
			peak = p
		}
	}
	fmt.Fprintf(b, "- **Peak benefit:** Concurrency %d shows the maximum p50 improvement at %s.\n", peak.c, pct(improvement(peak.a.TTFTP50, peak.b.TTFTP50)))
	fmt.Fprintf(b, "- **KV cache hit rate (%s mode):** %s.\n", cs, hitRange(s.Curve(cmp), true))
	fmt.Fprintf(b, "- **KV cache hit rate (%s mode):** %s.\n", bs, hitRange(s.Curve(base), true))
	fmt.Fprintf(b, "- **Within the SLO (%s):** %s %s, %s %s.\n", sloText(r.Config.SLO), bs, envelopeText(s, base, r.Config.SLO), cs, envelopeText(s, cmp, r.Config.SLO))
	return nil
}

// sloText says what a level must meet under o: the p95 of each figure.
func sloText(o SLO) string { return thresholds(o, " p95", ", ") }

// thresholds lists o's limits, each figure's name followed by q, joined
// by sep.
func thresholds(o SLO, q, sep string) string {
	var parts []string
	if o.TTFT > 0 {
		parts = append(parts, fmt.Sprintf("TTFT%s ≤ %d ms", q, o.TTFT.Milliseconds()))
	}
	if o.TPOT > 0 {
		parts = append(parts, fmt.Sprintf("TPOT%s ≤ %d ms", q, o.TPOT.Milliseconds()))
	}
	if len(parts) == 0 {
		return "none set"
	}
	return strings.Join(parts, sep)
}

func envelopeText(s *Set, mode string, o SLO) string {
	c, ok := s.Envelope(mode, o)
	if !ok {
		return "misses it from the lowest level"
	}
	curve := s.Curve(mode)
	if c == curve[len(curve)-1].Concurrency {
		return fmt.Sprintf("meets it at every level up to %d", c)
	}
	return fmt.Sprintf("meets it up to %d", c)
}

func writeSingle(b *bytes.Buffer, r Report, mode string) error {
	s := r.Set
	_, long := Label(mode)
	curve := s.Curve(mode)
	fmt.Fprintf(b, "# Benchmark Sweep: %s Concurrency Scaling (%d-%d)\n\n", long, curve[0].Concurrency, curve[len(curve)-1].Concurrency)
	fmt.Fprintf(b, "**Generated:** %s\n\n", generated(r.Config, s))
	methodology(b, r, fmt.Sprintf("- **Routing mode:** %s\n", long))
	rows := func(f func(l Level) []string) [][]string {
		var out [][]string
		for _, l := range curve {
			out = append(out, append([]string{strconv.Itoa(l.Concurrency)}, f(l)...))
		}
		return out
	}
	fmt.Fprintf(b, "## TPOT -- Time Per Output Token (ITL)\n\n")
	mdTable(b, false, []string{"Concurrency", "TPOT p50", "TPOT p95", "Error %"},
		rows(func(l Level) []string { return []string{ms(l.TPOTP50), ms(l.TPOTP95), optPct(l.ErrorPct)} }))
	fmt.Fprintf(b, "## TTFT -- Time to First Token\n\n")
	mdTable(b, false, []string{"Concurrency", "TTFT p50", "TTFT p95"},
		rows(func(l Level) []string { return []string{ms(l.TTFTP50), ms(l.TTFTP95)} }))
	fmt.Fprintf(b, "## End-to-End Latency\n\n")
	mdTable(b, false, []string{"Concurrency", "Latency p50", "Latency p95"},
		rows(func(l Level) []string {
			return []string{fmt.Sprintf("%.1fs", l.LatencyP50/1000), fmt.Sprintf("%.1fs", l.LatencyP95/1000)}
		}))
	fmt.Fprintf(b, "## Error Rates\n\n")
	mdTable(b, false, []string{"Concurrency", "Error %"},
		rows(func(l Level) []string { return []string{optPct(l.ErrorPct)} }))
	fmt.Fprintf(b, "## Actual RPS (Completed Requests/s)\n\n")
	mdTable(b, false, []string{"Concurrency", "Actual RPS"},
		rows(func(l Level) []string {
			if l.ActualRPS == nil {
				return []string{"n/a"}
			}
			return []string{fmt.Sprintf("%.2f", *l.ActualRPS)}
		}))
	fmt.Fprintf(b, "## Throughput (Output Tokens/s)\n\n")
	mdTable(b, false, []string{"Concurrency", "TOPS"},
		rows(func(l Level) []string { return []string{fmt.Sprintf("%.1f", l.TOPS)} }))
	if anyGoodput(s) {
		fmt.Fprintf(b, "## Goodput (Requests/s with %s)\n\n", goodText(r.Config.SLO))
		mdTable(b, false, []string{"Concurrency", "Goodput"},
			rows(func(l Level) []string { return []string{optRate(l.Goodput)} }))
	}
	if err := referenceJSON(b, s, FormatSingle); err != nil {
		return err
	}
	fmt.Fprintf(b, "## Summary\n\n")
	first, last := curve[0], curve[len(curve)-1]
	fmt.Fprintf(b, "- **TTFT p95:** %s at %d to %s at %d.\n", ms(first.TTFTP95), first.Concurrency, ms(last.TTFTP95), last.Concurrency)
	fmt.Fprintf(b, "- **Throughput:** %.1f to %.1f output tokens/s.\n", first.TOPS, last.TOPS)
	fmt.Fprintf(b, "- **KV cache hit rate:** %s.\n", hitRange(curve, false))
	fmt.Fprintf(b, "- **Within the SLO (%s):** %s.\n", sloText(r.Config.SLO), envelopeText(s, mode, r.Config.SLO))
	return nil
}
