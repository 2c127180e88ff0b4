// Package recording keeps live sessions: it writes the dashboard's 1 Hz
// frames and its events (start/stop, concurrency changes, mode switches) to
// the store in batches, prunes old sessions, and exports them as CSV or JSON
// for a recorded walkthrough.
package recording

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/store"
)

// FlushEvery is how often buffered frames are written: a crash loses at most
// this much of a recording.
const FlushEvery = 10 * time.Second

// Recorder writes one session's frames to the store.
type Recorder struct {
	db  *store.DB
	id  int64
	clk clock.Clock
	log *slog.Logger

	mu  sync.Mutex
	buf []store.Frame
}

// Start opens a new recording named name, first deleting recordings older
// than retention (0 keeps them all).
func Start(ctx context.Context, db *store.DB, clk clock.Clock, name string, config []byte, retention time.Duration) (*Recorder, error) {
	id, err := db.CreateRecording(ctx, name, config)
	if err != nil {
		return nil, err
	}
	r := &Recorder{db: db, id: id, clk: clk, log: slog.Default()}
	if retention > 0 {
		if n, err := db.PruneRecordings(ctx, clk.Now().Add(-retention), id); err != nil {
			r.log.Warn("recording: prune old recordings", "err", err)
		} else if n > 0 {
			r.log.Info("recording: deleted old recordings", "count", n, "older_than", retention)
		}
	}
	return r, nil
}

// ID is the recording's id in the store.
func (r *Recorder) ID() int64 { return r.id }

// Add buffers a frame of kind ("snapshot", or an event kind) with its JSON body.
func (r *Recorder) Add(kind string, body []byte) {
	r.mu.Lock()
	r.buf = append(r.buf, store.Frame{T: r.clk.Now(), Kind: kind, Body: body})
	r.mu.Unlock()
}

// Flush writes the buffered frames.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	frames := r.buf
	r.buf = nil
	r.mu.Unlock()
	if err := r.db.AppendFrames(ctx, r.id, frames); err != nil {
		// Keep them for the next try rather than lose them: the disk may
		// be busy, and the next flush may succeed.
		r.mu.Lock()
		r.buf = append(frames, r.buf...)
		r.mu.Unlock()
		return err
	}
	return nil
}

// Run flushes every FlushEvery until ctx ends, then flushes the rest and
// marks the recording ended.
func (r *Recorder) Run(ctx context.Context) {
	for {
		tick := make(chan struct{})
		t := r.clk.AfterFunc(FlushEvery, func() { close(tick) })
		select {
		case <-ctx.Done():
			t.Stop()
			// ctx has ended; the last writes get a context of their own.
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := r.Flush(final); err != nil {
				r.log.Error("recording: final flush", "err", err)
			}
			if err := r.db.EndRecording(final, r.id, r.clk.Now()); err != nil {
				r.log.Error("recording: end", "err", err)
			}
			return
		case <-tick:
			if err := r.Flush(ctx); err != nil {
				r.log.Warn("recording: flush", "err", err)
			}
		}
	}
}

// Name is a default recording name for a session that starts at t.
func Name(t time.Time) string { return fmt.Sprintf("session %s", t.Format("2006-01-02 15:04:05")) }

// Quiet is how long a recording with no end may go without a new frame
// before it counts as cut off (its process killed, or the machine lost
// power). A live recorder writes every FlushEvery, with a frame a second.
const Quiet = 6 * FlushEvery

// Length says how long a recording is, or that it is still going on, or
// that it was cut off, or that it holds nothing: the column people read in
// a list of recordings. current says that this process is the one
// recording it. A finished recording with no frame has no length to give,
// however long its session ran.
func Length(rec store.Recording, current bool, now time.Time) string {
	switch {
	case current:
		return "recording now"
	case !rec.Ended.IsZero() && rec.Frames == 0:
		return "nothing recorded"
	case !rec.Ended.IsZero():
		// max: a clock set back during the session (NTP on a booth laptop)
		// must not read as a negative length.
		return max(0, rec.Ended.Sub(rec.Started)).Round(time.Second).String()
	}
	if Live(rec, now) {
		return "recording (another kvlens)"
	}
	if rec.Frames == 0 {
		return "nothing recorded (cut off: no end recorded)"
	}
	return fmt.Sprintf("cut off after %s (no end recorded)", lastWrite(rec).Sub(rec.Started).Round(time.Second))
}

// Live says that some process is still writing rec: it has no end and its
// last frame (or its start) is less than Quiet old.
func Live(rec store.Recording, now time.Time) bool {
	return rec.Ended.IsZero() && now.Sub(lastWrite(rec)) < Quiet
}

// lastWrite is when rec last grew: its last frame, or its start.
func lastWrite(rec store.Recording) time.Time {
	if rec.LastFrame.After(rec.Started) {
		return rec.LastFrame
	}
	return rec.Started
}
