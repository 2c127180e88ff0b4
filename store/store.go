// Package store keeps kvlens's data in one SQLite file: baseline sets, sweep
// runs and their finished levels, and settings. It uses modernc.org/sqlite
// (pure Go) in WAL mode, so a second kvlens process can read and write the
// same file at once; writers wait up to BusyTimeout for each other.
//
// Every write is one transaction with synchronous=FULL: a process killed at
// any moment loses at most the write it was making, never one that returned.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/kvlens/kvlens/baselines"
)

// BusyTimeout is how long a write waits for another process's write to end
// before failing with "database is locked".
const BusyTimeout = 5 * time.Second

// ErrNotFound means no row has the name or id asked for.
var ErrNotFound = errors.New("not found")

// DB is an open kvlens database. Its methods are safe for concurrent use.
type DB struct {
	db   *sql.DB
	path string
	// imported names the built-in sets this Open added to the file.
	imported []string
}

// DefaultPath is where kvlens keeps its database when --db is not given:
// $XDG_DATA_HOME/kvlens/kvlens.db, else ~/.local/share/kvlens/kvlens.db on
// Linux and the BSDs, else kvlens/kvlens.db under os.UserConfigDir (such as
// ~/Library/Application Support on macOS and %AppData% on Windows).
func DefaultPath() (string, error) {
	if dir := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "kvlens", "kvlens.db"), nil
	}
	switch runtime.GOOS {
	case "darwin", "windows", "ios", "plan9":
		dir, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("store: no directory for the database (use --db): %w", err)
		}
		return filepath.Join(dir, "kvlens", "kvlens.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store: no directory for the database (use --db): %w", err)
	}
	return filepath.Join(home, ".local", "share", "kvlens", "kvlens.db"), nil
}

// Open opens the database at path, creating it and its directory if needed,
// brings its schema up to date, and imports the built-in baseline sets the
// first time.
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("store: database path %q: must not contain ? or #", path)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("store: %s is a directory: give the path of a database file, such as %s", path, filepath.Join(path, "kvlens.db"))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: create the database's directory: %w", err)
	}
	dsn := "file:" + path +
		fmt.Sprintf("?_pragma=busy_timeout(%d)", BusyTimeout.Milliseconds()) +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)" +
		"&_txlock=immediate" // take the write lock at BEGIN, so two writers queue instead of deadlocking
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := &DB{db: sdb, path: path}
	if err := db.quickCheck(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := db.importBuiltins(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return db, nil
}

// Imported names the built-in baseline sets that opening this store added
// to it: all of them the first time, none after.
func (db *DB) Imported() []string { return db.imported }

// Path is the database file's path.
func (db *DB) Path() string { return db.path }

// Close closes the database.
func (db *DB) Close() error { return db.db.Close() }

// Check runs SQLite's integrity check and returns its verdict, "ok" when the
// file is sound.
func (db *DB) Check(ctx context.Context) (string, error) {
	var verdict string
	err := db.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&verdict)
	return verdict, err
}

// quickCheck refuses a damaged file at open, so that a page broken in the
// middle of the file is reported once, with advice, rather than as a failed
// query whenever a sweep or a replay happens to read it. SQLite's
// quick_check reads every page but skips the index-to-table cross-checks of
// integrity_check. It costs 0.5 ms on a store of baselines and sweeps,
// 0.7 ms with an hour of recordings (1 MB) and 18 ms with ten (9.4 MB), on
// a 2-core host (BenchmarkOpen); recordings older than a week are pruned.
func (db *DB) quickCheck(ctx context.Context) error {
	var verdict string
	err := db.db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&verdict)
	switch {
	case err != nil && strings.Contains(err.Error(), "not a database"):
		return fmt.Errorf("store: open %s: %w", db.path, err)
	case err != nil && strings.Contains(err.Error(), "SQLITE_BUSY"):
		return fmt.Errorf("store: open %s: %w", db.path, friendly(err))
	case err != nil && strings.Contains(err.Error(), "unable to open database file"):
		// SQLITE_CANTOPEN: the file, or the journal beside it, could not
		// be opened or made; nothing says the file is damaged.
		return fmt.Errorf("store: cannot open %s (SQLite: %s): check that kvlens may read and write it and make files in its directory", db.path, strings.Join(strings.Fields(err.Error()), " "))
	case err != nil:
		verdict = err.Error()
	case verdict == "ok":
		return nil
	}
	verdict = strings.Join(strings.Fields(verdict), " ") // one line
	return fmt.Errorf("store: %s is damaged (SQLite quick_check: %s): move it aside and kvlens starts a new store there; `sqlite3 OLD.db .recover` may save what it held", db.path, verdict)
}

// tx runs f in one write transaction, committed if f returns nil.
func (db *DB) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return friendly(err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return friendly(err)
	}
	return friendly(tx.Commit())
}

// friendly turns SQLite's lock error into advice.
func friendly(err error) error {
	if err != nil && strings.Contains(err.Error(), "SQLITE_BUSY") {
		return fmt.Errorf("the database is busy: another kvlens process held it for more than %v: %w", BusyTimeout, err)
	}
	return err
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Setting returns the value stored under key, and whether there is one.
func (db *DB) Setting(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := db.db.QueryRowContext(ctx, "SELECT value FROM settings WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: read setting %s: %w", key, err)
	}
	return v, true, nil
}

// SetSetting stores value under key.
func (db *DB) SetSetting(ctx context.Context, key, value string) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO settings(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: write setting %s: %w", key, err)
	}
	return nil
}

// builtinSetting records which revision of the built-in sets was imported,
// so that a set the user deleted is not imported again on the next start.
const builtinSetting = "builtin_baselines_revision"

func (db *DB) importBuiltins(ctx context.Context) error {
	want := fmt.Sprint(baselines.BuiltinRevision)
	if got, ok, err := db.Setting(ctx, builtinSetting); err != nil || (ok && got == want) {
		return err
	}
	sets, err := baselines.Builtin()
	if err != nil {
		return err
	}
	var imported []string
	err = db.tx(ctx, func(tx *sql.Tx) error {
		imported = imported[:0]
		// Another process may have imported them while we looked.
		var got string
		err := tx.QueryRowContext(ctx, "SELECT value FROM settings WHERE key = ?", builtinSetting).Scan(&got)
		if err == nil && got == want {
			return nil
		}
		for i := range sets {
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM baseline_sets WHERE name = ?", sets[i].Name).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				if _, err := insertSet(ctx, tx, &sets[i], true); err != nil {
					return fmt.Errorf("import built-in set %q: %w", sets[i].Name, err)
				}
				imported = append(imported, sets[i].Name)
			}
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO settings(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", builtinSetting, want)
		return err
	})
	if err == nil {
		db.imported = imported
	}
	return err
}
