package store

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/kvlens/kvlens/baselines"
)

// fileSize checkpoints the WAL into the database file and returns its size.
func fileSize(b *testing.B, db *DB) int64 {
	b.Helper()
	if _, err := db.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(db.path)
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// BenchmarkSaveRunLevel times storing one finished sweep level (one
// synchronous transaction) and reports the bytes each stored level adds to
// the database file.
func BenchmarkSaveRunLevel(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, b.TempDir()+"/k.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	run, _ := db.CreateRun(ctx, []byte(`{}`), 0)
	before := fileSize(b, db)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := db.SaveRunLevel(ctx, run, level(1+i/1000, "kv", 1+i%1000)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(fileSize(b, db)-before)/float64(b.N), "bytes/level")
}

// BenchmarkSaveSet stores a 2-mode, 100-level baseline set per iteration
// and reports the bytes each baseline level adds to the file.
func BenchmarkSaveSet(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, b.TempDir()+"/k.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	set := baselines.Set{Source: "bench", Deployment: "3 sim"}
	for _, mode := range []string{"round_robin", "kv"} {
		for c := 1; c <= 100; c++ {
			set.Levels = append(set.Levels, level(1, mode, c).Level)
		}
	}
	before := fileSize(b, db)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		set.Name = fmt.Sprint("set ", i)
		if _, err := db.SaveSet(ctx, &set, false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(fileSize(b, db)-before)/float64(b.N*len(set.Levels)), "bytes/level")
}
