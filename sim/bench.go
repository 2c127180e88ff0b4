package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/tokenizer"
)

// The benchmarks below drive engines directly in virtual time: a step's
// duration is added to a clock, never slept, so ten simulated minutes take
// seconds.

// OfflineConfig is an offline throughput run, as trtllm-bench does it:
// every request has ISL random prompt tokens and exactly OSL output tokens,
// and Concurrency requests are kept in flight until Requests have run.
type OfflineConfig struct {
	Profile     Profile
	ISL, OSL    int
	Requests    int // 0 means 3,000
	Concurrency int // 0 means as many as the KV cache holds at full length
	Seed        uint64
	// OnFinish, if set, is called after each step that finishes requests,
	// with how many have finished so far, so that a caller can show
	// progress: a million requests take minutes.
	OnFinish func(finished int)
}

// OfflineResult is what an offline run measured.
type OfflineResult struct {
	// Concurrency is the number of requests kept in flight.
	Concurrency int
	// Requests is the number of requests run.
	Requests int
	// Elapsed is the virtual time the run took.
	Elapsed time.Duration
	// OutputTokensPerSec is output tokens over Elapsed, in tokens/s.
	OutputTokensPerSec float64
	// Steps is the number of engine steps.
	Steps uint64
	// Preemptions is the number of preemptions.
	Preemptions uint64
}

// KVConcurrency is how many requests of isl+osl tokens the profile's KV
// cache holds at once: the batch limit of an offline run.
func (p Profile) KVConcurrency(isl, osl int) int {
	return p.KVBlocks / ((isl + osl + p.BlockSize - 1) / p.BlockSize)
}

// Offline runs an offline throughput benchmark. The profile's batch limit
// is raised to the concurrency, as NVIDIA's published runs size the batch to
// the KV cache.
func Offline(cfg OfflineConfig) (OfflineResult, error) {
	p := cfg.Profile
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = p.KVConcurrency(cfg.ISL, cfg.OSL)
	}
	if cfg.Requests <= 0 {
		cfg.Requests = 3000 // enough that the ramp-down tail weighs little
	}
	p.MaxBatchSize = max(p.MaxBatchSize, cfg.Concurrency)
	// NVIDIA's runs padded every decode batch onto a CUDA graph
	// (cuda_graph_padding_enabled, graphs up to 8192 sequences), and their
	// prefill steps outlast any host floor. The step constants were fitted
	// to those runs, padding included, so no step here is priced as eager.
	p.EagerStepMs, p.EagerPerSeqMs = 0, 0
	// trtllm-bench feeds the executor directly, with no serving path.
	p.IntakeSteps, p.BesideSteps, p.PathJitterMs = 0, 0, 0
	p.MaxModelLen = max(p.MaxModelLen, cfg.ISL+cfg.OSL)
	eng, err := NewEngine(p, Options{Seed: cfg.Seed})
	if err != nil {
		return OfflineResult{}, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	submitted, inFlight := 0, 0
	submit := func() error {
		prompt := make([]uint32, cfg.ISL)
		for i := range prompt {
			prompt[i] = uint32(1000 + rng.IntN(90000))
		}
		submitted++
		inFlight++
		return eng.Submit(Request{ID: uint64(submitted), Prompt: prompt, MaxTokens: cfg.OSL, OutputTokens: cfg.OSL})
	}
	var elapsed time.Duration
	out := 0
	for submitted < cfg.Requests || inFlight > 0 {
		for inFlight < cfg.Concurrency && submitted < cfg.Requests {
			if err := submit(); err != nil {
				return OfflineResult{}, err
			}
		}
		res := eng.Step()
		elapsed += res.Duration
		out += len(res.Tokens)
		inFlight -= len(res.Finished)
		if len(res.Finished) > 0 && cfg.OnFinish != nil {
			cfg.OnFinish(submitted - inFlight)
		}
	}
	st := eng.Stats()
	return OfflineResult{
		Concurrency: cfg.Concurrency, Requests: cfg.Requests, Elapsed: elapsed,
		OutputTokensPerSec: float64(out) / elapsed.Seconds(), Steps: st.Steps, Preemptions: st.Preemptions,
	}, nil
}

// MultiTurnConfig is a closed-loop multi-turn chat run over several
// workers with round-robin routing, the workload of seed 000: each
// conversation opens with a long starter text, has MinTurns..MaxTurns turns
// that resend the whole history, and a finished conversation is replaced by
// a new one, started at most StartRate per second.
type MultiTurnConfig struct {
	Profile     Profile
	Workers     int
	Concurrency int
	MaxTokens   int
	MinTurns    int
	MaxTurns    int
	StartRate   float64
	// Warmup is run before measuring; Measure is the measured period.
	Warmup, Measure time.Duration
	// Starters are the texts conversations open with, chosen at random.
	Starters []Starter
	// FollowUp, when set, is every follow-up question, as the seeds' client
	// asked "Can you elaborate further on that?" whenever its question
	// model failed; empty asks varied questions about the last answer.
	FollowUp string
	// Greedy decodes every request greedily, as TensorRT-LLM does when the
	// request names no sampling parameter (the seeds' client named none):
	// conversations with one starter and one follow-up then repeat each
	// other's prompts, turn after turn.
	Greedy bool
	Seed   uint64
}

// Starter is a text that opens a conversation, about Topic.
type Starter struct {
	Topic, Text string
}

// MultiTurnResult is what a multi-turn run measured over its Measure period,
// from requests that finished in it, as a client would: TTFT from submit to
// the first token, TPOT as (e2e − TTFT)/(OSL − 1).
type MultiTurnResult struct {
	// Requests is the number of requests that finished in the period.
	Requests int
	// TTFTp50 and TTFTp95 are time-to-first-token percentiles.
	TTFTp50, TTFTp95 time.Duration
	// TPOTp50 and TPOTp95 are time-per-output-token percentiles.
	TPOTp50, TPOTp95 time.Duration
	// OutputTokensPerSec is the output tokens of those requests over Measure.
	OutputTokensPerSec float64
	// HitRate is cached prompt tokens over prompt tokens, 0 to 1.
	HitRate float64
	// MeanNewTokens is the mean of prompt tokens not served by the cache.
	MeanNewTokens float64
	// Preemptions counts preemptions over the whole run, all workers.
	Preemptions uint64
	// MeanRunning is the mean batch size per worker, sampled at step ends.
	MeanRunning float64
	// Evicted counts cached blocks evicted over the measured period, all
	// workers: how hard the KV cache was pressed.
	Evicted int
	// PeakKVUsage is the highest fraction of a worker's KV blocks held by
	// requests, 0 to 1, sampled at step ends.
	PeakKVUsage float64
}

// systemPrompt opens every conversation, as loadgen's does.
const systemPrompt = "You are a knowledgeable assistant. Answer clearly and accurately, and explain technical ideas step by step."

// benchConversation is one simulated user's chat. It keeps each message's
// tokens: the chat template ends every message with a newline before the
// next "<|", where the tokenizer always splits, so the prompt's tokens are
// the concatenation of the messages' tokens (TestIncrementalEncoding).
type benchConversation struct {
	starter Starter
	turns   int
	turn    int
	msgs    []tokenizer.Message
	toks    [][]uint32
}

func (c *benchConversation) add(role, content string) {
	m := tokenizer.Message{Role: role, Content: content}
	c.msgs = append(c.msgs, m)
	c.toks = append(c.toks, tokenizer.Encode(renderMessage(m)))
}

// prompt returns the token ids of RenderChat(c.msgs).
func (c *benchConversation) prompt() []uint32 {
	var p []uint32
	for _, t := range c.toks {
		p = append(p, t...)
	}
	return append(p, assistantOpen()...)
}

func renderMessage(m tokenizer.Message) string {
	return strings.TrimSuffix(tokenizer.RenderChat([]tokenizer.Message{m}), "<|assistant|>\n")
}

var assistantIDs []uint32

func assistantOpen() []uint32 {
	if assistantIDs == nil {
		assistantIDs = tokenizer.Encode(tokenizer.RenderChat(nil))
	}
	return assistantIDs
}

var followUps = []string{
	"Can you go deeper into %[2]q? How does that work in %[1]s?",
	"You mentioned %[2]q. What are the trade-offs there?",
	"What would go wrong in %[1]s if %[2]q did not hold?",
	"Could you give a concrete example of %[2]q?",
	"How would you measure %[2]q in a real %[1]s deployment?",
}

// followUp asks about a phrase of the answer.
func followUp(rng *rand.Rand, topic, answer string) string {
	words := strings.Fields(answer)
	phrase := topic
	if len(words) >= 8 {
		i := rng.IntN(len(words) - 5)
		phrase = strings.Trim(strings.Join(words[i:i+4], " "), ".,;:!?\"'()")
	}
	return fmt.Sprintf(followUps[rng.IntN(len(followUps))], topic, phrase)
}

// maxBenchConversations bounds MultiTurn's conversations, each of which
// holds its whole history: loadgen.MaxConcurrency's 10,000.
const maxBenchConversations = 10_000

// MultiTurn runs a closed-loop multi-turn benchmark in virtual time.
func MultiTurn(cfg MultiTurnConfig) (MultiTurnResult, error) {
	if cfg.Workers < 1 || cfg.Concurrency < 1 || len(cfg.Starters) == 0 || cfg.MinTurns < 1 || cfg.MaxTurns < cfg.MinTurns {
		return MultiTurnResult{}, fmt.Errorf("sim: multi-turn run needs workers, concurrency, starters and 1 <= min turns <= max turns")
	}
	if err := CheckFleet(cfg.Workers, cfg.Profile); err != nil {
		return MultiTurnResult{}, err
	}
	if cfg.Concurrency > maxBenchConversations {
		return MultiTurnResult{}, fmt.Errorf("sim: %d conversations: at most %d, as the load generator drives", cfg.Concurrency, maxBenchConversations)
	}
	switch {
	case !(cfg.StartRate >= 0) || math.IsInf(cfg.StartRate, 0):
		return MultiTurnResult{}, fmt.Errorf("sim: start rate %v: need 0 (unpaced) or a finite rate", cfg.StartRate)
	case cfg.Warmup < 0 || cfg.Measure <= 0:
		return MultiTurnResult{}, fmt.Errorf("sim: warmup %v must not be negative and measure %v must be positive", cfg.Warmup, cfg.Measure)
	}
	type worker struct {
		eng  *Engine
		res  *StepResult
		end  time.Duration
		busy bool
	}
	type inflight struct {
		conv    *benchConversation
		submit  time.Duration
		first   time.Duration
		text    strings.Builder
		worker  int
		promptN int
	}
	ws := make([]*worker, cfg.Workers)
	for i := range ws {
		eng, err := NewEngine(cfg.Profile, Options{Seed: cfg.Seed + uint64(i)})
		if err != nil {
			return MultiTurnResult{}, err
		}
		ws[i] = &worker{eng: eng}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 99))
	reqs := map[uint64]*inflight{}
	var nextID uint64
	rr := 0
	var now time.Duration
	end := cfg.Warmup + cfg.Measure
	var ttfts, tpots []time.Duration
	outTokens, prompt, cached := 0, 0, 0
	var runningSum, runningN float64
	evicted, peakKV := 0, 0.0

	submit := func(c *benchConversation) error {
		nextID++
		w := rr % len(ws)
		rr++
		p := c.prompt()
		reqs[nextID] = &inflight{conv: c, submit: now, first: -1, worker: w, promptN: len(p)}
		return ws[w].eng.Submit(Request{ID: nextID, Prompt: p, MaxTokens: cfg.MaxTokens, Greedy: cfg.Greedy})
	}
	live := 0
	var nextStart time.Duration
	startGap := time.Duration(0)
	if cfg.StartRate > 0 {
		startGap = time.Duration(float64(time.Second) / cfg.StartRate)
	}
	for now < end {
		for live < cfg.Concurrency && now >= nextStart {
			s := cfg.Starters[rng.IntN(len(cfg.Starters))]
			c := &benchConversation{starter: s, turns: cfg.MinTurns + rng.IntN(cfg.MaxTurns-cfg.MinTurns+1)}
			c.add("system", systemPrompt)
			c.add("user", "Please explain the following text about "+s.Topic+".\n\n"+s.Text)
			if err := submit(c); err != nil {
				return MultiTurnResult{}, err
			}
			live++
			nextStart = now + startGap
		}
		for _, w := range ws {
			if w.busy || w.eng.Idle() {
				continue
			}
			w.res = w.eng.Step()
			w.end, w.busy = now+w.res.Duration, true
		}
		// Advance to the next step end, or the next conversation start.
		next := end
		if live < cfg.Concurrency {
			next = max(nextStart, now)
		}
		for _, w := range ws {
			if w.busy && w.end < next {
				next = w.end
			}
		}
		now = next
		for _, w := range ws {
			if !w.busy || w.end > now {
				continue
			}
			w.busy = false
			st := w.eng.Stats()
			runningSum += float64(st.Running + len(w.res.Finished))
			runningN++
			if now >= cfg.Warmup {
				peakKV = max(peakKV, st.KVUsage)
				for _, ev := range w.res.Events {
					if rm, ok := ev.(*kvevents.BlockRemoved); ok {
						evicted += len(rm.BlockHashes)
					}
				}
			}
			for _, t := range w.res.Tokens {
				r := reqs[t.ID]
				if t.Index == 0 {
					r.first = now
				}
				r.text.WriteString(pieceText(t.Token))
			}
			for _, f := range w.res.Finished {
				r := reqs[f.ID]
				delete(reqs, f.ID)
				if now >= cfg.Warmup {
					ttfts = append(ttfts, r.first-r.submit)
					if f.CompletionTokens > 1 {
						tpots = append(tpots, (now-r.first)/time.Duration(f.CompletionTokens-1))
					}
					outTokens += f.CompletionTokens
					prompt += f.PromptTokens
					cached += f.CachedTokens
				}
				c := r.conv
				c.turn++
				c.add("assistant", r.text.String())
				if c.turn >= c.turns {
					live--
					continue
				}
				if cfg.FollowUp != "" {
					c.add("user", cfg.FollowUp)
				} else {
					c.add("user", followUp(rng, c.starter.Topic, r.text.String()))
				}
				if err := submit(c); err != nil {
					return MultiTurnResult{}, err
				}
			}
		}
	}
	res := MultiTurnResult{
		Requests:           len(ttfts),
		TTFTp50:            percentile(ttfts, 0.5),
		TTFTp95:            percentile(ttfts, 0.95),
		TPOTp50:            percentile(tpots, 0.5),
		TPOTp95:            percentile(tpots, 0.95),
		OutputTokensPerSec: float64(outTokens) / cfg.Measure.Seconds(),
		Evicted:            evicted,
		PeakKVUsage:        peakKV,
	}
	if prompt > 0 {
		res.HitRate = float64(cached) / float64(prompt)
		res.MeanNewTokens = float64(prompt-cached) / float64(len(ttfts))
	}
	for _, w := range ws {
		res.Preemptions += w.eng.Stats().Preemptions
	}
	if runningN > 0 {
		res.MeanRunning = runningSum / runningN
	}
	return res, nil
}

// percentile returns the q-quantile of ds by the nearest-rank rule.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
