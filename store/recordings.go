package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"
)

// Recording is one recorded live session.
type Recording struct {
	ID   int64
	Name string
	// Config is JSON describing how the session was set up.
	Config []byte
	// Started and Ended bound the session; Ended is zero while it records,
	// or when the process died before closing it.
	Started, Ended time.Time
	// Frames counts its frames; Bytes is their stored (compressed) size.
	Frames int
	Bytes  int64
	// LastFrame is the time of its newest frame; zero when it has none.
	LastFrame time.Time
}

// Frame is one moment of a recording: a snapshot or an event.
type Frame struct {
	// T is when it happened.
	T time.Time
	// Kind is "snapshot" or an event kind such as "mode" or "concurrency".
	Kind string
	// Body is JSON.
	Body []byte
}

// ErrNoRecording means no recording has the given id.
var ErrNoRecording = errors.New("no such recording")

// ErrNoFrame means a recording has no frame of the given number.
var ErrNoFrame = errors.New("no such frame")

// CreateRecording starts a recording and returns its id.
func (db *DB) CreateRecording(ctx context.Context, name string, config []byte) (int64, error) {
	var id int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO recordings (name, config, started_at) VALUES (?, ?, ?)`, name, string(config), now())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: create recording: %w", err)
	}
	return id, nil
}

// AppendFrames adds frames to a recording in one transaction: a crash keeps
// every batch that returned and loses at most the one being written.
func (db *DB) AppendFrames(ctx context.Context, id int64, frames []Frame) error {
	if len(frames) == 0 {
		return nil
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var next int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), -1) + 1 FROM recording_frames WHERE recording_id = ?`, id).Scan(&next); err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO recording_frames (recording_id, seq, t_ms, kind, body) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, f := range frames {
			body, err := compress(f.Body)
			if err != nil {
				return err
			}
			if _, err := stmt.ExecContext(ctx, id, next+int64(i), f.T.UnixMilli(), f.Kind, body); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: append to recording %d: %w", id, err)
	}
	return nil
}

// EndRecording marks a recording finished at end.
func (db *DB) EndRecording(ctx context.Context, id int64, end time.Time) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE recordings SET ended_at = ? WHERE id = ?`, end.UTC().Format(time.RFC3339Nano), id)
		return err
	})
}

const recordingColumns = `r.id, r.name, r.config, r.started_at, r.ended_at,
	(SELECT COUNT(*) FROM recording_frames f WHERE f.recording_id = r.id),
	(SELECT COALESCE(SUM(LENGTH(f.body)), 0) FROM recording_frames f WHERE f.recording_id = r.id),
	(SELECT COALESCE(MAX(f.t_ms), 0) FROM recording_frames f WHERE f.recording_id = r.id)`

func scanRecording(row interface{ Scan(...any) error }) (Recording, error) {
	var r Recording
	var config, started, ended string
	var last int64 // Unix milliseconds
	if err := row.Scan(&r.ID, &r.Name, &config, &started, &ended, &r.Frames, &r.Bytes, &last); err != nil {
		return r, err
	}
	if last > 0 {
		r.LastFrame = time.UnixMilli(last)
	}
	r.Config, r.Started = []byte(config), parseTime(started)
	if ended != "" {
		r.Ended = parseTime(ended)
	}
	return r, nil
}

// Recordings lists every recording, newest first.
func (db *DB) Recordings(ctx context.Context) ([]Recording, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+recordingColumns+` FROM recordings r ORDER BY r.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("store: list recordings: %w", err)
	}
	defer rows.Close()
	var out []Recording
	for rows.Next() {
		r, err := scanRecording(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list recordings: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Recording returns one recording's summary.
func (db *DB) Recording(ctx context.Context, id int64) (Recording, error) {
	r, err := scanRecording(db.db.QueryRowContext(ctx, `SELECT `+recordingColumns+` FROM recordings r WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: recording %d: %w", id, ErrNoRecording)
	}
	return r, err
}

// RecordingFrames returns a recording's frames in order.
func (db *DB) RecordingFrames(ctx context.Context, id int64) ([]Frame, error) {
	if _, err := db.Recording(ctx, id); err != nil {
		return nil, err
	}
	rows, err := db.db.QueryContext(ctx, `SELECT t_ms, kind, body FROM recording_frames WHERE recording_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("store: read recording %d: %w", id, err)
	}
	defer rows.Close()
	var out []Frame
	for rows.Next() {
		var ms int64
		var f Frame
		var body []byte
		if err := rows.Scan(&ms, &f.Kind, &body); err != nil {
			return nil, err
		}
		if f.Body, err = decompress(body); err != nil {
			return nil, fmt.Errorf("store: recording %d frame at %d: %w", id, ms, err)
		}
		f.T = time.UnixMilli(ms)
		out = append(out, f)
	}
	return out, rows.Err()
}

// RecordingFrame returns a recording's frame number seq, counting from 0 in
// the order RecordingFrames returns them.
func (db *DB) RecordingFrame(ctx context.Context, id, seq int64) (Frame, error) {
	var f Frame
	var ms int64
	var body []byte
	err := db.db.QueryRowContext(ctx, `SELECT t_ms, kind, body FROM recording_frames WHERE recording_id = ? AND seq = ?`, id, seq).Scan(&ms, &f.Kind, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("store: recording %d has no frame %d: %w", id, seq, ErrNoFrame)
	}
	if err != nil {
		return f, fmt.Errorf("store: recording %d frame %d: %w", id, seq, err)
	}
	if f.Body, err = decompress(body); err != nil {
		return f, fmt.Errorf("store: recording %d frame %d: %w", id, seq, err)
	}
	f.T = time.UnixMilli(ms)
	return f, nil
}

// DeleteRecording removes a recording and its frames.
func (db *DB) DeleteRecording(ctx context.Context, id int64) error {
	var n int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM recordings WHERE id = ?`, id)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if err == nil && n == 0 {
		err = fmt.Errorf("store: recording %d: %w", id, ErrNoRecording)
	}
	return err
}

// PruneRecordings deletes recordings that started before cutoff, except
// keep (the one being recorded), and returns how many it deleted. It is the
// retention policy: a week at a booth must not fill the disk.
func (db *DB) PruneRecordings(ctx context.Context, cutoff time.Time, keep int64) (int, error) {
	n := 0
	err := db.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, started_at FROM recordings WHERE id != ?`, keep)
		if err != nil {
			return err
		}
		var old []int64
		for rows.Next() {
			var id int64
			var started string
			if err := rows.Scan(&id, &started); err != nil {
				rows.Close()
				return err
			}
			// Compared as times: RFC 3339 strings with varying fractions
			// of a second do not sort as text.
			if parseTime(started).Before(cutoff) {
				old = append(old, id)
			}
		}
		rows.Close()
		for _, id := range old {
			if _, err := tx.ExecContext(ctx, `DELETE FROM recordings WHERE id = ?`, id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

func compress(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decompress(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(io.LimitReader(zr, 16<<20)) // a frame is a few KB
}
