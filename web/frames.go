package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/loadgen"
)

// historyLen is how many 1 Hz points the charts show: 10 minutes.
const historyLen = 600

// rateSpan is how much time a window must cover before its rates mean
// anything: one answer ending 0.1 s after a window began would read as
// 10,000 tokens/s.
const rateSpan = 5 * time.Second

// Point is one second of the live charts: the rolling window's figures as of
// that second (definitions in shared/reference/metrics.md).
type Point struct {
	// T is the time, in Unix seconds.
	T int64 `json:"t"`
	// TTFTp50 and TTFTp95 are in ms; null when the window had no data.
	TTFTp50 *float64 `json:"ttft_p50"`
	TTFTp95 *float64 `json:"ttft_p95"`
	// TPOTp50 and TPOTp95 are in ms; null when the window had no data.
	TPOTp50 *float64 `json:"tpot_p50"`
	TPOTp95 *float64 `json:"tpot_p95"`
	// OutputTokensPerSec is the window's output throughput; null while its
	// rates settle (RatesSettling).
	OutputTokensPerSec *float64 `json:"tops"`
	// RequestsPerSec is the window's completed requests per second; null
	// while its rates settle.
	RequestsPerSec *float64 `json:"rps"`
	// RatesSettling says the window's rates are not yet comparable
	// (flowing), so the point has none and the throughput chart shades
	// the gap and says "settling".
	RatesSettling bool `json:"rates_settling,omitempty"`
	// ErrorPct is the window's error rate, in percent; null until a
	// request has answered since the last change, where 0 would read as
	// "no failures" while requests fail.
	ErrorPct *float64 `json:"error_pct"`
	// ShedPerSec is requests the router shed during the last tick, per second.
	ShedPerSec float64 `json:"shed_per_sec"`
	// Target and Live are the asked-for and running conversations.
	Target int `json:"target"`
	Live   int `json:"live"`
}

// Mark is a vertical annotation on every chart: what changed, and when.
type Mark struct {
	// T is the time, in Unix seconds.
	T int64 `json:"t"`
	// Kind is "concurrency", "mode", "start", "stop", "reset", "fault",
	// "tour" (paused or resumed) or "warm" (the warm-up's end).
	Kind string `json:"kind"`
	// Label is shown on the charts, such as "→ 120" or "KV-aware".
	Label string `json:"label"`
	// Lane is the lane the mark is about ("a", "b"), drawn in its colour;
	// empty for a mark about every lane, or when there is one.
	Lane string `json:"lane,omitempty"`
}

// Frame is a JSON message on the websocket. The page tells it from an HTML
// fragment by its first byte.
type Frame struct {
	// Type is "snapshot" (one new point) or "history" (the last 10 minutes).
	Type string `json:"type"`
	// Mode, ModeText, Name, Points and Live are the first lane's.
	Mode     string `json:"mode"`
	ModeText string `json:"mode_text"`
	// Name names the lane on the charts: its router and source.
	Name   string  `json:"name,omitempty"`
	Points []Point `json:"points"`
	Marks  []Mark  `json:"marks,omitempty"`
	// Live is the overlay chart's live point.
	Live *LivePoint `json:"live,omitempty"`
	// Lanes are the lanes after the first, in the A/B view: lane B.
	Lanes []LaneFrame `json:"lanes,omitempty"`
	// Pair are the policies the A/B view compares, A then B, so that every
	// page keeps its selects in step with another operator's choice.
	Pair []string `json:"pair,omitempty"`
	// Fault is the fault in force, as /api/fault takes it ("none",
	// "503:10"), so that every open page's fault select shows it whoever
	// chose it (another browser, the tour); absent without faults.
	Fault string `json:"fault,omitempty"`
	// Warming says the fleets are playing their warm-up: the page holds the
	// time charts' points back until it ends, as it holds the tiles'
	// figures, since they are the cold start the warm-up hides.
	Warming bool `json:"warming,omitempty"`
}

// Panels are what the page showed beside the charts at one tick: the
// headline (A/B view only) and the tiles, with their settling state. A
// recording keeps them, so that a replay shows what the page showed.
type Panels struct {
	// T is the tick's time, in Unix seconds: its chart points' T.
	T        int64                    `json:"t"`
	Headline *components.HeadlineData `json:"headline,omitempty"`
	Tiles    components.TilesData     `json:"tiles"`
}

// LaneFrame is one more lane's part of a Frame.
type LaneFrame struct {
	Mode     string     `json:"mode"`
	ModeText string     `json:"mode_text"`
	Name     string     `json:"name"`
	Points   []Point    `json:"points"`
	Live     *LivePoint `json:"live,omitempty"`
}

// LivePoint is where the live system sits on the baseline chart: the
// conversations running and the window's figures under the stored curves'
// keys (ms, tokens/s); a figure without data, or not yet settled, is absent.
type LivePoint struct {
	// Conversations is the x coordinate: conversations running.
	Conversations int `json:"c"`
	// Compare is the stored curve the live policy is compared with.
	Compare string             `json:"compare"`
	Values  map[string]float64 `json:"values"`
	// Settling holds, under the same keys, the figures the window has but
	// cannot compare yet, each with why, as its tile says it ("settling
	// (12 s of 30)"): the chart places no point for them and says in its
	// legend that the lane is settling.
	Settling map[string]string `json:"settling,omitempty"`
}

func livePoint(snap loadgen.Snapshot, policy string) *LivePoint {
	w := snap.Window
	lp := &LivePoint{Conversations: snap.Live, Compare: BaselineMode(policy), Values: map[string]float64{}}
	if snap.Live == 0 {
		// Stopped, or not yet started: no conversation runs, and a window
		// that runs on with nothing sent is no point at 0 on any curve.
		return lp
	}
	// A point is placed only once its figure's tile would compare it, with
	// the same wait (settling, answering, flowing): where it sits against
	// the curves is a comparison. Before, it sat at 1,181 ms 14 s after a
	// cache reset, far above every curve, while each tile said "settling
	// (14 s of 30)".
	put := func(key string, v float64, wait string) {
		if wait == "" {
			lp.Values[key] = v
			return
		}
		if lp.Settling == nil {
			lp.Settling = map[string]string{}
		}
		lp.Settling[key] = wait
	}
	if w.TTFT.Count > 0 {
		put("ttft_p50_ms", w.TTFT.P50, settling(w))
		put("ttft_p95_ms", w.TTFT.P95, settling(w))
	}
	if w.TPOT.Count > 0 {
		put("tpot_p50_ms", w.TPOT.P50, answering(w))
		put("tpot_p95_ms", w.TPOT.P95, answering(w))
	}
	if w.Covered >= rateSpan && w.OutputTokensPerSec > 0 {
		put("tops", w.OutputTokensPerSec, flowing(w))
	}
	return lp
}

// history is what the charts showed: each lane's points, and the marks.
type history struct {
	mu    sync.Mutex
	lanes []laneHistory
	marks []Mark
	fresh []Mark // marks not yet pushed
}

type laneHistory struct {
	points []Point
	shed   int64 // the router's shed count at the last tick
	shedAt time.Time
}

func (h *history) lane(i int) *laneHistory {
	for len(h.lanes) <= i {
		h.lanes = append(h.lanes, laneHistory{})
	}
	return &h.lanes[i]
}

// shedRate returns lane i's requests shed per second since the last call.
func (h *history) shedRate(i int, total int64, now time.Time) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.lane(i)
	prev, at := l.shed, l.shedAt
	l.shed, l.shedAt = total, now
	if at.IsZero() || total < prev {
		return 0
	}
	return float64(total-prev) / max(now.Sub(at).Seconds(), 0.001)
}

// mark records a change for the charts' annotations.
func (h *history) mark(m Mark) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.marks = append(h.marks, m)
	h.fresh = append(h.fresh, m)
	cut := m.T - historyLen
	for len(h.marks) > 0 && h.marks[0].T < cut {
		h.marks = h.marks[1:]
	}
}

// takeFresh returns the marks made since the last call.
func (h *history) takeFresh() []Mark {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.fresh
	h.fresh = nil
	return f
}

func (h *history) allMarks() []Mark {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Mark(nil), h.marks...)
}

func (h *history) add(i int, p Point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.lane(i)
	l.points = append(l.points, p)
	if len(l.points) > historyLen {
		l.points = l.points[len(l.points)-historyLen:]
	}
}

func (h *history) all(i int) []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Point(nil), h.lane(i).points...)
}

func point(snap loadgen.Snapshot) Point {
	w := snap.Window
	p := Point{T: snap.Time.Unix(), Target: snap.Target, Live: snap.Live}
	if w.Answers > 0 {
		e := 100 * w.ErrorRate
		p.ErrorPct = &e
	}
	// A rate is charted only once the tiles would compare it (flowing).
	// Before, for about a request's length after a change, it counts
	// answers to requests sent before the change over a span of a few
	// seconds, and a chart drew it as if settled: 2,830 tok/s for lane B
	// 12 s after a fault, against a steady 2,300 either side; 1,281 in the
	// single view 6 s after a cache reset, against 2,050. Drawn dimmed it
	// would still set the y axis and be read against the settled line
	// beside it; left out, the line breaks at the change's mark and
	// resumes once the figure means what the rest of the line means, the
	// chart shading the gap and saying "settling", while the tile shows
	// the settling figure, labelled so.
	// A stopped lane's rates are drawn as before: they fall, which is what
	// stopping does, and no tile compares them either way.
	if w.Covered >= rateSpan && (!snap.Running || flowing(w) == "") {
		tops, rps := w.OutputTokensPerSec, w.RequestsPerSec
		p.OutputTokensPerSec, p.RequestsPerSec = &tops, &rps
	} else if snap.Running {
		p.RatesSettling = true
	}
	p.TTFTp50, p.TTFTp95 = pair(w.TTFT)
	p.TPOTp50, p.TPOTp95 = pair(w.TPOT)
	return p
}

// pair returns q's p50 and p95, or nils when q holds no data, so the charts
// show a gap rather than a false zero.
func pair(q loadgen.Quantiles) (*float64, *float64) {
	if q.Count == 0 {
		return nil, nil
	}
	p50, p95 := q.P50, q.P95
	return &p50, &p95
}

// snapshots are every lane's load generator's state, in lane order.
func (s *Server) snapshots() []loadgen.Snapshot {
	out := make([]loadgen.Snapshot, len(s.lanes))
	for i, l := range s.lanes {
		out[i] = l.Gen.Snapshot()
	}
	return out
}

// frame builds a chart frame of the given type from each lane's points.
func (s *Server) frame(typ string, snaps []loadgen.Snapshot, points func(i int) []Point, marks []Mark) Frame {
	warming := s.warming()
	f := Frame{Type: typ, Marks: marks, Warming: warming}
	for i, l := range s.lanes {
		mode := l.Router.PolicyName()
		lf := LaneFrame{Mode: mode, ModeText: s.opts.Describe(mode), Name: s.laneName(mode), Points: points(i)}
		lf.Live = livePoint(snaps[i], mode)
		if warming {
			// A warm-up's figures are the cold start: the baseline chart
			// places no live point until it ends, but draws each lane's
			// stored simulated curve from the first frame.
			lf.Live.Values, lf.Live.Settling = map[string]float64{}, nil
		}
		if i == 0 {
			f.Mode, f.ModeText, f.Name, f.Points, f.Live = lf.Mode, lf.ModeText, lf.Name, lf.Points, lf.Live
			continue
		}
		f.Lanes = append(f.Lanes, lf)
	}
	if s.ab() {
		f.Pair = s.pairPolicies()
	}
	if s.opts.Faults != nil {
		f.Fault = s.currentFault()
	}
	return f
}

// frames is the hub's tick: one chart point per lane as JSON, and the tiles
// and panels as an out-of-band HTML fragment. It first begins a new window
// for a change made behind the dashboard's back and, in the alternating
// view, ends a turn that is due.
func (s *Server) frames() [][]byte {
	now, at := time.Now(), s.now()
	if s.watch(now) {
		// Someone changed the demo behind the dashboard's back (the
		// router's admin API): an operator action like any other.
		s.operatorTakes()
	}
	snaps := s.snapshots()
	if s.alt != nil && s.alternate(now, snaps[0]) {
		snaps = s.snapshots()
	}
	points := make([]Point, len(s.lanes))
	for i, l := range s.lanes {
		points[i] = point(snaps[i])
		// One tick is one second of every lane's chart, whichever side of
		// a second boundary each snapshot fell. A warm-up's ticks fall at
		// its own times, seconds apart, in the charts' past.
		points[i].T = at.Unix()
		points[i].ShedPerSec = s.history.shedRate(i, l.Router.Counts().Shed, snaps[i].Time)
		s.history.add(i, points[i])
	}
	f := s.frame("snapshot", snaps, func(i int) []Point { return points[i : i+1] }, s.history.takeFresh())
	js, _ := json.Marshal(f)
	p := s.panels(now, snaps)
	if s.opts.Record != nil {
		// The panels name the second of the tick's points: a warm-up's
		// are in the past, not at now.
		p.T = at.Unix()
		s.record(js, p)
	}
	return [][]byte{js, s.panelsHTML(snaps, p)}
}

// record hands the recorder this tick: first the baseline the tiles and
// the baseline chart compare with, whenever it is not the one recorded last
// (a recording's first tick, or "Compare with it"), so that a replay draws
// the curves compared at the time; then the chart frame as pushed; then its
// panels, right after it, so that frame seq+1 holds the panels of snapshot
// seq. The panels are a frame of their own because the store keeps a frame
// of up to about 1 KB compressed within its page, and the two together are
// more: the rest of a larger one takes a 4 KB page of its own.
func (s *Server) record(frame []byte, p Panels) {
	base, _ := json.Marshal(s.baselineData())
	panels, _ := json.Marshal(p)
	s.recorded.Lock()
	defer s.recorded.Unlock()
	if !bytes.Equal(base, s.recorded.base) {
		s.recorded.base = base
		s.opts.Record("baseline", base)
	}
	s.opts.Record("snapshot", frame)
	s.opts.Record("panels", panels)
}

// hello is what a browser gets on connecting: the charts' history and the
// current tiles, so a reload shows the last 10 minutes at once.
func (s *Server) hello() [][]byte {
	snaps := s.snapshots()
	js, _ := json.Marshal(s.frame("history", snaps, s.history.all, s.history.allMarks()))
	return [][]byte{js, s.panelsHTML(snaps, s.panels(time.Now(), snaps))}
}

// panels are the headline (in the A/B view) and the tiles at now.
func (s *Server) panels(now time.Time, snaps []loadgen.Snapshot) Panels {
	sides := s.sides(now, snaps)
	p := Panels{Tiles: s.tiles(sides)}
	if s.ab() {
		h := s.headline(sides)
		p.Headline = &h
	}
	return p
}

// panelsHTML is one HTML frame of out-of-band swaps: the headline and
// tiles, the live conversation count, the Start/Stop control and the
// workers panel.
func (s *Server) panelsHTML(snaps []loadgen.Snapshot, p Panels) []byte {
	var b bytes.Buffer
	ctx := context.Background()
	if p.Headline != nil {
		components.PairNames(s.pairNames()).Render(ctx, &b)
		components.Headline(*p.Headline).Render(ctx, &b)
	}
	components.Tiles(p.Tiles).Render(ctx, &b)
	components.LiveCount(liveCounts(snaps)).Render(ctx, &b)
	components.RunStatePush(snaps[0].Running).Render(ctx, &b)
	components.Workers(s.workers(snaps)).Render(ctx, &b)
	components.BlindBanner(s.blind()).Render(ctx, &b)
	if s.tour != nil {
		// Broadcast to every browser, so rendered as a viewer; the page
		// enables the operator's Pause and Resume.
		components.Tour(s.tourData(false)).Render(ctx, &b)
	}
	if s.opts.Simulator != nil {
		// Broadcast to every browser, so rendered as a viewer; an operator's
		// button comes back with the next page load or POST.
		components.SimStatus(s.simStatusData(false)).Render(ctx, &b)
	}
	return b.Bytes()
}

// liveCounts are the conversations running in each lane.
func liveCounts(snaps []loadgen.Snapshot) []int {
	out := make([]int, len(snaps))
	for i, sn := range snaps {
		out[i] = sn.Live
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
