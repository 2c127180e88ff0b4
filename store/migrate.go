package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are the schema's versions: migrations[i] takes the database from
// PRAGMA user_version i to i+1. They are append-only; a released one is never
// edited.
var migrations = []string{
	// 1: settings, baseline sets and their levels, sweep runs and their levels.
	`
CREATE TABLE settings (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;

CREATE TABLE baseline_sets (
	id          INTEGER PRIMARY KEY,
	name        TEXT NOT NULL UNIQUE,
	source      TEXT NOT NULL,
	deployment  TEXT NOT NULL,
	method      TEXT NOT NULL DEFAULT '',
	generated   TEXT NOT NULL DEFAULT '',  -- when measured, as the source wrote it
	metric      TEXT NOT NULL DEFAULT '',
	target_rps  REAL,
	builtin     INTEGER NOT NULL DEFAULT 0,
	created_at  TEXT NOT NULL              -- RFC 3339, UTC
) STRICT;

-- Units as in the seeds' reference JSON: ms, percent, tokens/s, requests/s.
CREATE TABLE baseline_levels (
	set_id          INTEGER NOT NULL REFERENCES baseline_sets(id) ON DELETE CASCADE,
	mode            TEXT NOT NULL,
	concurrency     INTEGER NOT NULL,
	ttft_p50_ms     REAL NOT NULL,
	ttft_p95_ms     REAL NOT NULL,
	kv_hit_rate_pct REAL NOT NULL,
	tops            REAL NOT NULL,
	tpot_p50_ms     REAL NOT NULL,
	tpot_p95_ms     REAL NOT NULL,
	latency_p50_ms  REAL NOT NULL,
	latency_p95_ms  REAL NOT NULL,
	error_pct       REAL,
	actual_rps      REAL,
	goodput         REAL,
	shed            REAL,
	repeats         INTEGER NOT NULL DEFAULT 0,
	spread          TEXT,                  -- JSON: sample standard deviations across repeats
	position        INTEGER NOT NULL,      -- order within the set
	PRIMARY KEY (set_id, mode, concurrency)
) STRICT;

CREATE TABLE sweep_runs (
	id          INTEGER PRIMARY KEY,
	config      TEXT NOT NULL,             -- JSON of baselines.SweepConfig
	status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
	steps_total INTEGER NOT NULL,          -- levels × modes × repeats
	error       TEXT NOT NULL DEFAULT '',
	set_id      INTEGER REFERENCES baseline_sets(id) ON DELETE SET NULL,
	started_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL
) STRICT;

CREATE TABLE sweep_levels (
	run_id          INTEGER NOT NULL REFERENCES sweep_runs(id) ON DELETE CASCADE,
	repeat          INTEGER NOT NULL,
	mode            TEXT NOT NULL,
	concurrency     INTEGER NOT NULL,
	ttft_p50_ms     REAL NOT NULL,
	ttft_p95_ms     REAL NOT NULL,
	kv_hit_rate_pct REAL NOT NULL,
	tops            REAL NOT NULL,
	tpot_p50_ms     REAL NOT NULL,
	tpot_p95_ms     REAL NOT NULL,
	latency_p50_ms  REAL NOT NULL,
	latency_p95_ms  REAL NOT NULL,
	error_pct       REAL,
	actual_rps      REAL,
	goodput         REAL,
	shed            REAL,
	finished_at     TEXT NOT NULL,
	PRIMARY KEY (run_id, repeat, mode, concurrency)
) STRICT;
`,
	// 2: recordings of live sessions, frame by frame, for replay and export.
	`
CREATE TABLE recordings (
	id         INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	config     TEXT NOT NULL,             -- JSON: how the session was set up
	started_at TEXT NOT NULL,             -- RFC 3339, UTC
	ended_at   TEXT NOT NULL DEFAULT ''   -- empty while recording, or after a crash
) STRICT;

-- One row per frame: a 1 Hz snapshot or an event (start/stop, concurrency
-- change, mode switch, fault). body is gzip-compressed JSON.
CREATE TABLE recording_frames (
	recording_id INTEGER NOT NULL REFERENCES recordings(id) ON DELETE CASCADE,
	seq          INTEGER NOT NULL,        -- order within the recording
	t_ms         INTEGER NOT NULL,        -- Unix milliseconds
	kind         TEXT NOT NULL,
	body         BLOB NOT NULL,
	PRIMARY KEY (recording_id, seq)
) STRICT, WITHOUT ROWID;
`,
	// 2: the oracle's best achievable hit rate beside each level's.
	`
ALTER TABLE baseline_levels ADD COLUMN oracle_hit_rate_pct REAL;
ALTER TABLE sweep_levels ADD COLUMN oracle_hit_rate_pct REAL;
`,
	// 4: a hit rate the workers did not report is NULL, not 0. SQLite
	// cannot drop a NOT NULL, so both level tables are rebuilt.
	`
CREATE TABLE baseline_levels_new (
	set_id          INTEGER NOT NULL REFERENCES baseline_sets(id) ON DELETE CASCADE,
	mode            TEXT NOT NULL,
	concurrency     INTEGER NOT NULL,
	ttft_p50_ms     REAL NOT NULL,
	ttft_p95_ms     REAL NOT NULL,
	kv_hit_rate_pct REAL,
	tops            REAL NOT NULL,
	tpot_p50_ms     REAL NOT NULL,
	tpot_p95_ms     REAL NOT NULL,
	latency_p50_ms  REAL NOT NULL,
	latency_p95_ms  REAL NOT NULL,
	error_pct       REAL,
	actual_rps      REAL,
	goodput         REAL,
	shed            REAL,
	repeats         INTEGER NOT NULL DEFAULT 0,
	spread          TEXT,
	position        INTEGER NOT NULL,
	oracle_hit_rate_pct REAL,
	PRIMARY KEY (set_id, mode, concurrency)
) STRICT;
INSERT INTO baseline_levels_new SELECT set_id, mode, concurrency, ttft_p50_ms, ttft_p95_ms,
	kv_hit_rate_pct, tops, tpot_p50_ms, tpot_p95_ms, latency_p50_ms, latency_p95_ms, error_pct,
	actual_rps, goodput, shed, repeats, spread, position, oracle_hit_rate_pct FROM baseline_levels;
DROP TABLE baseline_levels;
ALTER TABLE baseline_levels_new RENAME TO baseline_levels;

CREATE TABLE sweep_levels_new (
	run_id          INTEGER NOT NULL REFERENCES sweep_runs(id) ON DELETE CASCADE,
	repeat          INTEGER NOT NULL,
	mode            TEXT NOT NULL,
	concurrency     INTEGER NOT NULL,
	ttft_p50_ms     REAL NOT NULL,
	ttft_p95_ms     REAL NOT NULL,
	kv_hit_rate_pct REAL,
	tops            REAL NOT NULL,
	tpot_p50_ms     REAL NOT NULL,
	tpot_p95_ms     REAL NOT NULL,
	latency_p50_ms  REAL NOT NULL,
	latency_p95_ms  REAL NOT NULL,
	error_pct       REAL,
	actual_rps      REAL,
	goodput         REAL,
	shed            REAL,
	finished_at     TEXT NOT NULL,
	oracle_hit_rate_pct REAL,
	PRIMARY KEY (run_id, repeat, mode, concurrency)
) STRICT;
INSERT INTO sweep_levels_new SELECT run_id, repeat, mode, concurrency, ttft_p50_ms, ttft_p95_ms,
	kv_hit_rate_pct, tops, tpot_p50_ms, tpot_p95_ms, latency_p50_ms, latency_p95_ms, error_pct,
	actual_rps, goodput, shed, finished_at, oracle_hit_rate_pct FROM sweep_levels;
DROP TABLE sweep_levels;
ALTER TABLE sweep_levels_new RENAME TO sweep_levels;
`,
}

// SchemaVersion is the schema version this kvlens writes.
var SchemaVersion = len(migrations)

// migrate applies the migrations the database lacks, each in its own
// transaction together with its version number, so that a crash mid-way
// leaves the database at the last complete version.
func (db *DB) migrate(ctx context.Context) error {
	var v int
	if err := db.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v == len(migrations) {
		return nil // the usual case: no write lock needed
	}
	for {
		done, err := db.migrateOne(ctx)
		if err != nil || done {
			return err
		}
	}
}

func (db *DB) migrateOne(ctx context.Context) (done bool, err error) {
	err = db.tx(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		switch {
		case v > len(migrations):
			return fmt.Errorf("schema version %d is newer than this kvlens knows (%d): use a newer kvlens, or another --db", v, len(migrations))
		case v == len(migrations):
			done = true
			return nil
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1))
		return err
	})
	return done, err
}
