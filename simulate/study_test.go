//go:build !race

package simulate

import (
	"context"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/router"
)

// TestStudyRunsEachArmAtEachWorkerCount runs a small scaling study past
// the batch slots (80 conversations a worker, 64 slots): a row per arm and
// worker count, in that order, at perWorker × N conversations; the arm that
// queues sheds nothing and the arm that sheds does, and sheds only what it
// refused.
func TestStudyRunsEachArmAtEachWorkerCount(t *testing.T) {
	arms := []Arm{{Policy: "round_robin", Admission: router.AdmitQueue}, {Policy: "kv", Admission: router.AdmitShed}}
	rows, err := Study(context.Background(), smallConfig(1), arms, []int{1, 2}, 80, baselines.DefaultSLO, 20*time.Second, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 2 arms × 2 worker counts", len(rows))
	}
	for i, r := range rows {
		n, arm := []int{1, 2}[i/2], arms[i%2]
		if r.Workers != n || r.Arm != arm || r.Concurrency != 80*n || r.Level.Concurrency != 80*n {
			t.Errorf("row %d: %+v at %d workers, %d conversations; want %+v at %d and %d", i, r.Arm, r.Workers, r.Concurrency, arm, n, 80*n)
		}
		if r.Level.TTFTP95 <= 0 || r.GoodputPerSec < 0 {
			t.Errorf("row %d: TTFT p95 %.0f ms, goodput %.2f: not measured", i, r.Level.TTFTP95, r.GoodputPerSec)
		}
		switch {
		case arm.Admission == router.AdmitQueue && r.ShedPct != 0:
			t.Errorf("row %d: the queueing arm shed %.1f%%", i, r.ShedPct)
		case arm.Admission == router.AdmitShed && !(r.ShedPct > 0 && r.ShedPct < 100):
			t.Errorf("row %d: the shedding arm shed %.1f%% past its batch slots, want some", i, r.ShedPct)
		}
	}
}
