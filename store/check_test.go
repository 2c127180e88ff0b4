package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// record stores n frames of a 1 Hz recording in one batch, and checkpoints
// them into the file. Each frame's body varies as a live snapshot's does, so
// that an hour (3600 frames) takes about what a booth session adds to the
// store.
func record(tb testing.TB, db *DB, n int) {
	tb.Helper()
	ctx := context.Background()
	id, err := db.CreateRecording(ctx, "a session", []byte(`{}`))
	if err != nil {
		tb.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000)
	rng := rand.New(rand.NewPCG(1, 2))
	frames := make([]Frame, n)
	for i := range frames {
		var w strings.Builder
		for j := range 12 {
			fmt.Fprintf(&w, `{"worker":%d,"kv_usage":%.4f,"running":%d},`, j, rng.Float64(), rng.IntN(64))
		}
		body := fmt.Sprintf(`{"ttft_p95_ms":%.1f,"workers":[%s{}]}`, rng.Float64()*900, w.String())
		frames[i] = Frame{T: t0.Add(time.Duration(i) * time.Second), Kind: "snapshot", Body: []byte(body)}
	}
	if err := db.AppendFrames(ctx, id, frames); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		tb.Fatal(err)
	}
}

func TestOpenRefusesADamagedFile(t *testing.T) {
	const page = 4096 // SQLite's default page size
	tests := []struct {
		name string
		// damage changes the closed database file of n bytes.
		damage func(b []byte) []byte
		// wantErr is in the one-line error; empty means the store opens.
		wantErr string
	}{
		{"a sound store opens", func(b []byte) []byte { return b }, ""},

		// Sad path.
		{"a page of garbage in the middle of the file is found at open", func(b []byte) []byte {
			mid := len(b) / page / 2 * page
			copy(b[mid:mid+page], bytes.Repeat([]byte{0xa5}, page))
			return b
		}, "is damaged (SQLite quick_check:"},
		{"a page of zeros in the middle of the file is found at open", func(b []byte) []byte {
			mid := len(b) / page / 2 * page
			clear(b[mid : mid+page])
			return b
		}, "is damaged (SQLite quick_check:"},
		{"a file cut in half is found at open", func(b []byte) []byte { return b[:len(b)/page/2*page] }, "is damaged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "kvlens.db")
			db, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			record(t, db, 300)
			db.Close()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			db, err = Open(ctx, path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("a sound store was refused: %v", err)
				}
				db.Close()
				return
			}
			if err == nil {
				db.Close()
				t.Fatal("a damaged store was opened")
			}
			msg := err.Error()
			for _, want := range []string{tt.wantErr, path, "move it aside"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

// BenchmarkOpen times opening a store that holds the built-in sets and the
// given hours of recordings, and the page check within it alone. Ten hours
// take a minute to build: KVLENS_BENCH_LARGE=1 adds them.
func BenchmarkOpen(b *testing.B) {
	hours := []int{0, 1}
	if os.Getenv("KVLENS_BENCH_LARGE") != "" {
		hours = append(hours, 10)
	}
	for _, h := range hours {
		ctx := context.Background()
		path := filepath.Join(b.TempDir(), "kvlens.db")
		db, err := Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		for range h {
			record(b, db, 3600)
		}
		db.Close()
		st, _ := os.Stat(path)
		b.Run(fmt.Sprintf("%dh-of-recordings/open", h), func(b *testing.B) {
			b.ReportMetric(float64(st.Size())/1e6, "MB")
			for range b.N {
				db, err := Open(ctx, path)
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
		b.Run(fmt.Sprintf("%dh-of-recordings/quick_check", h), func(b *testing.B) {
			db, err := Open(ctx, path)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			b.ResetTimer()
			for range b.N {
				if err := db.quickCheck(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
