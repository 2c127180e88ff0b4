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
// the policy that came next at one level (kvlens bench routing's defaults:
// 3 workers, each workload's warmup, 2 minutes measured), so that a change
// that costs kv its lead fails here. The figures in each case's name are
// docs/routing-bench-full.json's, and the rival is the policy that came
// next there: in seed 1, or, on the chat and long chats, where
// sglang_events and kv trade places from seed to seed below saturation
// (docs/routing.md), in the mean of seeds 1-5.
func TestKVLeadsOnEveryWorkload(t *testing.T) {
	one, five := []uint64{1}, []uint64{1, 2, 3, 4, 5}
	tests := []struct {
		name     string
		workload string
		level    int
		rival    string
		seeds    []uint64
	}{
		{"chat at 160, seeds 1-5: kv 545 ms against least-loaded's 558", "chat", 160, "least_loaded", five},
		{"think at 180: kv 552 ms against SGLang with events' 561", "think", 180, "sglang_events", one},
		{"long at 160, seeds 1-5: kv 562 ms against least-loaded's 570", "long", 160, "least_loaded", five},
		{"shared-prefix at 180: kv 613 ms against least-loaded's 625", "shared-prefix", 180, "least_loaded", one},
		{"open-loop at 160: kv 572 ms against llm-d's 638", "open-loop", 160, "llmd", one},
		{"agentic at 120: kv 563 ms against SGLang with events' 572", "agentic", 120, "sglang_events", one},
		{"reading at 60: kv 300 ms against SGLang with events' 313", "reading", 60, "sglang_events", one},
		{"trace at 120: kv 589 ms against SGLang with events' 680", "trace", 120, "sglang_events", one},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := Grid{
				Policies: []string{tt.rival, "kv"}, Workloads: workloads(t, tt.workload), Levels: []int{tt.level},
				Seeds: tt.seeds, Workers: 3, Profile: sim.MustProfile(sim.DefaultProfile),
				Measure: 2 * time.Minute, SLO: baselines.DefaultSLO, Parallel: 1,
			}
			res, err := Execute(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			var rival, kv float64
			for _, r := range res.Runs {
				if r.Policy == "kv" {
					kv += r.TTFTP95 / float64(len(tt.seeds))
				} else {
					rival += r.TTFTP95 / float64(len(tt.seeds))
				}
			}
			if kv >= rival {
				t.Errorf("kv's TTFT p95 is %.0f ms, %s's %.0f ms: kv lost its lead", kv, tt.rival, rival)
			}
			t.Logf("kv %.0f ms, %s %.0f ms", kv, tt.rival, rival)
		})
	}
}
