package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"github.com/kvlens/kvlens/internal/clocktest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestSnapshotJSONGolden pins the snapshot's JSON shape, which the dashboard
// and the sweep runner read: a deterministic mix of successes on two workers
// and failures of three classes, on a virtual clock.
func TestSnapshotJSONGolden(t *testing.T) {
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	cfg := testConfig(10)
	cfg.Clock = clk
	g, err := New(newGate(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	for i := range 40 {
		w := []string{"worker-a", "worker-b"}[i%2]
		ttft := time.Duration(100+10*i) * time.Millisecond
		g.window.ObserveFirstToken(w, ttft)
		g.window.ObserveDone(Result{
			TTFT: ttft, E2E: ttft + time.Duration(99*(20+i%30))*time.Millisecond, OSL: 100, FirstChunkTokens: 1,
			ISL: 4000, CachedTokens: 3000 + 20*i, Worker: w,
			ChunkGaps: []time.Duration{20 * time.Millisecond, 21 * time.Millisecond},
		})
	}
	for i, c := range []ErrorClass{ErrHTTP503, ErrHTTP503, ErrHTTP429, ErrStream} {
		w := []string{"worker-a", "worker-b"}[i%2]
		g.window.ObserveDone(Result{Err: errors.New(string(c)), Class: c, Worker: w})
	}
	got, err := json.MarshalIndent(g.Snapshot(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "snapshot.golden.json")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Fatalf("snapshot JSON differs from %s (run with -update if the change is intended):\n%s", path, got)
	}
}
