package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/kvlens/kvlens/baselines"
)

// TestMigrationKeepsHitRatesAndLetsThemBeUnknown takes a database written
// by the schema before version 4, where a hit rate could not be left out,
// to the current one: its rows keep every figure, and a level whose workers
// reported no cached tokens is then stored and read back as unknown.
func TestMigrationKeepsHitRatesAndLetsThemBeUnknown(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:3] {
		if _, err := old.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`PRAGMA user_version = 3`,
		`INSERT INTO baseline_sets (id, name, source, deployment, created_at) VALUES (7, 'old', 'file', 'd', '2026-11-01T00:00:00Z')`,
		`INSERT INTO baseline_levels (set_id, mode, concurrency, ttft_p50_ms, ttft_p95_ms, kv_hit_rate_pct, tops, tpot_p50_ms, tpot_p95_ms,
			latency_p50_ms, latency_p95_ms, goodput, position, oracle_hit_rate_pct) VALUES (7, 'kv', 60, 250, 450, 91.5, 2200, 26, 30, 20000, 30000, 1.5, 0, 99.1)`,
		`INSERT INTO sweep_runs (id, config, status, steps_total, started_at, updated_at) VALUES (3, '{}', 'running', 2, 't', 't')`,
		`INSERT INTO sweep_levels (run_id, repeat, mode, concurrency, ttft_p50_ms, ttft_p95_ms, kv_hit_rate_pct, tops, tpot_p50_ms, tpot_p95_ms,
			latency_p50_ms, latency_p95_ms, finished_at) VALUES (3, 1, 'kv', 60, 250, 450, 0, 2200, 26, 30, 20000, 30000, '2026-11-01T00:00:00Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	old.Close()

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	set, err := db.Set(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	unknown := baselines.RunLevel{Repeat: 1, Level: baselines.Level{Mode: "kv", Concurrency: 80, Metrics: baselines.Metrics{
		TTFTP50: 300, TTFTP95: 500, TOPS: 2500, TPOTP50: 29, TPOTP95: 33, LatencyP50: 21000, LatencyP95: 31000}}}
	if err := db.SaveRunLevel(ctx, 3, unknown); err != nil {
		t.Fatalf("a level with no hit rate: %v", err)
	}
	levels, err := db.RunLevels(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	var version int
	if err := db.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	l := set.Levels[0]
	tests := []struct {
		name string
		ok   bool
	}{
		{"the database reaches the current version", version == SchemaVersion},
		{"a stored set's hit rate and oracle survive", l.KVHitRate != nil && *l.KVHitRate == 91.5 && l.OracleHitRate != nil && *l.OracleHitRate == 99.1},
		{"a stored set's other figures survive", l.TTFTP95 == 450 && l.TOPS == 2200 && l.Goodput != nil && *l.Goodput == 1.5},
		{"a stored sweep level survives", len(levels) == 2 && levels[0].KVHitRate != nil && *levels[0].KVHitRate == 0},
		{"a level with no hit rate reads back as unknown, not 0", len(levels) == 2 && levels[1].Concurrency == 80 && levels[1].KVHitRate == nil},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: set level %+v, run levels %+v, version %d", tt.name, l, levels, version)
		}
	}
}
