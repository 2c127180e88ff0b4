package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
)

// TestMain lets the crash test run a writer in a subprocess: when
// KVLENS_STORE_WRITER names a database, this test binary becomes a process
// that stores sweep levels in a loop and reports each commit on stdout.
func TestMain(m *testing.M) {
	if path := os.Getenv("KVLENS_STORE_WRITER"); path != "" {
		os.Exit(writer(path))
	}
	if path := os.Getenv("KVLENS_STORE_RECORDER"); path != "" {
		os.Exit(recorder(path))
	}
	os.Exit(m.Run())
}

func writer(path string) int {
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	run, _ := strconv.ParseInt(os.Getenv("KVLENS_STORE_RUN"), 10, 64)
	for i := 1; ; i++ {
		if err := db.SaveRunLevel(ctx, run, level(1, "kv", i)); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("saved", i) // stdout is unbuffered: the parent sees it now
		// A sweep writes a level every few minutes; a writer committing in
		// a tight loop would starve the parent's writes past the busy
		// timeout, since SQLite's busy handler polls rather than queues.
		time.Sleep(2 * time.Millisecond)
	}
}

func level(repeat int, mode string, c int) baselines.RunLevel {
	e := float64(c) / 1000
	return baselines.RunLevel{Repeat: repeat, Level: baselines.Level{Concurrency: c, Mode: mode, Metrics: baselines.Metrics{
		TTFTP50: float64(c), TTFTP95: float64(2 * c), KVHitRate: new(50.0), TOPS: 1000.5, TPOTP50: 20, TPOTP95: 30,
		LatencyP50: 1e4, LatencyP95: 2e4, ErrorPct: &e,
	}}}
}

func open(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "kvlens.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func TestOpenImportsTheBuiltinSetsOnce(t *testing.T) {
	ctx := context.Background()
	db, path := open(t)
	builtin, err := baselines.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	sets, err := db.Sets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != len(builtin) {
		t.Fatalf("%d sets after first open, want the %d built-in ones", len(sets), len(builtin))
	}
	for i, si := range sets {
		if !si.Builtin || si.Name != builtin[i].Name || si.Levels != len(builtin[i].Levels) {
			t.Errorf("set %d = %+v, want built-in %q with %d levels", i, si, builtin[i].Name, len(builtin[i].Levels))
		}
		got, err := db.Set(ctx, si.Name)
		if err != nil {
			t.Fatal(err)
		}
		got.CreatedAt = time.Time{}
		if !reflect.DeepEqual(got, builtin[i]) {
			t.Errorf("stored %q differs from the built-in set", si.Name)
		}
	}
	if got := sets[0].Modes; !reflect.DeepEqual(got, []string{"round_robin", "kv"}) {
		t.Errorf("modes = %v, want round_robin then kv", got)
	}
	var names []string
	for _, b := range builtin {
		names = append(names, b.Name)
	}
	if got := db.Imported(); !reflect.DeepEqual(got, names) {
		t.Errorf("first open says it imported %q, want every built-in set %q", got, names)
	}

	// A deleted built-in set stays deleted, and nothing is imported twice.
	if err := db.DeleteSet(ctx, builtin[0].Name); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if got := db2.Imported(); len(got) != 0 {
		t.Errorf("reopening says it imported %q, want nothing", got)
	}
	sets, _ = db2.Sets(ctx)
	if len(sets) != len(builtin)-1 {
		t.Fatalf("%d sets after reopening, want %d", len(sets), len(builtin)-1)
	}
	if v, _ := db2.Check(ctx); v != "ok" {
		t.Fatalf("integrity check: %s", v)
	}
}

func TestSaveSet(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	rps := 10.0
	set := baselines.Set{Name: "lab", Source: "sweep 1", Deployment: "3 sim", Method: "m", Generated: "g", Metric: "w", TargetRPS: &rps,
		Levels: []baselines.Level{level(1, "round_robin", 80).Level, level(1, "round_robin", 60).Level, level(1, "kv", 60).Level}}
	set.Levels[0].Repeats = 2
	set.Levels[0].Spread = &baselines.Metrics{TTFTP95: 3.5}
	if _, err := db.SaveSet(ctx, &set, false); err != nil {
		t.Fatal(err)
	}

	t.Run("a stored set reads back whole, in its own order", func(t *testing.T) {
		got, err := db.Set(ctx, "lab")
		if err != nil {
			t.Fatal(err)
		}
		if got.CreatedAt.IsZero() {
			t.Error("no creation time")
		}
		got.CreatedAt = time.Time{}
		if !reflect.DeepEqual(got, set) {
			t.Fatalf("got %+v\nwant %+v", got, set)
		}
	})
	t.Run("a second set of the same name is refused", func(t *testing.T) {
		_, err := db.SaveSet(ctx, &set, false)
		if !errors.Is(err, ErrExists) {
			t.Fatalf("err = %v, want ErrExists", err)
		}
	})
	t.Run("a failed replacement leaves the old set as it was", func(t *testing.T) {
		bad := set
		bad.Levels = append([]baselines.Level{level(1, "kv", 100).Level}, set.Levels...)
		bad.Levels[2].Spread = &baselines.Metrics{TTFTP95: math.NaN()} // cannot be stored as JSON
		if _, err := db.SaveSet(ctx, &bad, true); err == nil {
			t.Fatal("saved a set with a NaN spread")
		}
		got, err := db.Set(ctx, "lab")
		if err != nil || len(got.Levels) != len(set.Levels) {
			t.Fatalf("after the failed replace: %d levels, %v; want the original %d", len(got.Levels), err, len(set.Levels))
		}
	})
	t.Run("a replacement replaces the set whole", func(t *testing.T) {
		repl := set
		repl.Levels = repl.Levels[:1]
		if _, err := db.SaveSet(ctx, &repl, true); err != nil {
			t.Fatal(err)
		}
		got, _ := db.Set(ctx, "lab")
		if len(got.Levels) != 1 {
			t.Fatalf("%d levels after replace, want 1", len(got.Levels))
		}
	})
	t.Run("an unknown set is ErrNotFound, to read and to delete", func(t *testing.T) {
		if _, err := db.Set(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Set: %v", err)
		}
		if err := db.DeleteSet(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteSet: %v", err)
		}
	})
	t.Run("an invalid set is refused before any write", func(t *testing.T) {
		dup := baselines.Set{Name: "dup", Levels: []baselines.Level{level(1, "kv", 60).Level, level(1, "kv", 60).Level}}
		if _, err := db.SaveSet(ctx, &dup, false); err == nil || !strings.Contains(err.Error(), "repeats concurrency 60") {
			t.Fatalf("err = %v", err)
		}
		if _, err := db.Set(ctx, "dup"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the invalid set was stored: %v", err)
		}
	})
}

func TestSettings(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	if _, ok, err := db.Setting(ctx, "slo_ttft"); ok || err != nil {
		t.Fatalf("unset setting: ok=%v err=%v", ok, err)
	}
	for _, v := range []string{"600ms", "500ms"} {
		if err := db.SetSetting(ctx, "slo_ttft", v); err != nil {
			t.Fatal(err)
		}
		if got, ok, _ := db.Setting(ctx, "slo_ttft"); !ok || got != v {
			t.Fatalf("setting = %q, %v; want %q", got, ok, v)
		}
	}
}

func TestRuns(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	id, err := db.CreateRun(ctx, []byte(`{"levels":[60,80]}`), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []baselines.RunLevel{level(1, "round_robin", 60), level(1, "round_robin", 80), level(1, "kv", 60)}
	for _, rl := range want {
		if err := db.SaveRunLevel(ctx, id, rl); err != nil {
			t.Fatal(err)
		}
	}
	r, err := db.LastUnfinishedRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != id || r.Done != 3 || r.Total != 4 || r.Status != RunRunning || string(r.Config) != `{"levels":[60,80]}` {
		t.Fatalf("run = %+v", r)
	}
	got, err := db.RunLevels(ctx, id)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("levels = %+v, %v; want %+v", got, err, want)
	}
	if err := db.FinishRun(ctx, id, RunDone, "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LastUnfinishedRun(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a done run is still unfinished: %v", err)
	}
	if r, _ := db.Run(ctx, id); r.Status != RunDone || r.SetID != 1 {
		t.Fatalf("finished run = %+v", r)
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("this is not sqlite\n", 300)), 0o644)
	dangling := filepath.Join(dir, "dangling.db")
	os.Symlink(filepath.Join(dir, "gone", "x.db"), dangling)
	db, path := open(t)
	db.db.Exec("PRAGMA user_version = 99")
	db.Close()
	tests := []struct {
		name, path, want string
	}{
		{"a file that is not a database", junk, "not a database"},
		{"a database from a newer kvlens", path, "schema version 99 is newer"},
		{"a path with a query string", filepath.Join(dir, "a?mode=ro"), "must not contain"},
		{"an empty path", "", "empty database path"},
		{"a directory is not taken for a damaged file", dir, "is a directory: give the path of a database file, such as " + filepath.Join(dir, "kvlens.db")},
		{"a file SQLite cannot open is not taken for a damaged one", dangling, "store: cannot open " + dangling + " (SQLite: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(ctx, tt.path)
			if err == nil {
				db.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDefaultPathFollowsXDG(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data")
	if got, _ := DefaultPath(); got != filepath.Join("/data", "kvlens", "kvlens.db") {
		t.Fatalf("DefaultPath = %s", got)
	}
	t.Setenv("XDG_DATA_HOME", "relative") // the XDG spec says to ignore it
	t.Setenv("HOME", "/home/u")
	if got, _ := DefaultPath(); got != "/home/u/.local/share/kvlens/kvlens.db" {
		t.Fatalf("DefaultPath = %s", got)
	}
}

// TestKillDuringWritesLosesNothingCommitted kills a writing process with
// SIGKILL at several moments while this process writes to the same file too,
// then checks that the file is sound and holds every level the writer said it
// had committed.
func TestKillDuringWritesLosesNothingCommitted(t *testing.T) {
	ctx := context.Background()
	db, path := open(t)
	run, err := db.CreateRun(ctx, []byte(`{}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, after := range []int{1, 7, 40} {
		t.Run(fmt.Sprintf("killed after %d commits", after), func(t *testing.T) {
			// Each round writes its own run, so counts do not mix.
			if i > 0 {
				if run, err = db.CreateRun(ctx, []byte(`{}`), 0); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "KVLENS_STORE_WRITER="+path, fmt.Sprintf("KVLENS_STORE_RUN=%d", run))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			last := 0
			for last < after && lines.Scan() {
				// A second process writing at the same time must work too.
				if err := db.SetSetting(ctx, "parent", lines.Text()); err != nil {
					t.Errorf("parent write while the child writes: %v", err)
				}
				if _, err := fmt.Sscanf(lines.Text(), "saved %d", &last); err != nil {
					t.Fatalf("child said %q", lines.Text())
				}
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			db2, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			if v, err := db2.Check(ctx); v != "ok" || err != nil {
				t.Fatalf("integrity check: %q, %v", v, err)
			}
			got, err := db2.RunLevels(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			// Every reported commit is there; at most the writes in flight
			// after the last report (which may or may not have committed)
			// are beyond it, and levels are never half-written.
			if len(got) < last {
				t.Fatalf("%d levels survived, the writer had committed %d", len(got), last)
			}
			for j, rl := range got {
				if want := level(1, "kv", j+1); !reflect.DeepEqual(rl, want) {
					t.Fatalf("level %d = %+v, want %+v", j, rl, want)
				}
			}
		})
	}
}
