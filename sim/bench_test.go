package sim_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tokenizer"
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

// TestAFollowUpTurnReusesTheAnswersBlocks sends one conversation's turns
// back to the worker that answered them, as a client does: the answer's
// text, rendered into the next prompt, must encode to the very tokens the
// engine generated, or a profile that keeps generated blocks would still
// prefill every answer again.
func TestAFollowUpTurnReusesTheAnswersBlocks(t *testing.T) {
	starter := loadgen.BuiltinStarters()[0]
	tests := []struct {
		name string
		keep bool
		// maxNew bounds the uncached prompt tokens of each follow-up turn.
		minNew, maxNew int
	}{
		{"with generated blocks kept, a follow-up prefills only its question and the answer's last partial block",
			true, 1, 80},
		{"with prompt blocks only, a follow-up prefills the whole previous answer",
			false, 600, 1200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := sim.MustProfile(sim.DefaultProfile)
			p.KeepGeneratedBlocks = tt.keep
			eng, err := sim.NewEngine(p, sim.Options{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			msgs := []tokenizer.Message{
				{Role: "system", Content: "You are a knowledgeable assistant."},
				{Role: "user", Content: "Please explain the following text.\n\n" + starter.Text},
			}
			for turn := range 4 {
				prompt := tokenizer.Encode(tokenizer.RenderChat(msgs))
				if err := eng.Submit(sim.Request{ID: uint64(turn + 1), Prompt: prompt, MaxTokens: 1024}); err != nil {
					t.Fatal(err)
				}
				var answer strings.Builder
				var fin sim.Finished
				for !eng.Idle() {
					r := eng.Step()
					for _, tok := range r.Tokens {
						answer.WriteString(sim.PieceText(tok.Token))
					}
					for _, f := range r.Finished {
						fin = f
					}
				}
				if newTokens := fin.PromptTokens - fin.CachedTokens; turn > 0 && (newTokens < tt.minNew || newTokens > tt.maxNew) {
					t.Fatalf("turn %d: %d of %d prompt tokens uncached, want %d..%d", turn, newTokens, fin.PromptTokens, tt.minNew, tt.maxNew)
				}
				msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: answer.String()},
					tokenizer.Message{Role: "user", Content: "Can you elaborate further on that?"})
			}
		})
	}
}

// TestMultiTurnRefusesWhatItCannotMeasure: each conversation keeps its
// history, so a hundred million of them grew the process by gigabytes a
// second before a step ran; a NaN start rate ran unpaced without a word, and
// a negative warmup or an empty measure printed a table of zeros and NaN.
func TestMultiTurnRefusesWhatItCannotMeasure(t *testing.T) {
	starters := []sim.Starter{{Topic: "t", Text: "Tell me about caches."}}
	base := sim.MultiTurnConfig{
		Profile: sim.MustProfile(sim.DefaultProfile), Workers: 3, MaxTokens: 64,
		MinTurns: 1, MaxTurns: 1, StartRate: 10, Measure: time.Second, Starters: starters, Seed: 1,
	}
	for _, tt := range []struct {
		name    string
		change  func(*sim.MultiTurnConfig)
		wantErr string
	}{
		{"as many conversations as the load generator drives run", func(c *sim.MultiTurnConfig) { c.Concurrency = loadgen.MaxConcurrency }, ""},
		{"a hundred million conversations are refused in one line", func(c *sim.MultiTurnConfig) { c.Concurrency = 100_000_000 }, "sim: 100000000 conversations: at most 10000"},
		{"a start rate that is not a number is refused", func(c *sim.MultiTurnConfig) { c.StartRate = math.NaN() }, "sim: start rate NaN: need 0 (unpaced) or a finite rate"},
		{"a negative warmup is refused", func(c *sim.MultiTurnConfig) { c.Warmup = -time.Minute }, "warmup -1m0s must not be negative"},
		{"an empty measure is refused", func(c *sim.MultiTurnConfig) { c.Measure = 0 }, "measure 0s must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Concurrency = 5
			tt.change(&c)
			_, err := sim.MultiTurn(c)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestOfflineReportsItsProgress: OnFinish sees the count of finished
// requests rise to every one of them, and watching changes nothing.
func TestOfflineReportsItsProgress(t *testing.T) {
	cfg := sim.OfflineConfig{Profile: sim.MustProfile(sim.DefaultProfile), ISL: 200, OSL: 20, Requests: 50, Concurrency: 8}
	want, err := sim.Offline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	cfg.OnFinish = func(n int) { seen = append(seen, n) }
	got, err := sim.Offline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("watched, the run measured %+v; unwatched, %+v", got, want)
	}
	if len(seen) < 2 || seen[len(seen)-1] != cfg.Requests {
		t.Fatalf("OnFinish saw %v: want a rising count ending at %d", seen, cfg.Requests)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("OnFinish saw %v: %d after %d", seen, seen[i], seen[i-1])
		}
	}
}
