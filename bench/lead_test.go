//go:build !race

// The race detector slows a simulation about tenfold, and these runs are
// deterministic: make unit runs this file without it.

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/sim"
)

// TestKVLeadsOnEveryWorkload pins, per workload of the suite, kv's lead over
// the policy that came next at one level (seed 1, kvlens bench routing's
// defaults: 3 workers, each workload's warmup, 2 minutes measured), so that
// a change that costs kv its lead fails here. The figures in each case's
// name are seed 1's in docs/routing-bench-full.json, and the rival is the
// policy that came next there; docs/routing.md has the whole grid.
func TestKVLeadsOnEveryWorkload(t *testing.T) {
	tests := []struct {
		name     string
		workload string
		level    int
		rival    string
	}{
		{"chat at 60: kv 361 ms against least-loaded's 376", "chat", 60, "least_loaded"},
		{"think at 80: kv 367 ms against llm-d's 398", "think", 80, "llmd"},
		{"long at 140: kv 594 ms against tuned Dynamo's 625", "long", 140, "dynamo_tuned"},
		{"shared-prefix at 40: kv 356 ms against least-loaded's 375", "shared-prefix", 40, "least_loaded"},
		{"open-loop at 180: kv 1.9 s against Dynamo's 3.4 s", "open-loop", 180, "dynamo"},
		{"agentic at 140: kv 586 ms against llm-d's 606", "agentic", 140, "llmd"},
		{"reading at 100: kv 282 ms against llm-d's 318", "reading", 100, "llmd"},
		{"trace at 80: kv 465 ms against round-robin's 546", "trace", 80, "round_robin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := Grid{
				Policies: []string{tt.rival, "kv"}, Workloads: workloads(t, tt.workload), Levels: []int{tt.level},
				Seeds: []uint64{1}, Workers: 3, Profile: sim.MustProfile(sim.DefaultProfile),
				Measure: 2 * time.Minute, SLO: baselines.DefaultSLO, Parallel: 1,
			}
			res, err := Execute(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			rival, kv := res.Runs[0], res.Runs[1]
			if kv.TTFTP95 >= rival.TTFTP95 {
				t.Errorf("kv's TTFT p95 is %.0f ms, %s's %.0f ms: kv lost its lead", kv.TTFTP95, tt.rival, rival.TTFTP95)
			}
			t.Logf("kv %.0f ms (hit %.1f%%, oracle %.1f%%), %s %.0f ms", kv.TTFTP95, kv.HitRate, kv.OracleHitRate, tt.rival, rival.TTFTP95)
		})
	}
}
