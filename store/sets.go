package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kvlens/kvlens/baselines"
)

// metricColumns are the figure columns of baseline_levels and sweep_levels,
// in baselines.Fields order; their names are the fields' JSON keys.
var metricColumns = func() string {
	var keys []string
	for _, f := range baselines.Fields {
		keys = append(keys, f.Key)
	}
	return strings.Join(keys, ", ")
}()

// metricArgs returns m's figures as query arguments, nil for absent ones.
func metricArgs(m *baselines.Metrics) []any {
	var args []any
	for _, f := range baselines.Fields {
		if v, ok := f.Value(m); ok {
			args = append(args, v)
		} else {
			args = append(args, nil)
		}
	}
	return args
}

// metricDests returns scan destinations for the figure columns, and a
// function that stores what was scanned into m.
func metricDests() ([]any, func(m *baselines.Metrics)) {
	vals := make([]sql.NullFloat64, len(baselines.Fields))
	dests := make([]any, len(vals))
	for i := range vals {
		dests[i] = &vals[i]
	}
	return dests, func(m *baselines.Metrics) {
		for i, f := range baselines.Fields {
			if vals[i].Valid {
				f.Set(m, vals[i].Float64)
			} else {
				f.Clear(m)
			}
		}
	}
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// SetInfo summarises a stored baseline set.
type SetInfo struct {
	// ID is the set's row id.
	ID int64
	// Name, Source and Deployment are as in baselines.Set.
	Name, Source, Deployment string
	// Builtin says the set shipped with kvlens.
	Builtin bool
	// Modes lists the set's routing modes.
	Modes []string
	// Levels counts the set's levels over all modes.
	Levels int
	// MinConcurrency and MaxConcurrency bound the measured range.
	MinConcurrency, MaxConcurrency int
	// CreatedAt is when the set entered the store, as RFC 3339 text.
	CreatedAt string
}

// Sets lists the stored baseline sets, oldest first.
func (db *DB) Sets(ctx context.Context) ([]SetInfo, error) {
	rows, err := db.db.QueryContext(ctx, `
SELECT s.id, s.name, s.source, s.deployment, s.builtin, s.created_at,
       count(l.mode), coalesce(min(l.concurrency), 0), coalesce(max(l.concurrency), 0),
       coalesce((SELECT group_concat(mode, ',') FROM (SELECT mode, min(position) AS p FROM baseline_levels WHERE set_id = s.id GROUP BY mode ORDER BY p)), '')
FROM baseline_sets s LEFT JOIN baseline_levels l ON l.set_id = s.id
GROUP BY s.id ORDER BY s.id`)
	if err != nil {
		return nil, fmt.Errorf("store: list baseline sets: %w", err)
	}
	defer rows.Close()
	var out []SetInfo
	for rows.Next() {
		var si SetInfo
		var modes string
		if err := rows.Scan(&si.ID, &si.Name, &si.Source, &si.Deployment, &si.Builtin, &si.CreatedAt,
			&si.Levels, &si.MinConcurrency, &si.MaxConcurrency, &modes); err != nil {
			return nil, fmt.Errorf("store: list baseline sets: %w", err)
		}
		if modes != "" {
			si.Modes = strings.Split(modes, ",")
		}
		out = append(out, si)
	}
	return out, rows.Err()
}

// Set returns the stored set called name.
func (db *DB) Set(ctx context.Context, name string) (baselines.Set, error) {
	var s baselines.Set
	var id int64
	var rps sql.NullFloat64
	var created string
	err := db.db.QueryRowContext(ctx, `SELECT id, name, source, deployment, method, generated, metric, target_rps, created_at
FROM baseline_sets WHERE name = ?`, name).Scan(&id, &s.Name, &s.Source, &s.Deployment, &s.Method, &s.Generated, &s.Metric, &rps, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("store: baseline set %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("store: read baseline set %q: %w", name, err)
	}
	if rps.Valid {
		s.TargetRPS = &rps.Float64
	}
	s.CreatedAt = parseTime(created)
	rows, err := db.db.QueryContext(ctx, `SELECT mode, concurrency, repeats, spread, `+metricColumns+`
FROM baseline_levels WHERE set_id = ? ORDER BY position`, id)
	if err != nil {
		return s, fmt.Errorf("store: read baseline set %q: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var l baselines.Level
		var spread sql.NullString
		dests, store := metricDests()
		if err := rows.Scan(append([]any{&l.Mode, &l.Concurrency, &l.Repeats, &spread}, dests...)...); err != nil {
			return s, fmt.Errorf("store: read baseline set %q: %w", name, err)
		}
		store(&l.Metrics)
		if spread.Valid {
			l.Spread = new(baselines.Metrics)
			if err := json.Unmarshal([]byte(spread.String), l.Spread); err != nil {
				return s, fmt.Errorf("store: baseline set %q: spread of %s@%d: %w", name, l.Mode, l.Concurrency, err)
			}
		}
		s.Levels = append(s.Levels, l)
	}
	return s, rows.Err()
}

// ErrExists means a set of that name is already stored.
var ErrExists = errors.New("already exists")

// SaveSet stores s in one transaction and returns its id. A set of the same
// name is an error unless replace is true, in which case it is replaced
// whole. Nothing is written unless everything is.
func (db *DB) SaveSet(ctx context.Context, s *baselines.Set, replace bool) (int64, error) {
	if strings.TrimSpace(s.Name) == "" {
		return 0, errors.New("store: a baseline set needs a name")
	}
	if err := s.Validate(); err != nil {
		return 0, fmt.Errorf("store: baseline set %q: %w", s.Name, err)
	}
	var id int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var old int64
		err := tx.QueryRowContext(ctx, "SELECT id FROM baseline_sets WHERE name = ?", s.Name).Scan(&old)
		switch {
		case err == nil && !replace:
			return fmt.Errorf("baseline set %q %w (choose another name, or replace it)", s.Name, ErrExists)
		case err == nil:
			if _, err := tx.ExecContext(ctx, "DELETE FROM baseline_sets WHERE id = ?", old); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		id, err = insertSet(ctx, tx, s, false)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: save baseline set: %w", err)
	}
	return id, nil
}

func insertSet(ctx context.Context, tx *sql.Tx, s *baselines.Set, builtin bool) (int64, error) {
	var rps any
	if s.TargetRPS != nil {
		rps = *s.TargetRPS
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO baseline_sets(name, source, deployment, method, generated, metric, target_rps, builtin, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.Name, s.Source, s.Deployment, s.Method, s.Generated, s.Metric, rps, builtin, now())
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO baseline_levels(set_id, position, mode, concurrency, repeats, spread, `+metricColumns+`)
VALUES (`+placeholders(6+len(baselines.Fields))+`)`)
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	for i, l := range s.Levels {
		var spread any
		if l.Spread != nil {
			b, err := json.Marshal(l.Spread)
			if err != nil {
				return 0, err
			}
			spread = string(b)
		}
		args := append([]any{id, i, l.Mode, l.Concurrency, l.Repeats, spread}, metricArgs(&l.Metrics)...)
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return 0, fmt.Errorf("level %s@%d: %w", l.Mode, l.Concurrency, err)
		}
	}
	return id, nil
}

// DeleteSet removes the set called name and its levels.
func (db *DB) DeleteSet(ctx context.Context, name string) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM baseline_sets WHERE name = ?", name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("baseline set %q: %w", name, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: delete: %w", err)
	}
	return nil
}
