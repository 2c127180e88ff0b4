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
		{"chat at 160: kv 577 ms against least-loaded's 591", "chat", 160, "least_loaded"},
		{"think at 120: kv 440 ms against llm-d's 474", "think", 120, "llmd"},
		{"long at 160: kv 572 ms against least-loaded's 603", "long", 160, "least_loaded"},
		{"shared-prefix at 80: kv 438 ms against least-loaded's 472", "shared-prefix", 80, "least_loaded"},
		{"open-loop at 160: kv 572 ms against llm-d's 638", "open-loop", 160, "llmd"},
		{"agentic at 140: kv 601 ms against SGLang's 633", "agentic", 140, "sglang"},
		{"reading at 60: kv 300 ms against SGLang's 332", "reading", 60, "sglang"},
		{"trace at 120: kv 589 ms against llm-d's 788", "trace", 120, "llmd"},
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
