package web

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
)

// Router is the routing side the dashboard shows and switches.
type Router interface {
	// PolicyName is the active policy's identifier, such as round_robin.
	PolicyName() string
	// SwitchPolicy makes name the active policy; requests in flight keep
	// their worker. An unknown name changes nothing.
	SwitchPolicy(name string) error
	// Reset drops every worker's prefix cache and clears the router's
	// indexes, returning each worker's answer ("ok" or why not).
	Reset(ctx context.Context) map[string]string
	// WorkerStates is the router's view of each worker.
	WorkerStates() []router.WorkerState
	// Counts are the router's totals, including requests shed.
	Counts() router.Counts
	// LastDecision is the latest routing decision, false before the first.
	LastDecision() (router.Decision, bool)
}

// ProxyRouter adapts a router.Proxy to Router.
type ProxyRouter struct{ *router.Proxy }

var _ Router = ProxyRouter{}

// SwitchPolicy implements Router, keeping the current knobs and admission.
func (p ProxyRouter) SwitchPolicy(name string) error {
	s := p.Router().Settings()
	s.Policy = name
	return p.Router().Apply(s)
}

// WorkerStates implements Router.
func (p ProxyRouter) WorkerStates() []router.WorkerState { return p.Router().Workers() }

// Counts implements Router.
func (p ProxyRouter) Counts() router.Counts { return p.Router().Counts() }

// LastDecision implements Router.
func (p ProxyRouter) LastDecision() (router.Decision, bool) { return p.Router().LastDecision() }

// Gauge is what a worker itself reports beyond the router's view.
type Gauge struct {
	// Queued is requests waiting for admission on the worker.
	Queued int
	// KVUsage is the fraction of its KV cache held by requests, 0 to 1.
	KVUsage float64
}

// mainModes get their own buttons: the comparison the demo is about.
var mainModes = []string{"round_robin", "kv"}

// BaselineMode is the stored curve a live policy is compared with: the kv
// curve for every KV-aware policy, round-robin for the rest.
func BaselineMode(policy string) string {
	switch policy {
	case "kv", "kv_approx", "dynamo":
		return "kv"
	}
	return "round_robin"
}

func (s *Server) modes(operator bool) components.ModeData {
	m := components.ModeData{Active: s.lanes[0].Router.PolicyName(), Operator: operator}
	for _, name := range router.Policies {
		if slices.Contains(mainModes, name) {
			m.Main = append(m.Main, components.ModeOption{Name: name, Text: s.laneName(name), Title: s.opts.Describe(name)})
		} else {
			m.More = append(m.More, s.selectOption(name))
		}
	}
	return m
}

// selectOption is a policy in a select: its short name, and on hover its
// lane's full name and its rule.
func (s *Server) selectOption(name string) components.ModeOption {
	return components.ModeOption{Name: name, Text: ShortName(name), Title: s.laneName(name) + ": " + s.opts.Describe(name)}
}

// pair is the A/B view's policy selects: one per lane, or per side of an
// alternation.
func (s *Server) pair(operator bool) components.PairData {
	d := components.PairData{Operator: operator}
	for i, p := range s.pairPolicies() {
		l := components.PairLane{ID: laneID(i), Active: p}
		for _, name := range router.Policies {
			l.Options = append(l.Options, s.selectOption(name))
		}
		d.Lanes = append(d.Lanes, l)
	}
	return d
}

// pairPolicies are the policies compared: each lane's, or the alternation's
// pair; one policy in the single view.
func (s *Server) pairPolicies() []string {
	if s.alt != nil {
		p := s.alt.Pair()
		return p[:]
	}
	out := make([]string, len(s.lanes))
	for i, l := range s.lanes {
		out[i] = l.Router.PolicyName()
	}
	return out
}

// side is one column of the comparison the tiles and the headline make: a
// lane's live window or, in the alternating view, a policy's last settled
// window.
type side struct {
	policy string
	window loadgen.Stats
	target int
	shed   int64
	// settling says why its TTFT cannot be compared yet, answering why
	// its figures read at an answer's end cannot, and rates why its rates
	// cannot; "" once they can.
	settling, answering, rates string
	// ago is a kept window's age, such as "2 min ago"; "" for a live one.
	ago string
	// none says there is no window at all yet.
	none bool
	// stopped says its load is stopped: no conversation runs.
	stopped bool
}

// sides are the columns at this tick: every lane's live window, or the
// alternation's live and kept ones.
func (s *Server) sides(now time.Time, snaps []loadgen.Snapshot) []side {
	if s.alt != nil {
		rt := s.lanes[0].Router
		return s.alt.sides(now, rt.PolicyName(), snaps[0], rt.Counts().Shed)
	}
	out := make([]side, len(s.lanes))
	for i, l := range s.lanes {
		w := snaps[i].Window
		out[i] = side{policy: l.Router.PolicyName(), window: w, target: snaps[i].Target,
			shed: l.Router.Counts().Shed, settling: settling(w), answering: answering(w), rates: flowing(w)}
		if !snaps[i].Running {
			// A stopped lane's window runs on with nothing sent: its rates
			// only fall. Its figures stay, compared with nothing.
			out[i].settling, out[i].answering, out[i].rates = "stopped", "stopped", "stopped"
			out[i].stopped = true
		}
		if s.warming() {
			// The warm-up's figures are the cold start: none is shown.
			out[i].settling, out[i].none = fmt.Sprintf("warm-up: %d s left", s.warmLeft()), true
			out[i].answering, out[i].rates = out[i].settling, out[i].settling
		}
	}
	return out
}

// sideName names a side on the page: its router and source, and a kept
// window's age.
func (s *Server) sideName(sd side) string {
	n := s.laneName(sd.policy)
	if sd.ago != "" {
		n += ", " + sd.ago
	}
	return n
}

// compareText says what the tiles compare: lane B with lane A, or the live
// policy with its stored curve.
func (s *Server) compareText(sides []side) string {
	if len(s.lanes) > 1 {
		// The lanes' names precede this, in their colours.
		return "tiles: B vs A, same conversations at the same time · charts: solid p95, dashed p50"
	}
	if len(sides) > 1 {
		a, b := sides[0], sides[len(sides)-1]
		return fmt.Sprintf("B %s vs A %s · one fleet, the two taking turns of %s", s.sideName(b), s.sideName(a), s.alt.every)
	}
	set := s.base()
	if set == nil {
		return "Live · no stored baseline"
	}
	mode := BaselineMode(sides[0].policy)
	return fmt.Sprintf("Live %s · baseline: %s curve at %d conversations (%s)", s.laneName(sides[0].policy), CurveName(set, mode), sides[0].target, set.Name)
}

// metric is one tile's figure: how to read it from a window, format it and
// judge a difference.
type metric struct {
	// id names the tile; its label and definition are components.Terms'.
	id string
	// key is the stored curves' field; "" when they have none.
	key    string
	get    func(w loadgen.Stats) (float64, bool)
	format func(v float64) string
	// higher says a higher figure is better.
	higher bool
	// slo, when positive, colours the tile: yellow from 90% of it, red at it.
	slo float64
	// points says the difference is in percentage points, as for a rate
	// that is itself a percentage.
	points bool
	// answers says the figure is read at an answer's end, and so settles
	// on the answers (answering), not on the window's age alone.
	answers bool
	// rate says the figure is a rate, and so settles once the window's
	// answers are its own (flowing).
	rate bool
	// noise is the figure's noise band, in percent (points when points):
	// two lanes running one policy on the same conversations differ by up
	// to this in 9 windows of 10 (docs/dashboard.md). A difference no
	// larger, as shown, is shown but not coloured (delta): one window
	// cannot tell it from chance.
	noise float64
	// missing, when set, says why a window with answers has no figure.
	missing func(w loadgen.Stats) string
}

func (s *Server) metrics() []metric {
	quantile := func(q func(loadgen.Stats) loadgen.Quantiles, p95 bool) func(loadgen.Stats) (float64, bool) {
		return func(w loadgen.Stats) (float64, bool) {
			x := q(w)
			if x.Count == 0 {
				return 0, false
			}
			if p95 {
				return x.P95, true
			}
			return x.P50, true
		}
	}
	// A window younger than rateSpan, or that saw no request end, has no
	// rate. Rates count requests sent before the window began too
	// (loadgen.Window.Begin).
	rate := func(f func(loadgen.Stats) float64) func(loadgen.Stats) (float64, bool) {
		return func(w loadgen.Stats) (float64, bool) {
			return f(w), w.Covered >= rateSpan && (w.RequestsPerSec > 0 || w.Completed+w.Errors > 0)
		}
	}
	ttft := func(w loadgen.Stats) loadgen.Quantiles { return w.TTFT }
	tpot := func(w loadgen.Stats) loadgen.Quantiles { return w.TPOT }
	e2e := func(w loadgen.Stats) loadgen.Quantiles { return w.E2E }
	gap := func(w loadgen.Stats) loadgen.Quantiles { return w.InterChunk }
	msf := func(v float64) string { return components.FormatMs(v, 1) }
	fixed := func(digits int) func(float64) string {
		return func(v float64) string { return strconv.FormatFloat(v, 'f', digits, 64) }
	}
	// Each noise band is the largest, over five runs at 60 and 120
	// conversations (three with the H200 profile before 2026-11-27, two
	// with today's), of the 90th percentile of how far two lanes running
	// one policy (dynamo and dynamo_latest, which decide alike) differed,
	// read every 10 s over 10 minutes, rounded up (docs/dashboard.md,
	// scripts/noiseprobe).
	return []metric{
		{id: "ttft-p50", key: "ttft_p50_ms", get: quantile(ttft, false), format: msf, noise: 10},
		{id: "ttft-p95", key: "ttft_p95_ms", get: quantile(ttft, true), format: msf, slo: ms(s.opts.SLOTTFT), noise: 22},
		{id: "tpot-p50", key: "tpot_p50_ms", get: quantile(tpot, false), format: msf, answers: true, noise: 3},
		{id: "tpot-p95", key: "tpot_p95_ms", get: quantile(tpot, true), format: msf, slo: ms(s.opts.SLOTPOT), answers: true, noise: 6},
		{id: "chunk-gap-p50", get: quantile(gap, false), format: msf, answers: true, noise: 1},
		{id: "e2e-p50", key: "latency_p50_ms", get: quantile(e2e, false), format: msf, answers: true, noise: 4},
		{id: "e2e-p95", key: "latency_p95_ms", get: quantile(e2e, true), format: msf, answers: true, noise: 3},
		{id: "tops", rate: true, key: "tops", get: rate(func(w loadgen.Stats) float64 { return w.OutputTokensPerSec }), format: fixed(0), higher: true, noise: 6},
		{id: "rps", rate: true, key: "actual_rps", get: rate(func(w loadgen.Stats) float64 { return w.RequestsPerSec }), format: fixed(2), higher: true, noise: 6},
		{id: "goodput", rate: true, key: "goodput", get: rate(func(w loadgen.Stats) float64 { return w.GoodputPerSec }), format: fixed(2), higher: true, noise: 8},
		{id: "kv-hit", key: "kv_hit_rate_pct", get: func(w loadgen.Stats) (float64, bool) { return 100 * w.KVHitRate, w.KVHitRequests > 0 },
			format: func(v float64) string { return fmt.Sprintf("%.0f%%", v) }, higher: true, points: true, answers: true, noise: 3,
			missing: func(w loadgen.Stats) string {
				if w.ISL.Count > 0 && w.KVHitRequests == 0 {
					// A miss would read 0%; no report is not a miss.
					return "the workers report no cached tokens"
				}
				return ""
			}},
	}
}

// label is a tile's heading in plain words (components.Terms).
func label(id string) string {
	t, ok := components.TermByID(id)
	if !ok {
		panic("web: no term for tile " + id)
	}
	return t.Label
}

// tiles are the headline figures of the last side (lane B in the A/B view),
// each with what it is compared with: the first side (lane A) or, in the
// single view, the stored curve of the live policy at the same concurrency.
// No difference is shown, and no colour, until both windows are settled.
func (s *Server) tiles(sides []side) components.TilesData {
	main := sides[len(sides)-1]
	var other *side
	if len(sides) > 1 {
		other = &sides[0]
	}
	set := s.base()
	stored := func(key string) (float64, bool) {
		if set == nil || key == "" {
			return 0, false
		}
		f, ok := baselines.FieldByKey(key)
		if !ok {
			return 0, false
		}
		return set.At(BaselineMode(main.policy), float64(main.target), f)
	}
	value := func(sd *side, m metric) (float64, bool) {
		if sd == nil || sd.none {
			return 0, false
		}
		return m.get(sd.window)
	}
	// waitFor says why a tile cannot be compared yet, from either side.
	waitFor := func(m metric) string {
		for _, sd := range []*side{&main, other} {
			if sd == nil {
				continue
			}
			w := sd.settling
			switch {
			case m.rate:
				w = sd.rates
			case m.answers:
				w = sd.answering
			}
			if w != "" {
				return w
			}
		}
		return ""
	}
	prefix := "base "
	if other != nil {
		prefix = "vs "
	}
	// The tiles as a whole settle with the last of them. While warming, the
	// line still says what the tiles will compare: the headline above them
	// and every tile already say how long the warm-up has left.
	d := components.TilesData{Lanes: s.laneNames(), Compare: s.compareText(sides), Settling: waitFor(metric{rate: true})}
	for _, m := range s.metrics() {
		wait := waitFor(m)
		t := components.Tile{ID: m.id, Label: label(m.id), Value: "—", Baseline: "—", Level: "none", Settling: wait}
		v, has := value(&main, m)
		if has {
			t.Value = m.format(v)
			if m.slo > 0 && wait == "" {
				t.Level = components.SLOLevel(v, m.slo, 1)
			}
		} else if m.missing != nil && !main.none {
			t.Note = m.missing(main.window)
		}
		ref, refOK := stored(m.key)
		if other != nil {
			ref, refOK = value(other, m)
		}
		if refOK {
			t.Baseline = prefix + m.format(ref)
		}
		if has && refOK && wait == "" {
			if m.format(v) == m.format(ref) {
				// Figures that read the same are compared as equal: "0 ms
				// vs 0 ms" is never "−2%" (chunk gaps under a millisecond,
				// when a loaded client reads chunks in bursts).
				v = ref
			}
			t.Delta, t.Better, t.Even = delta(v, ref, m.higher, m.points, m.noise)
			if t.Even {
				t.Noise = noiseText(m)
			}
		}
		d.Tiles = append(d.Tiles, t)
	}
	// The error rate is read at an answer's end; the count of failures
	// beside it reports each at once. The colour follows the figure
	// shown: "0.0%" is never red.
	wait := waitFor(metric{answers: true})
	errs := components.Tile{ID: "errors", Label: label("errors"), Value: "—", Baseline: "—", Level: "none", Settling: wait,
		Note: fmt.Sprintf("%d failed · %d shed", main.window.Errors, main.shed)}
	if main.window.Answers > 0 && !main.none {
		errs.Value = fmt.Sprintf("%.1f%%", 100*main.window.ErrorRate)
		if wait == "" {
			errs.Level = "ok"
			if errs.Value != "0.0%" {
				errs.Level = "bad"
			}
		}
	}
	if other != nil {
		if other.window.Answers > 0 && !other.none {
			errs.Baseline = fmt.Sprintf("vs %.1f%%", 100*other.window.ErrorRate)
		}
	} else if b, ok := stored("error_pct"); ok {
		errs.Baseline = fmt.Sprintf("base %.1f%%", b)
	}
	// Errors sit before the KV hit rate, the last tile.
	last := len(d.Tiles) - 1
	d.Tiles = append(d.Tiles[:last], errs, d.Tiles[last])
	return d
}

// delta is live's difference from ref, in percent (in percentage points
// when points), and whether it is an improvement given which direction is
// better, or even: less than half a unit either way, shown as ±0, or, as
// shown (in whole units), no more than noise, the figure's own noise band
// (metric.noise): shown but neither green nor red. Judging the shown
// figure keeps a "−10%" against a band of 10% from being coloured one
// second and not the next.
func delta(live, ref float64, higherBetter, points bool, noise float64) (text string, better, even bool) {
	if math.IsNaN(live) || math.IsInf(live, 0) || math.IsNaN(ref) || math.IsInf(ref, 0) || (!points && ref == 0) {
		return "", false, false
	}
	d, unit := live-ref, " pt"
	if !points {
		d, unit = 100*(live-ref)/ref, "%"
	}
	if math.Abs(d) < 0.5 {
		return "±0" + unit, false, true
	}
	text = minus(fmt.Sprintf("%+.0f", d)) + unit
	if math.Round(math.Abs(d)) <= noise {
		return text, false, true
	}
	return text, (d > 0) == higherBetter, false
}

// noiseText says why a difference within m's noise band is not coloured.
func noiseText(m metric) string {
	unit := "%"
	if m.points {
		unit = " points"
	}
	return fmt.Sprintf("not coloured: two lanes running one policy differ by up to %g%s in 9 windows of 10", m.noise, unit)
}

// minus writes a negative number with a minus sign rather than a hyphen.
func minus(s string) string { return strings.Replace(s, "-", "−", 1) }

// headline states the live difference between the lanes in words and
// numbers: "KV-aware vs round-robin: TTFT p95 372 ms vs 561 ms, −34%; cache
// hit 98% vs 86% · 120 conversations each". It is empty in the single view.
func (s *Server) headline(sides []side) components.HeadlineData {
	if len(sides) < 2 {
		return components.HeadlineData{}
	}
	a, b := sides[0], sides[len(sides)-1]
	h := components.HeadlineData{Show: true, A: s.opts.Describe(a.policy), B: s.opts.Describe(b.policy),
		AgoA: a.ago, AgoB: b.ago, Conversations: b.target, TTFTA: "—", TTFTB: "—",
		// The target stands while the load is stopped; "180
		// conversations each" would then say what is not running.
		Stopped: a.stopped || b.stopped}
	h.Settling = b.settling
	if h.Settling == "" {
		h.Settling = a.settling
	}
	if s.warming() {
		h.Warming = s.warmSentence()
	}
	if h.A == h.B {
		h.A, h.B = "A "+h.A, "B "+h.B
	}
	get := func(sd side, m metric) (float64, bool) {
		if sd.none {
			return 0, false
		}
		return m.get(sd.window)
	}
	ms := s.metrics()
	p95, hit := ms[1], ms[len(ms)-1]
	va, okA := get(a, p95)
	vb, okB := get(b, p95)
	if okA {
		h.TTFTA, h.TTFTAms = p95.format(va), va
	}
	if okB {
		h.TTFTB, h.TTFTBms = p95.format(vb), vb
	}
	if okA && okB && h.Settling == "" {
		h.Delta, h.Better, h.Even = delta(vb, va, false, false, p95.noise)
		if h.Even {
			h.Noise = noiseText(p95)
		}
	}
	if v, ok := get(a, hit); ok {
		h.HitA = hit.format(v)
	}
	if v, ok := get(b, hit); ok {
		h.HitB = hit.format(v)
	}
	return h
}

// workers is the workers panel: for each lane, the router's view of each
// worker, the worker's own queue and KV figures when it reports them, and
// the load generator's per-worker window.
func (s *Server) workers(snaps []loadgen.Snapshot) components.WorkersData {
	d := components.WorkersData{Source: "in flight: router · queued, KV cache: " + s.opts.GaugeSource + " · hit rate, share: load generator, last 60 s"}
	if f := s.currentFault(); f != "none" {
		if kind, amount, err := ParseFault(f); err == nil {
			d.Fault = faultLabel(kind, amount)
		}
	}
	if s.opts.GaugeSource == "" {
		d.Source = "in flight: router · queued, KV cache: not reported by these workers · hit rate, share: load generator, last 60 s"
	}
	warming := s.warming()
	for i, l := range s.lanes {
		wl := components.WorkerLane{ID: laneID(i)}
		if len(s.lanes) > 1 {
			wl.Name = upper(laneID(i)) + " · " + s.laneName(l.Router.PolicyName())
		}
		snap := snaps[i]
		if warming {
			// The warm-up's window holds the cold start the tiles hide
			// until it ends; the workers' hit rates and shares are read
			// from it, and showed it (71-75% against 90% a few seconds in)
			// beside tiles of dashes. In flight, queued and the KV cache
			// are the fleet as it is, and stay.
			snap.Workers = nil
		}
		wl.Rows = workerRows(l, snap)
		d.Lanes = append(d.Lanes, wl)
	}
	if s.opts.Frontend != nil {
		f := s.opts.Frontend.Stats()
		d.Frontend = &components.FrontendRow{OK: f.OK, Error: f.LastError, KVHitRate: f.KVHitRate, InFlight: f.InFlight, Queued: f.Queued}
	}
	return d
}

// workerRows are one lane's workers, in its router's order.
func workerRows(l Lane, snap loadgen.Snapshot) []components.WorkerRow {
	var gauges map[string]Gauge
	if l.Gauges != nil {
		gauges = l.Gauges()
	}
	// A worker's share of the requests, like its hit rate, counts the
	// requests in the answered span (loadgen.Stats.Answers): a young
	// window's ended requests are the short ones, and after a rise a
	// worker holding only long ones would read 0%.
	total := 0
	for _, st := range snap.Workers {
		total += st.Answers
	}
	var rows []components.WorkerRow
	for _, ws := range l.Router.WorkerStates() {
		r := components.WorkerRow{Name: ws.Name, Healthy: ws.Healthy, InFlight: ws.InFlight, Capacity: ws.Capacity,
			Queued: -1, KVUsage: -1, HitRate: -1, Share: -1}
		if g, ok := gauges[ws.Name]; ok {
			r.Queued, r.KVUsage = g.Queued, g.KVUsage
		}
		if es := ws.EventStream; es != nil {
			r.Events = &components.EventsData{State: es.State, Warming: es.Warming,
				LastEventAge: es.LastEventAgeSeconds, Dropped: es.DroppedBlocks, Endpoint: es.Endpoint}
		}
		if st, ok := snap.Workers[ws.Name]; ok {
			if st.KVHitRequests > 0 { // completed requests that reported cached tokens
				r.HitRate = st.KVHitRate
			}
			if total > 0 {
				r.Share = float64(st.Answers) / float64(total)
			}
		} else if total > 0 {
			r.Share = 0
		}
		rows = append(rows, r)
	}
	return rows
}

// costExample is the worked example of "How it works": the router's last
// decision, scored with the cost of the live policy (kvlens's KV cost for
// the policies that do not score, which says what KV-aware would weigh).
//
// In the A/B view it is lane B's, the lane the comparison is about.
func (s *Server) costExample() *components.CostExample {
	d, ok := s.lanes[len(s.lanes)-1].Router.LastDecision()
	if !ok {
		return nil
	}
	ex := &components.CostExample{Policy: s.opts.Describe(d.Policy), PromptTokens: d.Request.Tokens,
		Chosen: d.Candidates[d.Chosen].Worker.Name, CostName: "kvlens KV cost"}
	cost := router.KVCost
	if d.Policy == "dynamo" {
		cost, ex.CostName = router.DynamoCost, "Dynamo cost"
	}
	b := max(1, d.Request.BlockSize)
	for i := range d.Candidates {
		c := &d.Candidates[i]
		ex.Rows = append(ex.Rows, components.CostRow{
			Worker: c.Worker.Name, OverlapBlocks: c.Overlap,
			PrefillTokens: c.PrefillTokens + max(0, d.Request.Tokens-c.Overlap*b),
			DecodeBlocks:  c.ActiveBlocks + len(d.Request.Chain) - c.ActiveDepth,
			ContextTokens: c.ContextTokens, InFlight: c.InFlight, Capacity: c.Capacity,
			Cost: cost(&d.Request, c, 1),
		})
	}
	lowest := 0
	for i, r := range ex.Rows {
		if r.Cost < ex.Rows[lowest].Cost {
			lowest = i
		}
	}
	ex.Lowest = ex.Rows[lowest].Worker
	return ex
}

// policyRules lists every routing policy with its rule, for How it works.
func (s *Server) policyRules() []components.PolicyRule {
	var out []components.PolicyRule
	for _, name := range router.Policies {
		out = append(out, components.PolicyRule{Text: s.opts.Describe(name), Rule: router.Rule(name)})
	}
	return out
}

// baselineJSON is the overlay chart's data, embedded in the page.
type baselineJSON struct {
	// Name is the stored set's name.
	Name string `json:"name"`
	// Curves maps a mode to its levels: concurrency and the chartable
	// fields. A mode of the stored simulated policy curves is keyed
	// "sim:" and its name, such as "sim:kv".
	Curves map[string][]map[string]float64 `json:"curves"`
	// Names maps a mode (or "sim:" mode) to its curve's name: router, fleet
	// and source.
	Names map[string]string `json:"names"`
	// SLOTTFT and SLOTPOT are in ms.
	SLOTTFT float64 `json:"slo_ttft_ms"`
	SLOTPOT float64 `json:"slo_tpot_ms"`
}

// chartFields are the figures the overlay chart can plot.
var chartFields = []string{"ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "tops"}

func (s *Server) baselineData() baselineJSON {
	d := baselineJSON{Curves: map[string][]map[string]float64{}, Names: map[string]string{}, SLOTTFT: ms(s.opts.SLOTTFT), SLOTPOT: ms(s.opts.SLOTPOT)}
	if pc := s.opts.PolicyCurves; pc != nil {
		// Every policy's, not only the lanes' own: a lane's policy can
		// change without the page reloading.
		for _, mode := range pc.Modes() {
			d.Names["sim:"+mode] = CurveName(pc, mode)
			d.Curves["sim:"+mode] = chartCurve(pc, mode)
		}
	}
	set := s.base()
	if set == nil {
		return d
	}
	d.Name = set.Name
	for _, mode := range []string{"round_robin", "kv"} {
		d.Names[mode] = CurveName(set, mode)
		d.Curves[mode] = chartCurve(set, mode)
	}
	return d
}

// chartCurve is one mode's curve of set as the overlay chart reads it: per
// level, the concurrency "c" and each chartable figure.
func chartCurve(set *baselines.Set, mode string) []map[string]float64 {
	var out []map[string]float64
	for _, l := range set.Curve(mode) {
		p := map[string]float64{"c": float64(l.Concurrency)}
		for _, k := range chartFields {
			f, _ := baselines.FieldByKey(k)
			if v, ok := f.Value(&l.Metrics); ok {
				p[k] = v
			}
		}
		out = append(out, p)
	}
	return out
}

// HardwareCaveat warns, when simulated workers are compared with curves
// measured on real hardware, which figures compare directly and which do
// not; it is empty otherwise. A set is simulated when its deployment says
// so, as every set kvlens sweeps against its simulated fleet does.
func HardwareCaveat(set *baselines.Set, simulatedFleet bool) string {
	if set == nil || !simulatedFleet || simulatedSet(set) {
		return ""
	}
	return "Live figures come from simulated workers, these curves from real hardware. " +
		"TPOT and throughput are the engine model's own; the default profile's TTFT adds a " +
		"serving-path delay fitted to these curves (about six engine steps), so TTFT agrees " +
		"with them partly by construction."
}

// EnvelopeSentence says, from the stored curves, up to which concurrency
// each mode holds the SLO on p95 TTFT and TPOT, naming the router that made
// each curve and where the figures come from.
func EnvelopeSentence(set *baselines.Set, slo baselines.SLO) string {
	if set == nil {
		return "No stored baseline: the SLO envelope is unknown."
	}
	var parts []string
	for _, mode := range []string{"kv", "round_robin"} {
		curve := set.Curve(mode)
		name := CurveRouter(set, mode)
		if len(curve) == 0 {
			parts = append(parts, name+" was not measured")
			continue
		}
		lo, hi := curve[0].Concurrency, curve[len(curve)-1].Concurrency
		n, ok := set.Envelope(mode, slo)
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("%s misses it even at %d, the lowest level measured", name, lo))
		case n == hi:
			parts = append(parts, fmt.Sprintf("%s holds it at every level measured, up to %d and perhaps beyond", name, hi))
		default:
			parts = append(parts, fmt.Sprintf("%s holds it up to %d conversations", name, n))
		}
	}
	return fmt.Sprintf("SLO (p95 TTFT ≤ %s, TPOT ≤ %s), %s: %s.", slo.TTFT, slo.TPOT, CurveSource(set), strings.Join(parts, "; "))
}

// conversations lists the first lane's conversations; in the A/B view each
// links to its namesake in lane B too, which plays the same script.
func (s *Server) conversations() components.ConversationsData {
	d := components.ConversationsData{Lanes: len(s.lanes)}
	list := s.lanes[0].Gen.Conversations()
	// The log lists newest first. Those with an answered turn lead, so that
	// a visitor who opens one reads a question and its answer, not a pane
	// waiting for the first; 50 are plenty to pick one to read.
	slices.SortStableFunc(list, func(a, b loadgen.ConversationSummary) int {
		return cmp.Compare(min(b.Turns, 1), min(a.Turns, 1))
	})
	for _, c := range list[:min(len(list), 50)] {
		d.Items = append(d.Items, components.ConversationItem{ID: c.ID, Title: c.Title, Turns: c.Turns, Planned: c.Planned,
			Errs: c.Errors, Done: c.Done, Worker: c.LastWorker, Asking: c.Asking})
	}
	return d
}

// conversation is a conversation's log as the viewer shows it; now is the
// lanes' clock's time, which the log's times are on.
// questionSource says in words who wrote a turn's question
// (loadgen.TurnLog's QuestionSource).
func questionSource(code string) string {
	switch code {
	case "opening":
		return "opening"
	case "builtin":
		return "built-in question"
	case "user_model":
		return "user model"
	case "fallback":
		return "built-in question: the user model failed"
	case "tool":
		return "tool result"
	}
	return code
}

func conversation(c loadgen.ConversationLog, starter string, now time.Time) components.ConversationData {
	d := components.ConversationData{ID: c.ID, Title: c.Title, Starter: starter}
	for _, t := range c.Turns {
		tpot := "—"
		if t.TPOT > 0 {
			tpot = fmt.Sprintf("%.1f ms", t.TPOT)
		}
		ttft := "—"
		if t.Error == "" || t.TTFT > 0 {
			ttft = components.FormatMs(t.TTFT, 1)
		}
		d.Turns = append(d.Turns, components.TurnData{Index: t.Index, Question: t.Question, Answer: t.Answer,
			Source: questionSource(t.QuestionSource), Worker: t.Worker, TTFT: ttft, TPOT: tpot, ISL: t.ISL, OSL: t.OSL,
			Cached: t.CachedTokens, Error: t.Error})
	}
	if a := c.Asking; a != nil {
		d.Asking = &components.AskingData{Index: a.Index, Question: a.Question, Source: questionSource(a.QuestionSource),
			Waiting: fmt.Sprintf("%.0f s", now.Sub(a.Sent).Seconds())}
	}
	return d
}
