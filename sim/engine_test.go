package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/kvevents"
)

// tiny is a profile small enough to reason about by hand: blocks of 4
// tokens, 16 of them, 2 sequences and 10 tokens a step, no serving path
// in front of the queue, and vLLM's admission (a prompt that fits is
// admitted; ReserveMaxTokens has its own test).
func tiny() Profile {
	p := MustProfile(DefaultProfile)
	p.Name = "tiny"
	p.BlockSize, p.KVBlocks, p.MaxBatchSize, p.MaxNumTokens, p.MaxModelLen = 4, 16, 2, 10, 64
	p.OverlapScheduler, p.ReserveMaxTokens = false, false
	p.IntakeSteps, p.PathJitterMs = 0, 0
	return p
}

func newTestEngine(t *testing.T, p Profile) *Engine {
	t.Helper()
	e, err := NewEngine(p, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// seqTokens returns n distinct token ids starting at from.
func seqTokens(from, n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(from + i)
	}
	return ids
}

func submit(t *testing.T, e *Engine, id uint64, prompt []uint32, out int) {
	t.Helper()
	if err := e.Submit(Request{ID: id, Prompt: prompt, MaxTokens: out, OutputTokens: out}); err != nil {
		t.Fatal(err)
	}
}

// runUntilIdle steps e to the end and returns every step's events and the
// finished requests.
func runUntilIdle(t *testing.T, e *Engine) ([]kvevents.Event, []Finished) {
	t.Helper()
	var ev []kvevents.Event
	var fin []Finished
	for i := 0; !e.Idle(); i++ {
		if i > 10000 {
			t.Fatal("engine never went idle")
		}
		r := e.Step()
		ev = append(ev, r.Events...)
		fin = append(fin, r.Finished...)
	}
	return ev, fin
}

func emitted(r *StepResult) []uint64 {
	var ids []uint64
	for _, t := range r.Tokens {
		ids = append(ids, t.ID)
	}
	return ids
}

func TestSchedulerCapsTheBatchAndAdmitsFirstComeFirstServed(t *testing.T) {
	e := newTestEngine(t, tiny())
	for id := uint64(1); id <= 3; id++ {
		submit(t, e, id, seqTokens(int(id)*100, 3), 5)
	}
	r := e.Step()
	if got := emitted(r); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("first step emitted for %v, want requests 1 and 2: the batch holds 2 and the queue is FCFS", got)
	}
	if st := e.Stats(); st.Running != 2 || st.Waiting != 1 {
		t.Fatalf("running %d waiting %d, want 2 and 1", st.Running, st.Waiting)
	}
}

func TestSchedulerChunksPrefillWithinTheTokenBudget(t *testing.T) {
	e := newTestEngine(t, tiny())
	submit(t, e, 1, seqTokens(1, 25), 3)
	var chunks []Chunk
	for step := 1; ; step++ {
		r := e.Step()
		chunks = append(chunks, r.Batch.Chunks...)
		if len(r.Tokens) > 0 {
			if step != 3 {
				t.Fatalf("first token after step %d, want 3 (25 tokens in chunks of 10)", step)
			}
			break
		}
	}
	want := []Chunk{{0, 10}, {10, 10}, {20, 5}}
	if !slices.Equal(chunks, want) {
		t.Fatalf("chunks %v, want %v", chunks, want)
	}
}

func TestSchedulerRunsDecodesBeforePrefillChunks(t *testing.T) {
	e := newTestEngine(t, tiny())
	submit(t, e, 1, seqTokens(1, 3), 10)
	e.Step() // request 1 prefills and emits its first token
	submit(t, e, 2, seqTokens(100, 30), 3)
	r := e.Step()
	if r.Batch.Decodes != 1 || len(r.Batch.Chunks) != 1 || r.Batch.Chunks[0].New != 9 {
		t.Fatalf("batch %+v, want 1 decode and a 9-token chunk (budget 10 minus the decode)", r.Batch)
	}
}

func TestOverlapSchedulerAdmitsArrivalsOneStepLater(t *testing.T) {
	tests := []struct {
		name    string
		overlap bool
		// want is the step, counted from the arrival, that prefills request 2.
		want int
	}{
		{"without overlap an arrival joins the next batch", false, 1},
		{"with overlap the next batch is already formed, so it joins the one after", true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tiny()
			p.OverlapScheduler = tt.overlap
			e := newTestEngine(t, p)
			submit(t, e, 1, seqTokens(1, 3), 10) // an idle engine admits at once
			if r := e.Step(); len(r.Tokens) != 1 {
				t.Fatalf("request 1 was not admitted by the first step of an idle engine")
			}
			submit(t, e, 2, seqTokens(100, 3), 3)
			for step := 1; step <= 3; step++ {
				if r := e.Step(); len(r.Batch.Chunks) > 0 {
					if step != tt.want {
						t.Fatalf("request 2 prefilled at step %d after arriving, want %d", step, tt.want)
					}
					return
				}
			}
			t.Fatal("request 2 never prefilled")
		})
	}
}

func TestOverlapSchedulerNeverLeavesALateArrivalWithNothingRunning(t *testing.T) {
	p := tiny()
	p.OverlapScheduler = true
	e := newTestEngine(t, p)
	submit(t, e, 1, seqTokens(1, 3), 5)
	e.Step()
	// Request 2 arrives while request 1 runs, so it is due a step later;
	// then request 1's client leaves. The next batch would be empty, so
	// request 2 must run in it rather than wait for a step that never comes.
	submit(t, e, 2, seqTokens(100, 3), 1)
	e.Cancel(1)
	if r := e.Step(); len(r.Batch.Chunks) != 1 {
		t.Fatalf("batch %+v, want request 2's prefill: an empty batch would leave it waiting forever", r.Batch)
	}
}

func TestTheServingPathHoldsAnArrivalAtABusyEngine(t *testing.T) {
	tests := []struct {
		name   string
		intake int
		busy   bool
		// held says the arrival must miss batches formed before its delay
		// has passed.
		held bool
	}{
		{"an idle engine takes an arrival at once, whatever the intake", 6, false, false},
		{"a busy engine holds an arrival until its drawn delay has passed", 6, true, true},
		{"with no intake stages a busy engine takes an arrival in the next batch", 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tiny()
			p.IntakeSteps = tt.intake
			for seed := range uint64(20) {
				e, err := NewEngine(p, Options{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				if tt.busy {
					submit(t, e, 1, seqTokens(1, 3), 60)
					e.Step()
				}
				submit(t, e, 2, seqTokens(100, 3), 1)
				ready := e.byID[2].readyAt
				if tt.held && ready <= e.elapsed {
					t.Fatalf("seed %d: arrival ready at %v, no later than now (%v)", seed, ready, e.elapsed)
				}
				for steps := 1; ; steps++ {
					formedAt := e.elapsed
					r := e.Step()
					if len(r.Batch.Chunks) == 0 {
						if !tt.held {
							t.Fatalf("seed %d: batch %d after the arrival left it out", seed, steps)
						}
						if formedAt >= ready {
							t.Fatalf("seed %d: a batch formed at %v, after the delay ended at %v, left the arrival out", seed, formedAt, ready)
						}
						continue
					}
					if formedAt < ready {
						t.Fatalf("seed %d: the arrival joined a batch formed at %v, before its delay ended at %v", seed, formedAt, ready)
					}
					break
				}
			}
		})
	}
}

func TestAMillisecondPathStageDoesNotScaleWithTheBatch(t *testing.T) {
	const draws = 4000
	tests := []struct {
		name     string
		intake   int
		jitterMs float64
		running  int // sequences decoding when the arrivals come
		// want gives the mean delay from the running batch's decode step.
		want func(step time.Duration) time.Duration
	}{
		{"a millisecond stage waits its mean behind one sequence", 0, 40, 1,
			func(time.Duration) time.Duration { return 40 * time.Millisecond }},
		{"a millisecond stage waits the same mean behind a full batch", 0, 40, 60,
			func(time.Duration) time.Duration { return 40 * time.Millisecond }},
		{"step stages wait one decode step each, longer behind a full batch", 2, 0, 60,
			func(step time.Duration) time.Duration { return 2 * step }},
		{"a millisecond stage adds to the step stages", 2, 40, 60,
			func(step time.Duration) time.Duration { return 2*step + 40*time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MustProfile(DefaultProfile)
			p.IntakeSteps, p.BesideSteps, p.PathJitterMs = tt.intake, 0, tt.jitterMs
			e := newTestEngine(t, p)
			for id := range uint64(tt.running) {
				submit(t, e, id, seqTokens(int(id)*1000, 64), 1000)
			}
			for len(e.running) < tt.running || e.running[tt.running-1].generated == 0 {
				e.Step()
			}
			step := e.decodeStepTime()
			var sum time.Duration
			for i := range uint64(draws) {
				id := 1_000_000 + i
				submit(t, e, id, seqTokens(5, 8), 1)
				sum += e.byID[id].readyAt - e.elapsed
				e.Cancel(id)
			}
			got, want := sum/draws, tt.want(step)
			// The engine's seed fixes the draws; 5% is three standard
			// errors of the mean of 4,000 exponential draws (1.6%).
			if got < want*95/100 || got > want*105/100 {
				t.Fatalf("mean delay %v behind %d sequences (decode step %v), want %v ± 5%%", got, tt.running, step, want)
			}
		})
	}
}

func TestAPathBesideTheEngineHoldsTokensNotTheQueue(t *testing.T) {
	tests := []struct {
		name          string
		front, beside int
	}{
		{"in front of the queue, the path holds the arrival out of batches", 6, 0},
		{"beside the engine, the arrival prefills at once and only its tokens wait", 0, 6},
		{"split, the arrival waits for the front part and its tokens for both", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tiny()
			p.IntakeSteps, p.BesideSteps = tt.front, tt.beside
			overlapped := 0 // seeds whose prefill ran while a path held the tokens
			for seed := range uint64(20) {
				e, err := NewEngine(p, Options{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				submit(t, e, 1, seqTokens(1, 3), 60)
				e.Step()
				submit(t, e, 2, seqTokens(100, 3), 20)
				queued, shown := e.byID[2].readyAt, e.byID[2].shownAt
				if tt.beside > 0 && shown <= queued {
					t.Fatalf("seed %d: tokens shown from %v, no later than the arrival is queued (%v)", seed, shown, queued)
				}
				var got []Token
				prefilledAt := time.Duration(-1)
				for steps := 0; len(got) == 0 && steps < 200; steps++ {
					formedAt := e.elapsed
					r := e.Step()
					if len(r.Batch.Chunks) > 0 && prefilledAt < 0 {
						prefilledAt = formedAt
					}
					for _, tok := range r.Tokens {
						if tok.ID == 2 {
							got = append(got, tok)
						}
					}
				}
				switch {
				case prefilledAt < 0 || len(got) == 0:
					t.Fatalf("seed %d: request 2 never prefilled or never emitted", seed)
				case prefilledAt < queued:
					t.Fatalf("seed %d: prefill formed at %v, before the front path ended at %v", seed, prefilledAt, queued)
				case e.elapsed < shown:
					t.Fatalf("seed %d: a token came at %v, before the path beside the engine ended at %v", seed, e.elapsed, shown)
				}
				if prefilledAt < shown {
					overlapped++
				}
				for i, tok := range got {
					if tok.Index != i {
						t.Fatalf("seed %d: held tokens came out as %v, want indexes 0, 1, 2, … in order", seed, got)
					}
				}
			}
			// Beside the engine, a prefill usually runs within the delay;
			// in front of it, never.
			if want := tt.beside > 0; (overlapped >= 10) != want {
				t.Errorf("%d of 20 seeds prefilled while the tokens were held", overlapped)
			}
		})
	}
}

func TestIntakeDelaysAverageIntakeStepsDecodeSteps(t *testing.T) {
	tests := []struct {
		name          string
		stages, shape int
	}{
		{"one stage is one exponential wait", 1, 0},
		{"six stages add up to an Erlang wait of six steps", 6, 1},
		{"a stage of shape 2 keeps its mean and narrows its spread", 1, 2},
		{"two stages of shape 2 are four half-step waits", 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MustProfile(DefaultProfile)
			p.IntakeSteps, p.PathStageShape = tt.stages, tt.shape
			e := newTestEngine(t, p)
			submit(t, e, 1, seqTokens(1, 64), 1000)
			e.Step()
			step := e.decodeStepTime()
			const n = 20000
			var sum, sumSq float64
			for range n {
				d := float64(e.pathDelay(p.IntakeSteps)) / float64(step)
				sum += d
				sumSq += d * d
			}
			mean := sum / n
			cv := math.Sqrt(sumSq/n-mean*mean) / mean
			// A sum of m exponentials of mean 1/k has mean m/k and a
			// coefficient of variation of 1/sqrt(m); here m = stages·shape.
			if math.Abs(mean-float64(tt.stages)) > 0.03*float64(tt.stages) {
				t.Errorf("mean delay %.3f decode steps, want %d", mean, tt.stages)
			}
			if want := 1 / math.Sqrt(float64(tt.stages*max(1, tt.shape))); math.Abs(cv-want) > 0.05*want {
				t.Errorf("coefficient of variation %.3f, want %.3f", cv, want)
			}
		})
	}
}

func TestSchedulerNeverOvertakesTheHeadOfTheQueue(t *testing.T) {
	p := tiny()
	p.MaxBatchSize = 3
	e := newTestEngine(t, p)
	submit(t, e, 1, seqTokens(1, 58), 6) // holds 15 of 16 blocks once prefilled
	for e.Stats().UsedBlocks < 15 {
		e.Step()
	}
	submit(t, e, 2, seqTokens(200, 8), 2) // its first chunk needs 2 blocks: no room
	submit(t, e, 3, seqTokens(300, 3), 2) // would fit in 1 block, but is behind 2
	r := e.Step()
	if got := emitted(r); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("emitted for %v, want only request 1", got)
	}
	if st := e.Stats(); st.Waiting != 2 {
		t.Fatalf("waiting %d, want 2: request 3 must not overtake request 2", st.Waiting)
	}
	_, fin := runUntilIdle(t, e)
	if len(fin) != 3 {
		t.Fatalf("%d requests finished, want all 3 once request 1 freed its blocks", len(fin))
	}
}

func TestPrefixCacheServesARepeatedPrompt(t *testing.T) {
	e := newTestEngine(t, tiny())
	prompt := seqTokens(1, 12)
	submit(t, e, 1, prompt, 2)
	ev, fin := runUntilIdle(t, e)
	if fin[0].CachedTokens != 0 {
		t.Fatalf("first request had %d cached tokens, want 0", fin[0].CachedTokens)
	}
	// The prompt prefills in chunks of 10 and 2 tokens: blocks 0 and 1 are
	// stored after the first step, block 2, child of block 1, after the second.
	chain := blockhash.Chain(prompt, 4)
	want := []*kvevents.BlockStored{
		{BlockHashes: chain[:2], TokenIDs: prompt[:8], BlockSize: 4},
		{BlockHashes: chain[2:], TokenIDs: prompt[8:], BlockSize: 4, Parent: chain[1], HasParent: true},
	}
	if len(ev) != 2 || !equalStored(ev[0], want[0]) || !equalStored(ev[1], want[1]) {
		t.Fatalf("events %v, want BlockStored of blocks 0-1 then of block 2", describe(ev))
	}

	submit(t, e, 2, prompt, 2)
	r := e.Step()
	// 11 of 12 tokens could be reused, in whole blocks: 8. The last block
	// is recomputed so the step has logits to sample from.
	if want := []Chunk{{Prefix: 8, New: 4}}; !slices.Equal(r.Batch.Chunks, want) {
		t.Fatalf("chunks %v, want %v", r.Batch.Chunks, want)
	}
	_, fin = runUntilIdle(t, e)
	if fin[0].CachedTokens != 8 {
		t.Fatalf("repeat had %d cached tokens, want 8", fin[0].CachedTokens)
	}
	if st := e.Stats(); st.PrefixQueries != 24 || st.PrefixHits != 8 {
		t.Fatalf("queries %d hits %d, want 24 and 8 tokens", st.PrefixQueries, st.PrefixHits)
	}
}

func TestGeneratedBlocksAreKeptOnlyWhenTheProfileSaysSo(t *testing.T) {
	prompt := seqTokens(1, 8)
	tests := []struct {
		name string
		keep bool
		// want is the number of blocks stored: the prompt's 2, plus the 2
		// full blocks of generated tokens whose KV was computed (the 8th
		// generated token is sampled but never fed back).
		want int
	}{
		{"a profile without generated-block reuse stores prompt blocks only", false, 2},
		{"a profile with generated-block reuse (vLLM, TensorRT-LLM) stores generated blocks too", true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tiny()
			p.KeepGeneratedBlocks = tt.keep
			e := newTestEngine(t, p)
			submit(t, e, 1, prompt, 8)
			ev, _ := runUntilIdle(t, e)
			var hashes []uint64
			var tokens []uint32
			for _, x := range ev {
				s := x.(*kvevents.BlockStored)
				hashes = append(hashes, s.BlockHashes...)
				tokens = append(tokens, s.TokenIDs...)
			}
			if len(hashes) != tt.want {
				t.Fatalf("%d blocks stored, want %d", len(hashes), tt.want)
			}
			// The chain over the stored tokens must be the hashes sent, so
			// a router recomputing them from token_ids agrees.
			if !slices.Equal(blockhash.Chain(tokens, 4), hashes) {
				t.Fatalf("stored hashes %v are not the chain of their tokens", hashes)
			}
		})
	}
}

func TestEvictionIsLeastRecentlyReleasedFirstAndLeavesFirst(t *testing.T) {
	p := tiny()
	p.MaxBatchSize = 1
	e := newTestEngine(t, p)
	shared := seqTokens(1, 8)                               // blocks X0 X1
	a := append(slices.Clone(shared), seqTokens(100, 8)...) // X0 X1 A2 A3
	b := append(slices.Clone(shared), seqTokens(200, 8)...) // X0 X1 B2 B3
	submit(t, e, 1, a, 1)
	runUntilIdle(t, e)
	submit(t, e, 2, b, 1)
	runUntilIdle(t, e)
	// A's blocks were released first; B's and the shared prefix later, B's
	// leaves before the prefix they hang from.
	ha, hb := blockhash.Chain(a, 4), blockhash.Chain(b, 4)
	want := []uint64{ha[3], ha[2], hb[3], hb[2], hb[1], hb[0]}

	submit(t, e, 3, seqTokens(1000, 63), 1) // needs all 16 blocks
	ev, _ := runUntilIdle(t, e)
	var removed []uint64
	for _, x := range ev {
		if r, ok := x.(*kvevents.BlockRemoved); ok {
			removed = append(removed, r.BlockHashes...)
		}
	}
	if !slices.Equal(removed, want) {
		t.Fatalf("evicted %x, want %x", removed, want)
	}
}

func TestPreemptionSendsTheNewestBackToRecompute(t *testing.T) {
	e := newTestEngine(t, tiny())
	// Each needs 11 blocks at full length; together 22 > 16.
	submit(t, e, 1, seqTokens(1, 20), 24)
	submit(t, e, 2, seqTokens(100, 20), 24)
	var preempted []uint64
	var fin []Finished
	for i := 0; !e.Idle() && i < 1000; i++ {
		r := e.Step()
		preempted = append(preempted, r.Preempted...)
		fin = append(fin, r.Finished...)
		if st := e.Stats(); st.UsedBlocks > 16 {
			t.Fatalf("%d blocks in use, more than the cache holds", st.UsedBlocks)
		}
	}
	if len(preempted) == 0 || preempted[0] != 2 {
		t.Fatalf("preempted %v, want request 2 (the newest) first", preempted)
	}
	if len(fin) != 2 || fin[0].ID != 1 || fin[1].CompletionTokens != 24 {
		t.Fatalf("finished %+v, want 1 then 2, each with all 24 tokens", fin)
	}
	if e.Stats().Preemptions == 0 {
		t.Fatal("preemptions not counted")
	}
}

func TestReservingMaxTokensAdmitsOnlyWhatNeverNeedsPreempting(t *testing.T) {
	// Each request needs 11 blocks at full length; together 22 > 16. Each
	// prompt alone fits beside the other's: 5 blocks.
	cases := []struct {
		name    string
		reserve bool
		// overlap says the second request ran while the first did.
		overlap     bool
		preemptions uint64
	}{
		{"vLLM admits the second prompt and preempts it when the cache runs out", false, true, 1},
		{"GUARANTEED_NO_EVICT holds the second back until the first's blocks are free", true, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := tiny()
			p.ReserveMaxTokens = c.reserve
			e := newTestEngine(t, p)
			submit(t, e, 1, seqTokens(1, 20), 24)
			submit(t, e, 2, seqTokens(100, 20), 24)
			overlap := false
			var fin []Finished
			for i := 0; !e.Idle() && i < 1000; i++ {
				r := e.Step()
				fin = append(fin, r.Finished...)
				overlap = overlap || (len(fin) == 0 && e.Stats().Running == 2)
			}
			if overlap != c.overlap {
				t.Errorf("both running at once: %v, want %v", overlap, c.overlap)
			}
			if got := e.Stats().Preemptions; min(got, 1) != c.preemptions {
				t.Errorf("%d preemptions, want %d", got, c.preemptions)
			}
			if len(fin) != 2 || fin[0].ID != 1 || fin[1].CompletionTokens != 24 {
				t.Fatalf("finished %+v, want 1 then 2, each with all 24 tokens", fin)
			}
			if e.reserved != 0 {
				t.Fatalf("%d blocks still promised on an idle engine", e.reserved)
			}
		})
	}
}

func TestCancelFreesBlocksAndResetClearsTheCache(t *testing.T) {
	e := newTestEngine(t, tiny())
	prompt := seqTokens(1, 8)
	submit(t, e, 1, prompt, 10)
	e.Step()
	if e.Stats().KVUsage == 0 {
		t.Fatal("a running request holds no blocks")
	}
	if !e.Cancel(1) || e.Cancel(1) {
		t.Fatal("Cancel should report true once, then false")
	}
	if st := e.Stats(); st.KVUsage != 0 || st.Running != 0 || st.CachedBlocks != 2 {
		t.Fatalf("after cancel: %+v, want no blocks held and the 2 prompt blocks still cached", st)
	}
	ev := e.ResetPrefixCache()
	if len(ev) != 1 || kvevents.Kind(ev[0]) != "AllBlocksCleared" {
		t.Fatalf("reset events %v, want AllBlocksCleared", describe(ev))
	}
	submit(t, e, 2, prompt, 2)
	_, fin := runUntilIdle(t, e)
	if fin[0].CachedTokens != 0 {
		t.Fatalf("after a reset the prompt hit %d cached tokens, want 0", fin[0].CachedTokens)
	}
}

func TestSubmitRejectsRequestsThatCannotRun(t *testing.T) {
	e := newTestEngine(t, tiny())
	submit(t, e, 1, seqTokens(1, 3), 2)
	tests := []struct {
		name string
		req  Request
	}{
		{"an empty prompt is refused", Request{ID: 2, MaxTokens: 1}},
		{"zero max_tokens is refused", Request{ID: 2, Prompt: seqTokens(1, 3)}},
		{"a prompt and output past max_model_len are refused", Request{ID: 2, Prompt: seqTokens(1, 60), MaxTokens: 5}},
		{"a duplicate id is refused", Request{ID: 1, Prompt: seqTokens(1, 3), MaxTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := e.Submit(tt.req); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestOutputLengthsAverageAbout830AtMaxTokens1024(t *testing.T) {
	e := newTestEngine(t, MustProfile(DefaultProfile))
	for i := range 200 {
		if err := e.Submit(Request{ID: uint64(i), Prompt: seqTokens(i*10, 10), MaxTokens: 1024}); err != nil {
			t.Fatal(err)
		}
	}
	_, fin := runUntilIdle(t, e)
	sum := 0
	for _, f := range fin {
		sum += f.CompletionTokens
	}
	mean := float64(sum) / float64(len(fin))
	if mean < 790 || mean > 870 {
		t.Fatalf("mean output %.0f tokens, want about 830", mean)
	}
}

// answer runs one request alone on a fresh engine seeded seed and returns
// its output tokens.
func answer(t *testing.T, seed uint64, r Request) []uint32 {
	t.Helper()
	e, err := NewEngine(MustProfile(DefaultProfile), Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(r); err != nil {
		t.Fatal(err)
	}
	var out []uint32
	for !e.Idle() {
		for _, tok := range e.Step().Tokens {
			out = append(out, tok.Token)
		}
	}
	return out
}

func TestGreedyAnswersAreAFunctionOfThePrompt(t *testing.T) {
	prompt, other := seqTokens(1000, 200), seqTokens(5000, 200)
	tests := []struct {
		name      string
		a, b      Request
		seedA     uint64
		seedB     uint64
		wantEqual bool
	}{
		// Greedy decoding has no randomness: the engine, its seed and
		// what else it ran do not matter.
		{"one prompt decoded greedily on two engines gets one answer",
			Request{ID: 1, Prompt: prompt, MaxTokens: 1024, Greedy: true},
			Request{ID: 2, Prompt: prompt, MaxTokens: 1024, Greedy: true}, 1, 2, true},
		{"two prompts decoded greedily get two answers",
			Request{ID: 1, Prompt: prompt, MaxTokens: 1024, Greedy: true},
			Request{ID: 2, Prompt: other, MaxTokens: 1024, Greedy: true}, 1, 1, false},
		// Sampling draws: two engines seeded differently answer differently.
		{"one prompt sampled on two engines gets two answers",
			Request{ID: 1, Prompt: prompt, MaxTokens: 1024},
			Request{ID: 2, Prompt: prompt, MaxTokens: 1024}, 1, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := answer(t, tt.seedA, tt.a), answer(t, tt.seedB, tt.b)
			if got := slices.Equal(a, b); got != tt.wantEqual {
				t.Fatalf("answers equal = %v (lengths %d and %d), want %v", got, len(a), len(b), tt.wantEqual)
			}
			for _, n := range []int{len(a), len(b)} {
				if n < 640 || n > 1024 {
					t.Fatalf("answer of %d tokens, want the profile's 640..1024", n)
				}
			}
		})
	}
}

func TestStepTimeMatchesThePerfModel(t *testing.T) {
	p := MustProfile(DefaultProfile)
	p.EagerStepMs = 0 // the GPU formula alone; eager steps are tested below
	tests := []struct {
		name  string
		batch Batch
		want  float64 // ms, the worked examples of the timing model kvlens was designed from
	}{
		{"decode alone at B=1, K=5k takes about 19.6 ms", Batch{Decodes: 1, Context: 5000}, 19.6},
		{"decode alone at B=32, K=180k takes about 29 ms", Batch{Decodes: 32, Context: 180000}, 29},
		{"decode alone at B=64, K=360k takes about 40 ms", Batch{Decodes: 64, Context: 360000}, 40},
		// c0 + hypot(17.3, 0.1116·1500) + a_att·1000·500 = 2 + 168.3 + 1.6
		{"a 1k-token prefill alone takes about 172 ms", Batch{Chunks: []Chunk{{New: 1000}}}, 171.9},
		// A follow-up whose whole history was cached prefills only its new
		// question: c0 + hypot(17.3, 0.1116·(13+40+40)) + a_kv·98k + a_att·40·7020
		// = 2 + 20.18 + 5.15 + 0.88. With the full 500-token pad it would
		// be 72 ms, three decode steps' worth.
		{"13 decodes taking on a 40-token chunk over a cached 7k prefix take about 28 ms",
			Batch{Decodes: 13, Context: 13 * 7000, Chunks: []Chunk{{Prefix: 7000, New: 40}}}, 28.2},
		{"an empty batch takes no time", Batch{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := float64(p.StepTime(tt.batch)) / float64(time.Millisecond)
			if math.Abs(got-tt.want) > 0.02*tt.want+0.01 {
				t.Fatalf("step = %.2f ms, want %.1f ms ±2%%", got, tt.want)
			}
		})
	}
}

func TestEagerStepsLastAtLeastTheHostFloor(t *testing.T) {
	p := MustProfile(DefaultProfile) // graphs for 1..32, 64, 128; floor 22 + 0.4 ms a sequence
	gpu := p
	gpu.EagerStepMs, gpu.EagerPerSeqMs = 0, 0
	padded := p
	padded.GraphPadding = true
	flat := p // the default before 2026-11-27
	flat.EagerStepMs, flat.EagerPerSeqMs = 41, 0
	tests := []struct {
		name  string
		p     Profile
		batch Batch
		want  float64 // ms
	}{
		// 2 + hypot(17.3, 0.1116·32) + a_kv·180k = 29.1
		{"a decode batch of 32 replays a graph and takes the GPU time",
			p, Batch{Decodes: 32, Context: 180000}, ms(gpu.StepTime(Batch{Decodes: 32, Context: 180000}))},
		{"a decode batch of 40 has no graph and runs eagerly at 22 + 0.4·40 ms",
			p, Batch{Decodes: 40, Context: 240000}, 38},
		{"a decode batch of 64 replays a graph again",
			p, Batch{Decodes: 64, Context: 360000}, ms(gpu.StepTime(Batch{Decodes: 64, Context: 360000}))},
		{"the floor counts prefill chunks as sequences: 22 + 0.4·(30 + 1) ms",
			p, Batch{Decodes: 30, Context: 60000, Chunks: []Chunk{{Prefix: 7000, New: 40}}}, 34.4},
		{"a 1k-token prefill outlasts the floor and takes its GPU time",
			p, Batch{Chunks: []Chunk{{New: 1000}}}, ms(gpu.StepTime(Batch{Chunks: []Chunk{{New: 1000}}}))},
		{"a flat floor runs a decode batch of 40 at 41 ms",
			flat, Batch{Decodes: 40, Context: 240000}, 41},
		{"a flat floor runs 13 decodes with a 40-token prefill chunk at 41 ms",
			flat, Batch{Decodes: 13, Context: 91000, Chunks: []Chunk{{Prefix: 7000, New: 40}}}, 41},
		{"with padding, a decode batch of 40 replays the 64 graph and computes 64 rows",
			padded, Batch{Decodes: 40, Context: 240000}, ms(gpu.StepTime(Batch{Decodes: 64, Context: 240000}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ms(tt.p.StepTime(tt.batch)); math.Abs(got-tt.want) > 0.01 {
				t.Fatalf("step = %.3f ms, want %.3f ms", got, tt.want)
			}
		})
	}
	if g := ms(gpu.StepTime(Batch{Decodes: 40, Context: 240000})); g >= 38 {
		t.Fatalf("the GPU time of 40 decodes is %.1f ms: the floor case above proves nothing", g)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func equalStored(e kvevents.Event, want *kvevents.BlockStored) bool {
	s, ok := e.(*kvevents.BlockStored)
	return ok && slices.Equal(s.BlockHashes, want.BlockHashes) && slices.Equal(s.TokenIDs, want.TokenIDs) &&
		s.HasParent == want.HasParent && s.Parent == want.Parent && s.BlockSize == want.BlockSize
}

func describe(ev []kvevents.Event) []string {
	var s []string
	for _, e := range ev {
		s = append(s, kvevents.Kind(e))
	}
	return s
}

// BenchmarkEngineStep measures the engine's own cost of one decode step of
// a full H200 batch (64 sequences): the simulation's CPU price per step.
func BenchmarkEngineStep(b *testing.B) {
	e, err := NewEngine(MustProfile(DefaultProfile), Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	next := uint64(0)
	fill := func() {
		for e.Stats().Running+e.Stats().Waiting < 64 {
			next++
			if err := e.Submit(Request{ID: next, Prompt: seqTokens(int(next)*10000, 4000), MaxTokens: 1024}); err != nil {
				b.Fatal(err)
			}
		}
	}
	fill()
	for {
		r := e.Step()
		if e.Stats().Running == 64 && len(r.Batch.Chunks) == 0 {
			break // the batch is full and every prompt prefilled
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.Step()
		fill() // keep the batch full as requests finish
	}
}
