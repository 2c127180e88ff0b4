package recording

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/kvlens/kvlens/store"
)

// jsonExport is the JSON export's shape: the recording, then its frames with
// their bodies as recorded (a snapshot as it was pushed to the dashboard).
type jsonExport struct {
	ID      int64           `json:"id"`
	Name    string          `json:"name"`
	Config  json.RawMessage `json:"config"`
	Started time.Time       `json:"started"`
	Ended   *time.Time      `json:"ended,omitempty"`
	Frames  []jsonFrame     `json:"frames"`
}

type jsonFrame struct {
	T    time.Time       `json:"t"`
	Kind string          `json:"kind"`
	Body json.RawMessage `json:"body"`
}

// WriteJSON writes a recording and its frames as one JSON document.
func WriteJSON(w io.Writer, rec store.Recording, frames []store.Frame) error {
	out := jsonExport{ID: rec.ID, Name: rec.Name, Config: rawOrNull(rec.Config), Started: rec.Started.UTC()}
	if !rec.Ended.IsZero() {
		e := rec.Ended.UTC()
		out.Ended = &e
	}
	out.Frames = make([]jsonFrame, len(frames))
	for i, f := range frames {
		out.Frames[i] = jsonFrame{T: f.T.UTC(), Kind: f.Kind, Body: rawOrNull(f.Body)}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func rawOrNull(b []byte) json.RawMessage {
	if !json.Valid(b) {
		return json.RawMessage("null")
	}
	return b
}

// lanePoints is one lane's part of a recorded snapshot frame: its mode and
// chart points (web.Frame for lane A, web.LaneFrame for the others).
type lanePoints struct {
	Mode   string `json:"mode"`
	Points []struct {
		TTFTp50  *float64 `json:"ttft_p50"`
		TTFTp95  *float64 `json:"ttft_p95"`
		TPOTp50  *float64 `json:"tpot_p50"`
		TPOTp95  *float64 `json:"tpot_p95"`
		TOPS     *float64 `json:"tops"`
		RPS      *float64 `json:"rps"`
		ErrorPct *float64 `json:"error_pct"`
		Target   int      `json:"target"`
		Live     int      `json:"live"`
	} `json:"points"`
}

// snapshotBody is the part of a recorded snapshot frame the CSV reads:
// lane A's points and mode, the other lanes', and the marks.
type snapshotBody struct {
	lanePoints
	Lanes []lanePoints `json:"lanes"`
	Marks []struct {
		T     int64  `json:"t"` // Unix seconds
		Kind  string `json:"kind"`
		Label string `json:"label"`
	} `json:"marks"`
}

// CSVHeader names the CSV export's columns; units are in the names.
var CSVHeader = []string{"time", "kind", "lane", "mode", "target", "live",
	"ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms",
	"output_tokens_per_s", "requests_per_s", "error_pct", "event"}

// WriteCSV writes one row per snapshot and lane (a, then b in the A/B view)
// and one per event (a concurrency
// change, a mode switch, a start, stop, reset or fault, and the stored
// baseline compared with, at the start and at each change), in time order:
// the figures a spreadsheet needs to redraw the session. An event row has
// its kind, the mode, and what happened in "event"; its figures are empty.
// The tiles each second kept ("panels" frames) are in the JSON export only.
// Missing figures are empty cells, not zeros.
func WriteCSV(w io.Writer, frames []store.Frame) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	// A figure the window did not have yet (null) is an empty cell.
	num := func(p *float64, prec int) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', prec, 64)
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	for i, f := range frames {
		if f.Kind == "panels" {
			continue // the tiles as shown: text, which the snapshot's figures hold as numbers
		}
		if f.Kind == "baseline" {
			// The stored curves the dashboard compared with from here on:
			// an event row naming them.
			var b struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(f.Body, &b); err != nil {
				return fmt.Errorf("recording: frame %d (%s at %s): %w", i, f.Kind, stamp(f.T), err)
			}
			row := make([]string, len(CSVHeader))
			row[0], row[1], row[13] = stamp(f.T), f.Kind, "compared with "+b.Name
			if b.Name == "" {
				row[13] = "no stored baseline"
			}
			if err := cw.Write(row); err != nil {
				return err
			}
			continue
		}
		var b snapshotBody
		if err := json.Unmarshal(f.Body, &b); err != nil {
			return fmt.Errorf("recording: frame %d (%s at %s): %w", i, f.Kind, stamp(f.T), err)
		}
		// A snapshot carries the marks made since the one before it; each
		// becomes a row of its own, before the snapshot that first shows it.
		for _, m := range b.Marks {
			t := f.T
			if m.T > 0 {
				t = time.Unix(m.T, 0)
			}
			row := make([]string, len(CSVHeader))
			row[0], row[1], row[3], row[13] = stamp(t), m.Kind, b.Mode, m.Label
			if err := cw.Write(row); err != nil {
				return err
			}
		}
		for l, lane := range append([]lanePoints{b.lanePoints}, b.Lanes...) {
			row := make([]string, len(CSVHeader))
			row[0], row[1], row[2], row[3] = stamp(f.T), f.Kind, string(rune('a'+l)), lane.Mode
			if len(lane.Points) > 0 {
				p := lane.Points[len(lane.Points)-1]
				row[4], row[5] = strconv.Itoa(p.Target), strconv.Itoa(p.Live)
				row[6], row[7], row[8], row[9] = num(p.TTFTp50, 1), num(p.TTFTp95, 1), num(p.TPOTp50, 1), num(p.TPOTp95, 1)
				row[10], row[11], row[12] = num(p.TOPS, 1), num(p.RPS, 3), num(p.ErrorPct, 2)
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
