package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/recording"
	"github.com/kvlens/kvlens/store"
)

// Recordings is the store of recorded sessions the Recordings page reads;
// *store.DB satisfies it.
type Recordings interface {
	Recordings(ctx context.Context) ([]store.Recording, error)
	Recording(ctx context.Context, id int64) (store.Recording, error)
	RecordingFrames(ctx context.Context, id int64) ([]store.Frame, error)
	RecordingFrame(ctx context.Context, id, seq int64) (store.Frame, error)
	DeleteRecording(ctx context.Context, id int64) error
}

func (s *Server) recordingsPage(w http.ResponseWriter, r *http.Request) {
	d := components.RecordingsData{Operator: s.rule.IsOperator(r), NotRecording: s.opts.NotRecording}
	if s.opts.Recordings == nil {
		d.Off = s.recordingsOff()
	} else if recs, err := s.opts.Recordings.Recordings(r.Context()); err != nil {
		d.Error = err.Error()
	} else {
		for _, rec := range recs {
			d.Items = append(d.Items, recordingItem(rec, rec.ID == s.opts.CurrentRecording))
		}
	}
	render(w, r, components.Recordings(d))
}

// recordingsOff says why this dashboard lists and replays no recordings.
func (s *Server) recordingsOff() string {
	if s.opts.RecordingsOff != "" {
		return s.opts.RecordingsOff
	}
	return "this dashboard has no store; start kvlens with --db and --record"
}

func recordingItem(rec store.Recording, current bool) components.RecordingItem {
	return components.RecordingItem{
		ID: rec.ID, Name: rec.Name, Started: rec.Started.UTC().Format("2006-01-02 15:04:05 UTC"),
		Length: recording.Length(rec, current, time.Now()), Frames: rec.Frames, Size: fmt.Sprintf("%.1f KB", float64(rec.Bytes)/1000), Current: current,
	}
}

// recording reads the {id} of a /recordings/{id}/... route and looks it up,
// answering 400, 404 or 503 with a one-line reason when it cannot.
func (s *Server) recording(w http.ResponseWriter, r *http.Request) (store.Recording, bool) {
	raw := chi.URLParam(r, "id")
	if s.opts.Recordings == nil {
		http.Error(w, "recordings are off: "+s.recordingsOff(), http.StatusNotFound)
		return store.Recording{}, false
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, fmt.Sprintf("recording %q: not a positive whole number", raw), http.StatusBadRequest)
		return store.Recording{}, false
	}
	rec, err := s.opts.Recordings.Recording(r.Context(), id)
	if errors.Is(err, store.ErrNoRecording) {
		http.Error(w, fmt.Sprintf("recording %d does not exist (deleted, or pruned by the retention)", id), http.StatusNotFound)
		return rec, false
	}
	if err != nil {
		http.Error(w, "read recording: "+err.Error(), http.StatusInternalServerError)
		return rec, false
	}
	return rec, true
}

func (s *Server) recordedFrames(w http.ResponseWriter, r *http.Request, rec store.Recording) ([]store.Frame, bool) {
	frames, err := s.opts.Recordings.RecordingFrames(r.Context(), rec.ID)
	if err != nil {
		http.Error(w, fmt.Sprintf("read recording %d: %v", rec.ID, err), http.StatusInternalServerError)
		return nil, false
	}
	return frames, true
}

func (s *Server) replayPage(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.recording(w, r)
	if !ok {
		return
	}
	d := components.ReplayData{
		ID: rec.ID, Name: rec.Name, Started: rec.Started.UTC().Format(time.RFC3339),
		SLOTTFTms: ms(s.opts.SLOTTFT), SLOTPOTms: ms(s.opts.SLOTPOT),
		Tiles: s.blankTiles("loading the tiles at the playhead…"),
	}
	if rec.Frames == 0 {
		d.Empty = "Nothing was recorded: this recording has no frames to play."
		if rec.ID == s.opts.CurrentRecording || recording.Live(rec, time.Now()) {
			d.Empty = fmt.Sprintf("Nothing recorded yet: the recorder writes its frames every %.0f s. Reload the page in a moment.", recording.FlushEvery.Seconds())
		}
	}
	render(w, r, components.Replay(d))
}

// noPanels says why a replay's tiles are dashes: the frame is older than
// kvlens's recording of them.
const noPanels = "this recording kept no tiles (made by an older kvlens)"

// blankTiles are the tiles with every figure a dash, and why there are
// none; the same tiles, in the same order, as Server.tiles.
func (s *Server) blankTiles(why string) components.TilesData {
	d := components.TilesData{Compare: why}
	for _, m := range s.metrics() {
		d.Tiles = append(d.Tiles, components.Tile{ID: m.id, Label: label(m.id), Value: "—", Baseline: "—", Level: "none"})
	}
	last := len(d.Tiles) - 1
	errs := components.Tile{ID: "errors", Label: label("errors"), Value: "—", Baseline: "—", Level: "none"}
	d.Tiles = append(d.Tiles[:last], errs, d.Tiles[last])
	return d
}

// recordedPanels answers GET /recordings/{id}/frames/{seq}/panels: the
// headline and tiles recorded with snapshot frame seq (in frame seq+1,
// Server.record), drawn by the live page's components, for the player to
// swap in at the playhead. A snapshot recorded before kvlens kept them gets
// dashes and the reason, not an error.
func (s *Server) recordedPanels(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.recording(w, r)
	if !ok {
		return
	}
	raw := chi.URLParam(r, "seq")
	seq, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || seq < 0 {
		http.Error(w, fmt.Sprintf("frame %q: not a whole number", raw), http.StatusBadRequest)
		return
	}
	f, err := s.opts.Recordings.RecordingFrame(r.Context(), rec.ID, seq)
	if errors.Is(err, store.ErrNoFrame) {
		http.Error(w, fmt.Sprintf("recording %d has no frame %d", rec.ID, seq), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "read recording: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if f.Kind != "snapshot" {
		http.Error(w, fmt.Sprintf("frame %d of recording %d is a %s frame, which has no tiles", seq, rec.ID, f.Kind), http.StatusBadRequest)
		return
	}
	p := Panels{Tiles: s.blankTiles(noPanels)}
	if next, err := s.opts.Recordings.RecordingFrame(r.Context(), rec.ID, seq+1); err == nil && next.Kind == "panels" {
		var snap struct {
			Points []Point `json:"points"`
		}
		var kept Panels
		if err := json.Unmarshal(next.Body, &kept); err != nil {
			p.Tiles.Compare = "the tiles of this second cannot be read: " + err.Error()
		} else if json.Unmarshal(f.Body, &snap) == nil && len(snap.Points) > 0 && ofSnapshot(kept.T, snap.Points[0].T, f.T) && len(kept.Tiles.Tiles) > 0 {
			p = kept
		} else {
			p.Tiles.Compare = "the tiles recorded after this second are not its own"
		}
	}
	var h components.HeadlineData
	if p.Headline != nil {
		h = *p.Headline
	}
	render(w, r, components.ReplayPanels(h, p.Tiles))
}

// ofSnapshot says whether panels naming second t are those of a snapshot
// whose points are at second point and which the recorder stamped at
// stamped: they name its points' second. kvlens before named the wall
// clock's instead, the second the recorder stamped within one; that is
// the points' too, but for a warm-up's, which are in the past (and a tick
// that straddled a second).
func ofSnapshot(t, point int64, stamped time.Time) bool {
	return t == point || (t >= stamped.Unix()-1 && t <= stamped.Unix())
}

// replayJSON is the body of GET /recordings/{id}/frames: the player's input.
type replayJSON struct {
	ID     int64             `json:"id"`
	Name   string            `json:"name"`
	Frames []replayFrameJSON `json:"frames"`
}

type replayFrameJSON struct {
	// Seq is the frame's number in the recording, from 0: its panels are
	// at /recordings/{id}/frames/{seq}/panels.
	Seq int `json:"seq"`
	// T is when the frame was recorded, in Unix ms.
	T    int64  `json:"t"`
	Kind string `json:"kind"`
	// Body is the frame as the dashboard pushed it (a Frame for snapshots;
	// the baseline chart's data for a baseline).
	Body json.RawMessage `json:"body"`
}

func (s *Server) recordingFrames(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.recording(w, r)
	if !ok {
		return
	}
	frames, ok := s.recordedFrames(w, r, rec)
	if !ok {
		return
	}
	out := replayJSON{ID: rec.ID, Name: rec.Name, Frames: make([]replayFrameJSON, 0, len(frames))}
	for i, f := range frames {
		if f.Kind == "panels" {
			continue // the player fetches them a second at a time
		}
		body := json.RawMessage(f.Body)
		if !json.Valid(body) {
			body = json.RawMessage("null") // the player skips it; the rest still plays
		}
		out.Frames = append(out.Frames, replayFrameJSON{Seq: i, T: f.T.UnixMilli(), Kind: f.Kind, Body: body})
	}
	writeJSON(w, out)
}

func (s *Server) exportRecording(format string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec, ok := s.recording(w, r)
		if !ok {
			return
		}
		frames, ok := s.recordedFrames(w, r, rec)
		if !ok {
			return
		}
		ctype := "text/csv; charset=utf-8"
		if format == "json" {
			ctype = "application/json"
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="kvlens-recording-%d.%s"`, rec.ID, format))
		// Once writing starts the status is sent: a failure can only cut
		// the download short.
		if format == "json" {
			recording.WriteJSON(w, rec, frames)
		} else {
			recording.WriteCSV(w, frames)
		}
	}
}

func (s *Server) deleteRecording(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.recording(w, r)
	if !ok {
		return
	}
	if rec.ID == s.opts.CurrentRecording {
		http.Error(w, fmt.Sprintf("recording %d is this session's and still recording", rec.ID), http.StatusConflict)
		return
	}
	if recording.Live(rec, time.Now()) {
		http.Error(w, fmt.Sprintf("recording %d is still being recorded by another running kvlens", rec.ID), http.StatusConflict)
		return
	}
	if err := s.opts.Recordings.DeleteRecording(r.Context(), rec.ID); err != nil {
		http.Error(w, fmt.Sprintf("delete recording %d: %v", rec.ID, err), http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, "/recordings", http.StatusSeeOther)
}
