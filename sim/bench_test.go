package sim_test

import (
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

// TestSeedWorkloadHitsTheCacheAsSeed000Did checks the workload half of the
// seed 000 comparison. Seed 000's client named no sampling parameter
// (TensorRT-LLM then decodes greedily) and asked the fixed fallback
// question, so conversations with one starter repeated each other's
// prompts and round-robin still hit the cache 99.7% of the time at 40
// conversations. Sampled answers and varied questions cannot do that.
func TestSeedWorkloadHitsTheCacheAsSeed000Did(t *testing.T) {
	if testing.Short() {
		t.Skip("runs minutes of virtual time")
	}
	var starters []sim.Starter
	for _, s := range loadgen.BuiltinStarters() {
		starters = append(starters, sim.Starter{Topic: s.Topic, Text: s.Text})
	}
	tests := []struct {
		name           string
		greedy         bool
		followUp       string
		minHit, maxHit float64
	}{
		{"greedy answers and one fixed question repeat prompts across conversations",
			true, "Can you elaborate further on that?", 0.97, 1},
		{"sampled answers and varied questions hit only the shared starters and same-worker turns",
			false, "", 0.6, 0.9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := sim.MultiTurn(sim.MultiTurnConfig{
				Profile: sim.MustProfile(sim.DefaultProfile), Workers: 3, Concurrency: 24,
				MaxTokens: 1024, MinTurns: 3, MaxTurns: 5, StartRate: 10,
				Warmup: 4 * time.Minute, Measure: 4 * time.Minute, Starters: starters,
				FollowUp: tt.followUp, Greedy: tt.greedy, Seed: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests < 50 {
				t.Fatalf("only %d requests measured, too few to mean anything", r.Requests)
			}
			t.Logf("hit rate %.1f%% over %d requests", 100*r.HitRate, r.Requests)
			if r.HitRate < tt.minHit || r.HitRate > tt.maxHit {
				t.Fatalf("hit rate %.1f%%, want %.0f%%..%.0f%%", 100*r.HitRate, 100*tt.minHit, 100*tt.maxHit)
			}
		})
	}
}
