package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/store"
)

func TestRecordingsCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvlens.db")
	ctx := context.Background()
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRecording(ctx, "booth", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AppendFrames(ctx, id, []store.Frame{{T: time.Unix(1_700_000_000, 0), Kind: "snapshot",
		Body: []byte(`{"mode":"kv","points":[{"ttft_p50":200,"ttft_p95":300,"tpot_p50":25,"tpot_p95":28,"tops":1500,"rps":2,"error_pct":0,"target":60,"live":60}]}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := db.EndRecording(ctx, id, time.Now().Add(10*time.Second)); err != nil { // started now
		t.Fatal(err)
	}
	// A second session that a running kvlens is still writing: no end, a
	// frame a moment ago.
	live, err := db.CreateRecording(ctx, "live", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AppendFrames(ctx, live, []store.Frame{{T: time.Now(), Kind: "snapshot", Body: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	t.Run("list gives a session's length and frames", func(t *testing.T) {
		out, code := exitCode(t, kvlens("recordings", "list", "--db", path))
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		for _, line := range strings.Split(out, "\n") {
			// ID NAME STARTED(date time) LENGTH FRAMES SIZE(number unit)
			if f := strings.Fields(line); len(f) == 8 && f[1] == "booth" {
				if f[0] != "1" || f[4] != "10s" || f[5] != "1" {
					t.Fatalf("booth's row = %q, want ID 1, length 10s and 1 frame", line)
				}
				return
			}
		}
		t.Fatalf("no row for booth:\n%s", out)
	})

	steps := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"list shows the session with its frames", []string{"recordings", "list", "--db", path}, 0, "booth"},
		{"CSV export writes a row per frame", []string{"recordings", "export", "1", "--db", path}, 0, "2023-11-14T22:13:20Z,snapshot,a,kv,60,60,200.0,300.0,25.0,28.0,1500.0,2.000,0.00,"},
		{"JSON export keeps the frame's body", []string{"recordings", "export", "--format", "json", "1", "--db", path}, 0, `"kind": "snapshot"`},
		{"an unknown format is a usage error", []string{"recordings", "export", "--format", "xml", "1", "--db", path}, 2, `--format "xml": want csv or json`},
		{"a non-numeric ID is a usage error", []string{"recordings", "export", "first", "--db", path}, 2, "is not a positive whole number"},
		{"a missing recording is a failure, named", []string{"recordings", "export", "99", "--db", path}, 1, "recording 99: no such recording"},
		{"delete removes it", []string{"recordings", "delete", "1", "--db", path}, 0, "deleted recording 1"},
		{"and it is gone", []string{"recordings", "delete", "1", "--db", path}, 1, "no such recording"},
		{"a session still being recorded is not deleted", []string{"recordings", "delete", "2", "--db", path}, 1, "recording 2 is still being recorded by a running kvlens: stop it first, or pass --force"},
		{"and is still listed", []string{"recordings", "list", "--db", path}, 0, "recording (another kvlens)"},
		{"--force deletes it anyway", []string{"recordings", "delete", "--force", "2", "--db", path}, 0, "deleted recording 2"},
		{"an unknown subcommand is a usage error", []string{"recordings", "play", "--db", path}, 2, `unknown command "play"`},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			out, code := exitCode(t, kvlens(st.args...))
			if code != st.wantCode || !strings.Contains(out, st.want) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d containing %q", code, out, st.wantCode, st.want)
			}
		})
	}
}
