package web

import (
	"context"
	"fmt"
	"math"
	"slices"
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
	m := components.ModeData{Active: s.rt.PolicyName(), Operator: operator}
	for _, name := range router.Policies {
		o := components.ModeOption{Name: name, Text: s.opts.Describe(name)}
		if slices.Contains(mainModes, name) {
			m.Main = append(m.Main, o)
		} else {
			m.More = append(m.More, o)
		}
	}
	return m
}

// compareText says which baseline the tiles compare with.
func (s *Server) compareText(policy string, target int) string {
	set := s.base()
	if set == nil {
		return "no stored baseline"
	}
	mode := BaselineMode(policy)
	return fmt.Sprintf("baseline: %s curve at %d conversations (%s)", s.opts.Describe(mode), target, set.Name)
}

func (s *Server) tiles(snap loadgen.Snapshot) components.TilesData {
	w := snap.Window
	policy := s.rt.PolicyName()
	mode := BaselineMode(policy)
	shed := s.rt.Counts().Shed
	sloTTFT, sloTPOT := ms(s.opts.SLOTTFT), ms(s.opts.SLOTPOT)
	set := s.base()
	base := func(key string) (float64, bool) {
		if set == nil {
			return 0, false
		}
		f, ok := baselines.FieldByKey(key)
		if !ok {
			return 0, false
		}
		return set.At(mode, float64(snap.Target), f)
	}
	// latency builds a tile for a latency quantile; lower is better.
	latency := func(id, label string, q loadgen.Quantiles, p95 bool, key string, slo float64) components.Tile {
		v := q.P50
		if p95 {
			v = q.P95
		}
		t := components.Tile{ID: id, Label: label, Value: components.FormatMs(v, q.Count), Baseline: "—", Level: "none"}
		if slo > 0 {
			t.Level = components.SLOLevel(v, slo, q.Count)
		}
		if b, ok := base(key); ok {
			t.Baseline = "base " + components.FormatMs(b, 1)
			if q.Count > 0 {
				t.Delta, t.Better = delta(v, b, false)
			}
		}
		return t
	}
	// rate builds a tile for a per-second figure; higher is better. A
	// window that has covered no time yet has no rate.
	rate := func(id, label string, v float64, key, unit string, digits int) components.Tile {
		t := components.Tile{ID: id, Label: label, Value: "—", Baseline: "—", Level: "none"}
		has := w.Covered > 0 && w.Completed+w.Errors > 0
		if has {
			t.Value = fmt.Sprintf("%.*f%s", digits, v, unit)
		}
		if b, ok := base(key); ok {
			t.Baseline = fmt.Sprintf("base %.*f%s", digits, b, unit)
			if has {
				t.Delta, t.Better = delta(v, b, true)
			}
		}
		return t
	}
	tiles := []components.Tile{
		latency("ttft-p50", "TTFT p50", w.TTFT, false, "ttft_p50_ms", 0),
		latency("ttft-p95", "TTFT p95", w.TTFT, true, "ttft_p95_ms", sloTTFT),
		latency("tpot-p50", "TPOT (ITL) p50", w.TPOT, false, "tpot_p50_ms", 0),
		latency("tpot-p95", "TPOT (ITL) p95", w.TPOT, true, "tpot_p95_ms", sloTPOT),
		latency("chunk-gap-p50", "Chunk gap p50", w.InterChunk, false, "", 0),
		latency("e2e-p50", "E2E p50", w.E2E, false, "latency_p50_ms", 0),
		latency("e2e-p95", "E2E p95", w.E2E, true, "latency_p95_ms", 0),
		rate("tops", "Output tok/s", w.OutputTokensPerSec, "tops", "", 0),
		rate("rps", "Requests/s", w.RequestsPerSec, "actual_rps", "", 2),
		rate("goodput", "Goodput req/s", w.GoodputPerSec, "goodput", "", 2),
	}
	// The chunk gap is the raw SSE gap; the seeds measured no such figure.
	tiles[4].Note = "raw SSE gap, not ITL"

	errs := components.Tile{ID: "errors", Label: "Errors", Value: "—", Baseline: "—", Level: "none",
		Note: fmt.Sprintf("%d failed in window · %d shed since start", w.Errors, shed)}
	if n := w.Completed + w.Errors; n > 0 {
		errs.Value = fmt.Sprintf("%.1f%%", 100*w.ErrorRate)
		errs.Level = "ok"
		if w.Errors > 0 {
			errs.Level = "bad"
		}
	}
	if b, ok := base("error_pct"); ok {
		errs.Baseline = fmt.Sprintf("base %.1f%%", b)
	}
	hit := components.Tile{ID: "kv-hit", Label: "KV hit", Value: "—", Baseline: "—", Level: "none"}
	if w.Completed > 0 {
		hit.Value = fmt.Sprintf("%.0f%%", 100*w.KVHitRate)
	}
	if b, ok := base("kv_hit_rate_pct"); ok {
		hit.Baseline = fmt.Sprintf("base %.0f%%", b)
		if w.Completed > 0 {
			hit.Delta, hit.Better = delta(100*w.KVHitRate, b, true)
		}
	}
	tiles = append(tiles, errs, hit)
	return components.TilesData{Tiles: tiles, Compare: s.compareText(policy, snap.Target)}
}

// delta is live's difference from base in percent, and whether it is an
// improvement given which direction is better.
func delta(live, base float64, higherBetter bool) (string, bool) {
	if base == 0 || math.IsNaN(live) || math.IsInf(live, 0) {
		return "", false
	}
	d := 100 * (live - base) / base
	return fmt.Sprintf("%+.0f%%", d), (d > 0) == higherBetter && math.Abs(d) >= 0.5
}

// workers is the workers panel: the router's view of each worker, the
// worker's own queue and KV figures when it reports them, and the load
// generator's per-worker window.
func (s *Server) workers(snap loadgen.Snapshot) components.WorkersData {
	var gauges map[string]Gauge
	if s.opts.Gauges != nil {
		gauges = s.opts.Gauges()
	}
	total := 0
	for _, st := range snap.Workers {
		total += st.Completed + st.Errors
	}
	d := components.WorkersData{Source: "in flight: router · queued, KV cache: " + s.opts.GaugeSource + " · hit rate, share: load generator, last 60 s"}
	if s.opts.GaugeSource == "" {
		d.Source = "in flight: router · queued, KV cache: not reported by these workers · hit rate, share: load generator, last 60 s"
	}
	for _, ws := range s.rt.WorkerStates() {
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
			if st.Completed > 0 {
				r.HitRate = st.KVHitRate
			}
			if total > 0 {
				r.Share = float64(st.Completed+st.Errors) / float64(total)
			}
		} else if total > 0 {
			r.Share = 0
		}
		d.Rows = append(d.Rows, r)
	}
	if s.opts.Frontend != nil {
		f := s.opts.Frontend.Stats()
		d.Frontend = &components.FrontendRow{OK: f.OK, Error: f.LastError, KVHitRate: f.KVHitRate, InFlight: f.InFlight, Queued: f.Queued}
	}
	return d
}

// costExample is the worked example of "How it works": the router's last
// decision, scored with the cost of the live policy (kvlens's KV cost for
// the policies that do not score, which says what KV-aware would weigh).
func (s *Server) costExample() *components.CostExample {
	d, ok := s.rt.LastDecision()
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
	// Curves maps a mode to its levels: concurrency and the chartable fields.
	Curves map[string][]map[string]float64 `json:"curves"`
	// SLOTTFT and SLOTPOT are in ms.
	SLOTTFT float64 `json:"slo_ttft_ms"`
	SLOTPOT float64 `json:"slo_tpot_ms"`
}

// chartFields are the figures the overlay chart can plot.
var chartFields = []string{"ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "tops"}

func (s *Server) baselineData() baselineJSON {
	d := baselineJSON{Curves: map[string][]map[string]float64{}, SLOTTFT: ms(s.opts.SLOTTFT), SLOTPOT: ms(s.opts.SLOTPOT)}
	set := s.base()
	if set == nil {
		return d
	}
	d.Name = set.Name
	for _, mode := range []string{"round_robin", "kv"} {
		for _, l := range set.Curve(mode) {
			p := map[string]float64{"c": float64(l.Concurrency)}
			for _, k := range chartFields {
				f, _ := baselines.FieldByKey(k)
				if v, ok := f.Value(&l.Metrics); ok {
					p[k] = v
				}
			}
			d.Curves[mode] = append(d.Curves[mode], p)
		}
	}
	return d
}

// HardwareCaveat warns, when simulated workers are compared with curves
// measured on real hardware, which figures compare directly and which do
// not; it is empty otherwise. A set is simulated when its deployment says
// so, as every set kvlens sweeps against its simulated fleet does.
func HardwareCaveat(set *baselines.Set, simulatedFleet bool) string {
	if set == nil || !simulatedFleet || strings.Contains(strings.ToLower(set.Deployment), "simulated") {
		return ""
	}
	return "Live figures come from simulated workers, these curves from real hardware. " +
		"TPOT and throughput are the engine model's own; the default profile's TTFT adds a " +
		"serving-path delay fitted to these curves (about six engine steps), so TTFT agrees " +
		"with them partly by construction."
}

// EnvelopeSentence says, from the stored curves, up to which concurrency
// each mode holds the SLO on p95 TTFT and TPOT.
func EnvelopeSentence(set *baselines.Set, slo baselines.SLO, describe func(string) string) string {
	if set == nil {
		return "No stored baseline: the SLO envelope is unknown."
	}
	var parts []string
	for _, mode := range []string{"kv", "round_robin"} {
		curve := set.Curve(mode)
		if len(curve) == 0 {
			parts = append(parts, describe(mode)+" was not measured")
			continue
		}
		lo, hi := curve[0].Concurrency, curve[len(curve)-1].Concurrency
		n, ok := set.Envelope(mode, slo)
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("%s misses it even at %d, the lowest level measured", describe(mode), lo))
		case n == hi:
			parts = append(parts, fmt.Sprintf("%s holds it at every level measured, up to %d and perhaps beyond", describe(mode), hi))
		default:
			parts = append(parts, fmt.Sprintf("%s holds it up to %d conversations", describe(mode), n))
		}
	}
	return fmt.Sprintf("SLO (p95 TTFT ≤ %s, TPOT ≤ %s): %s.", slo.TTFT, slo.TPOT, strings.Join(parts, "; "))
}

func (s *Server) conversations() components.ConversationsData {
	var d components.ConversationsData
	list := s.gen.Conversations()
	// The log lists newest first; 50 are plenty to pick one to read.
	for _, c := range list[:min(len(list), 50)] {
		d.Items = append(d.Items, components.ConversationItem{ID: c.ID, Title: c.Title, Turns: c.Turns, Planned: c.Planned,
			Errs: c.Errors, Done: c.Done, Worker: c.LastWorker, Asking: c.Asking})
	}
	return d
}

func conversation(c loadgen.ConversationLog, starter string) components.ConversationData {
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
			Source: t.QuestionSource, Worker: t.Worker, TTFT: ttft, TPOT: tpot, ISL: t.ISL, OSL: t.OSL,
			Cached: t.CachedTokens, Error: t.Error})
	}
	if a := c.Asking; a != nil {
		d.Asking = &components.AskingData{Index: a.Index, Question: a.Question, Source: a.QuestionSource,
			Waiting: fmt.Sprintf("%.0f s", time.Since(a.Sent).Seconds())}
	}
	return d
}
