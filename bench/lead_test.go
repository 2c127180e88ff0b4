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
// name are what kvlens bench routing --seeds 1 measured when the case was
// written; docs/routing.md has the whole grid.
func TestKVLeadsOnEveryWorkload(t *testing.T) {
	tests := []struct {
		name     string
		workload string
		level    int
		rival    string
	}{
		{"chat at 60: kv 319 ms against llm-d's 330", "chat", 60, "llmd"},
		{"think at 120: kv 434 ms against SGLang's 472", "think", 120, "sglang"},
		{"long at 60: kv 351 ms against least-loaded's 357", "long", 60, "least_loaded"},
		{"shared-prefix at 60: kv 356 ms against least-loaded's 370", "shared-prefix", 60, "least_loaded"},
		{"open-loop at 180: kv 4.4 s against llm-d's 5.6 s", "open-loop", 180, "llmd"},
		{"agentic at 120: kv 598 ms against llm-d's 742", "agentic", 120, "llmd"},
		{"reading at 40: kv 230 ms against SGLang's 255", "reading", 40, "sglang"},
		{"trace at 80: kv 484 ms against Dynamo 0.9's 635", "trace", 80, "dynamo"},
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
