package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/loadgen"
)

// historyLen is how many 1 Hz points the TTFT chart shows: 5 minutes.
const historyLen = 300

// Point is one second of the live chart.
type Point struct {
	// T is the time, in Unix seconds.
	T int64 `json:"t"`
	// TTFTp50 and TTFTp95 are in ms; null when the window had no data.
	TTFTp50 *float64 `json:"ttft_p50"`
	TTFTp95 *float64 `json:"ttft_p95"`
	// Target and Live are the asked-for and running conversations.
	Target int `json:"target"`
	Live   int `json:"live"`
}

// Frame is a JSON message on the websocket. The page tells it from an HTML
// fragment by its first byte.
type Frame struct {
	// Type is "snapshot" (one new point) or "history" (the last 5 minutes).
	Type     string            `json:"type"`
	Mode     string            `json:"mode"`
	ModeText string            `json:"mode_text"`
	Points   []Point           `json:"points"`
	Snapshot *loadgen.Snapshot `json:"snapshot,omitempty"`
}

type history struct {
	mu     sync.Mutex
	points []Point
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
	p := Point{T: snap.Time.Unix(), Target: snap.Target, Live: snap.Live}
	if q := snap.Window.TTFT; q.Count > 0 {
		p50, p95 := q.P50, q.P95
		p.TTFTp50, p.TTFTp95 = &p50, &p95
	}
	return p
}

// frames is the hub's tick: one chart point as JSON, and the tiles as an
// out-of-band HTML fragment.
func (s *Server) frames() [][]byte {
	snap := s.gen.Snapshot()
	p := point(snap)
	s.history.add(p)
	mode := s.rt.PolicyName()
	js, _ := json.Marshal(Frame{Type: "snapshot", Mode: mode, ModeText: s.opts.Describe(mode), Points: []Point{p}, Snapshot: &snap})
	return [][]byte{js, s.tilesHTML(snap)}
}

// hello is what a browser gets on connecting: the chart's history and the
// current tiles, so a reload shows the last 5 minutes at once.
func (s *Server) hello() [][]byte {
	snap := s.gen.Snapshot()
	mode := s.rt.PolicyName()
	js, _ := json.Marshal(Frame{Type: "history", Mode: mode, ModeText: s.opts.Describe(mode), Points: s.history.all()})
	return [][]byte{js, s.tilesHTML(snap)}
}

func (s *Server) tilesHTML(snap loadgen.Snapshot) []byte {
	var b bytes.Buffer
	components.Tiles(s.tiles(snap)).Render(context.Background(), &b)
	return b.Bytes()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
