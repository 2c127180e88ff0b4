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
	// OutputTokensPerSec is the window's output throughput.
	OutputTokensPerSec float64 `json:"tops"`
	// RequestsPerSec is the window's completed requests per second.
	RequestsPerSec float64 `json:"rps"`
	// ErrorPct is the window's error rate, in percent.
	ErrorPct float64 `json:"error_pct"`
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
	// Kind is "concurrency", "mode", "start", "stop" or "reset".
	Kind string `json:"kind"`
	// Label is shown on the charts, such as "→ 120" or "KV-aware".
	Label string `json:"label"`
}

// Frame is a JSON message on the websocket. The page tells it from an HTML
// fragment by its first byte.
type Frame struct {
	// Type is "snapshot" (one new point) or "history" (the last 5 minutes).
	Type     string  `json:"type"`
	Mode     string  `json:"mode"`
	ModeText string  `json:"mode_text"`
	Points   []Point `json:"points"`
	Marks    []Mark  `json:"marks,omitempty"`
	// Live is the overlay chart's live point.
	Live *LivePoint `json:"live,omitempty"`
}

// LivePoint is where the live system sits on the baseline chart: the
// conversations running and the window's figures under the stored curves'
// keys (ms, tokens/s); a figure without data is absent.
type LivePoint struct {
	// Conversations is the x coordinate: conversations running.
	Conversations int `json:"c"`
	// Compare is the stored curve the live policy is compared with.
	Compare string             `json:"compare"`
	Values  map[string]float64 `json:"values"`
}

func livePoint(snap loadgen.Snapshot, policy string) *LivePoint {
	w := snap.Window
	lp := &LivePoint{Conversations: snap.Live, Compare: BaselineMode(policy), Values: map[string]float64{}}
	if w.TTFT.Count > 0 {
		lp.Values["ttft_p50_ms"], lp.Values["ttft_p95_ms"] = w.TTFT.P50, w.TTFT.P95
	}
	if w.TPOT.Count > 0 {
		lp.Values["tpot_p50_ms"], lp.Values["tpot_p95_ms"] = w.TPOT.P50, w.TPOT.P95
	}
	if w.Covered > 0 && w.Completed > 0 {
		lp.Values["tops"] = w.OutputTokensPerSec
	}
	return lp
}

type history struct {
	mu     sync.Mutex
	points []Point
	marks  []Mark
	fresh  []Mark // marks not yet pushed
	shed   int64  // the router's shed count at the last tick
	shedAt time.Time
}

// shedRate returns requests shed per second since the last call.
func (h *history) shedRate(total int64, now time.Time) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, at := h.shed, h.shedAt
	h.shed, h.shedAt = total, now
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

func (h *history) add(p Point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.points = append(h.points, p)
	if len(h.points) > historyLen {
		h.points = h.points[len(h.points)-historyLen:]
	}
}

func (h *history) all() []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Point(nil), h.points...)
}

func point(snap loadgen.Snapshot) Point {
	w := snap.Window
	p := Point{
		T: snap.Time.Unix(), Target: snap.Target, Live: snap.Live,
		OutputTokensPerSec: w.OutputTokensPerSec,
		RequestsPerSec:     w.RequestsPerSec,
		ErrorPct:           100 * w.ErrorRate,
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

// frames is the hub's tick: one chart point as JSON, and the tiles as an
// out-of-band HTML fragment.
func (s *Server) frames() [][]byte {
	snap := s.gen.Snapshot()
	p := point(snap)
	p.ShedPerSec = s.history.shedRate(s.rt.Counts().Shed, snap.Time)
	s.history.add(p)
	mode := s.rt.PolicyName()
	js, _ := json.Marshal(Frame{Type: "snapshot", Mode: mode, ModeText: s.opts.Describe(mode), Points: []Point{p}, Marks: s.history.takeFresh(), Live: livePoint(snap, mode)})
	if s.opts.Record != nil {
		s.opts.Record(js)
	}
	return [][]byte{js, s.panelsHTML(snap)}
}

// hello is what a browser gets on connecting: the chart's history and the
// current tiles, so a reload shows the last 5 minutes at once.
func (s *Server) hello() [][]byte {
	snap := s.gen.Snapshot()
	mode := s.rt.PolicyName()
	js, _ := json.Marshal(Frame{Type: "history", Mode: mode, ModeText: s.opts.Describe(mode), Points: s.history.all(), Marks: s.history.allMarks(), Live: livePoint(snap, mode)})
	return [][]byte{js, s.panelsHTML(snap)}
}

// panelsHTML is one HTML frame of out-of-band swaps: the tiles, the live
// conversation count and the workers panel.
func (s *Server) panelsHTML(snap loadgen.Snapshot) []byte {
	var b bytes.Buffer
	ctx := context.Background()
	components.Tiles(s.tiles(snap)).Render(ctx, &b)
	components.LiveCount(snap.Live).Render(ctx, &b)
	components.Workers(s.workers(snap)).Render(ctx, &b)
	components.BlindBanner(s.blind()).Render(ctx, &b)
	if s.opts.Simulator != nil {
		// Broadcast to every browser, so rendered as a viewer; an operator's
		// button comes back with the next page load or POST.
		components.SimStatus(s.simStatusData(false)).Render(ctx, &b)
	}
	return b.Bytes()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
