package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kvlens/kvlens/baselines"
)

// Run statuses.
const (
	// RunRunning is a sweep in progress, or one whose process died: either
	// way it can be resumed.
	RunRunning = "running"
	// RunDone is a finished sweep, whose baseline set is stored.
	RunDone = "done"
	// RunFailed is a sweep that stopped on an error; it can be resumed too.
	RunFailed = "failed"
)

// Run is a stored sweep run.
type Run struct {
	// ID is the run's row id, the number --resume takes.
	ID int64
	// Config is the sweep's configuration, as JSON.
	Config []byte
	// Status is RunRunning, RunDone or RunFailed.
	Status string
	// Total is the number of levels the run will measure, over all modes
	// and repeats; Done is how many are stored.
	Total, Done int
	// Error is why a failed run stopped.
	Error string
	// SetID is the baseline set the finished run produced, or 0.
	SetID int64
	// StartedAt and UpdatedAt are RFC 3339 times.
	StartedAt, UpdatedAt string
}

// CreateRun stores a new sweep run and returns its id.
func (db *DB) CreateRun(ctx context.Context, config []byte, total int) (int64, error) {
	var id int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		t := now()
		res, err := tx.ExecContext(ctx, "INSERT INTO sweep_runs(config, status, steps_total, started_at, updated_at) VALUES (?, ?, ?, ?, ?)",
			string(config), RunRunning, total, t, t)
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: create sweep run: %w", err)
	}
	return id, nil
}

// SaveRunLevel stores one finished level of a run, at once and on its own,
// so that a crash loses at most the level being measured.
func (db *DB) SaveRunLevel(ctx context.Context, run int64, rl baselines.RunLevel) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		args := append([]any{run, rl.Repeat, rl.Mode, rl.Concurrency}, metricArgs(&rl.Metrics)...)
		args = append(args, now())
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO sweep_levels(run_id, repeat, mode, concurrency, `+metricColumns+`, finished_at)
VALUES (`+placeholders(len(args))+`)`, args...)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE sweep_runs SET updated_at = ? WHERE id = ?", now(), run)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save level %s@%d of sweep run %d: %w", rl.Mode, rl.Concurrency, run, err)
	}
	return nil
}

// RunLevels returns a run's stored levels in the order they finished.
func (db *DB) RunLevels(ctx context.Context, run int64) ([]baselines.RunLevel, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT repeat, mode, concurrency, `+metricColumns+`
FROM sweep_levels WHERE run_id = ? ORDER BY finished_at, rowid`, run)
	if err != nil {
		return nil, fmt.Errorf("store: read levels of sweep run %d: %w", run, err)
	}
	defer rows.Close()
	var out []baselines.RunLevel
	for rows.Next() {
		var rl baselines.RunLevel
		dests, store := metricDests()
		if err := rows.Scan(append([]any{&rl.Repeat, &rl.Mode, &rl.Concurrency}, dests...)...); err != nil {
			return nil, fmt.Errorf("store: read levels of sweep run %d: %w", run, err)
		}
		store(&rl.Metrics)
		out = append(out, rl)
	}
	return out, rows.Err()
}

const runColumns = `r.id, r.config, r.status, r.steps_total, (SELECT count(*) FROM sweep_levels l WHERE l.run_id = r.id), r.error, coalesce(r.set_id, 0), r.started_at, r.updated_at`

func scanRun(row interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var config string
	err := row.Scan(&r.ID, &config, &r.Status, &r.Total, &r.Done, &r.Error, &r.SetID, &r.StartedAt, &r.UpdatedAt)
	r.Config = []byte(config)
	return r, err
}

// Run returns the sweep run with id.
func (db *DB) Run(ctx context.Context, id int64) (Run, error) {
	r, err := scanRun(db.db.QueryRowContext(ctx, "SELECT "+runColumns+" FROM sweep_runs r WHERE r.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: sweep run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("store: read sweep run %d: %w", id, err)
	}
	return r, nil
}

// LastUnfinishedRun returns the most recent run that is not done.
func (db *DB) LastUnfinishedRun(ctx context.Context) (Run, error) {
	r, err := scanRun(db.db.QueryRowContext(ctx, "SELECT "+runColumns+" FROM sweep_runs r WHERE r.status != ? ORDER BY r.id DESC LIMIT 1", RunDone))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: no unfinished sweep run: %w", ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("store: read sweep runs: %w", err)
	}
	return r, nil
}

// FinishRun records a run's end: done with the set it produced (setID), or
// failed with the reason.
func (db *DB) FinishRun(ctx context.Context, id int64, status, reason string, setID int64) error {
	var set any
	if setID > 0 {
		set = setID
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE sweep_runs SET status = ?, error = ?, set_id = ?, updated_at = ? WHERE id = ?", status, reason, set, now(), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: finish sweep run %d: %w", id, err)
	}
	return nil
}

// UnfinishedRuns returns every run that is not done, newest first.
func (db *DB) UnfinishedRuns(ctx context.Context) ([]Run, error) {
	rows, err := db.db.QueryContext(ctx, "SELECT "+runColumns+" FROM sweep_runs r WHERE r.status != ? ORDER BY r.id DESC", RunDone)
	if err != nil {
		return nil, fmt.Errorf("store: read sweep runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: read sweep runs: %w", err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read sweep runs: %w", err)
	}
	return runs, nil
}
