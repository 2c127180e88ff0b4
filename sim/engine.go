package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/kvevents"
)

// Engine is one simulated inference engine: a continuous-batching scheduler
// over a paged KV cache with prefix caching, timed by a Profile.
//
// It is a pure state machine. It has no goroutines, sleeps or clock: Step
// runs one engine iteration and says how long the GPU would have taken, and
// the caller decides what that time means (Runner waits it out in real time;
// a discrete-event loop just adds it up). It is not safe for concurrent use.
//
// # Scheduling rule
//
// Each step has a budget of MaxNumTokens tokens and MaxBatchSize sequences.
// It fills them in this order, as vLLM's and TensorRT-LLM's schedulers do:
//
//  1. Every running sequence that is decoding gets 1 token, oldest first.
//  2. Every running sequence still in prefill gets a chunk of its remaining
//     prompt, oldest first, as far as the token budget goes.
//  3. Waiting requests are admitted first come, first served while a
//     sequence slot and tokens are left. An admitted request reuses the
//     longest prefix of full blocks in the cache, and prefills a chunk of the
//     rest. Admission stops at the first request whose blocks do not fit: it
//     never overtakes the head of the queue. With the profile's overlap
//     scheduler, a request that arrived while a step ran waits one more
//     step, since the batch after it was formed during it. With a serving
//     path (IntakeSteps), a request that arrived at a busy engine also
//     waits until its drawn delay has passed. Neither wait holds a request
//     back from a batch that would otherwise be empty. A path beside the
//     engine (BesideSteps) holds a request's tokens, not its admission,
//     until a delay drawn likewise has passed since it reached the queue.
//
// When a running sequence needs a block and none is free or evictable, the
// newest running sequence is preempted: its blocks are released and it goes
// back to the head of the queue, to be recomputed (vLLM's recompute mode).
//
// A request emits its first token at the end of the step that completes its
// prefill, and one token per step after that.
type Engine struct {
	prof  Profile
	cache *kvCache
	rng   *rand.Rand
	// intake draws the serving path's delays; a stream of its own keeps
	// the answers drawn by rng the same whatever the profile's IntakeSteps.
	intake *rand.Rand

	waiting []*sequence // FCFS queue; preempted sequences re-enter at the head
	running []*sequence // in admission order, oldest first
	byID    map[uint64]*sequence

	stats Stats
	// calls counts Step calls; with the overlap scheduler a request may
	// join only the batch of the call after next.
	calls uint64
	// elapsed is the engine's time: the sum of its steps' durations.
	elapsed time.Duration
	// reserved counts the blocks promised to running sequences and not
	// yet allocated (Profile.ReserveMaxTokens).
	reserved int
	res      StepResult // reused between steps
	plan     []planned
	batch    Batch
}

// Options tune an Engine beyond its profile.
type Options struct {
	// Seed makes the drawn output lengths reproducible.
	Seed uint64
}

// Request is one generation request.
type Request struct {
	// ID names the request in step results; it must be unique among the
	// requests the engine holds.
	ID uint64
	// Prompt is the prompt's token ids.
	Prompt []uint32
	// MaxTokens caps the output, in tokens.
	MaxTokens int
	// OutputTokens is the answer's natural length, after which the model
	// ends it; 0 draws it from the profile. MaxTokens caps it.
	OutputTokens int
	// Greedy says the request decodes greedily (temperature 0; TensorRT-LLM
	// does when a request sets no sampling parameter). Its answer, and the
	// length drawn for it, are then a function of its prompt: two requests
	// with one prompt get one answer, as on a real engine.
	Greedy bool
	// Answer is the tokens the answer is made of, in order, repeated if the
	// answer runs past them; empty means the prose ring (prose.go).
	Answer []uint32
}

// StepResult is what one step did. Its slices are reused by the next Step.
type StepResult struct {
	// Duration is how long the step takes on the profiled GPU.
	Duration time.Duration
	// Batch is what the step computed.
	Batch Batch
	// Tokens are the tokens emitted at the end of the step, one per sequence.
	Tokens []Token
	// Finished are the requests that ended at the end of the step.
	Finished []Finished
	// Preempted are the requests sent back to the queue during the step.
	Preempted []uint64
	// Events are the KV events of the step, in order.
	Events []kvevents.Event
}

// Token is one emitted token.
type Token struct {
	// ID is the request's id.
	ID uint64
	// Index counts the request's output tokens from 0; 0 is the first token.
	Index int
	// Token is the token id.
	Token uint32
}

// Finished is a request that ended.
type Finished struct {
	// ID is the request's id.
	ID uint64
	// PromptTokens is the prompt's length, in tokens.
	PromptTokens int
	// CachedTokens is how many prompt tokens the prefix cache served at
	// admission, in tokens.
	CachedTokens int
	// CompletionTokens is how many tokens were generated.
	CompletionTokens int
	// Length says the answer stopped at max_tokens rather than at its end.
	Length bool
}

// Stats is the engine's state and its counters since it was made.
type Stats struct {
	// Running is the number of sequences in the batch.
	Running int
	// Waiting is the number of requests queued for admission.
	Waiting int
	// KVUsage is the fraction of KV blocks held by requests, 0 to 1.
	KVUsage float64
	// UsedBlocks is the number of KV blocks held by requests.
	UsedBlocks int
	// CachedBlocks is the number of blocks registered in the prefix cache,
	// held or idle.
	CachedBlocks int
	// TotalBlocks is the KV cache's capacity, in blocks.
	TotalBlocks int
	// PrefixQueries counts prompt tokens looked up in the prefix cache.
	PrefixQueries uint64
	// PrefixHits counts prompt tokens the prefix cache served.
	PrefixHits uint64
	// Preemptions counts requests preempted.
	Preemptions uint64
	// Steps counts engine steps.
	Steps uint64
	// PromptTokens counts prompt tokens of admitted requests.
	PromptTokens uint64
	// GenerationTokens counts tokens emitted.
	GenerationTokens uint64
	// Late counts steps the Runner delivered more than LateStep after
	// their modelled end: the host could not keep up with the model, and
	// the clients measured slower figures than it models.
	Late uint64
}

// sequence is a request inside the engine.
type sequence struct {
	req       Request
	tokens    []uint32 // prompt, then the tokens generated so far
	promptLen int
	target    int // output tokens to generate
	generated int
	// computed counts tokens whose KV is in the cache.
	computed int
	// hashes chains the full blocks of tokens known to be reusable: the
	// prompt's, and with KeepGeneratedBlocks the generated ones as they fill.
	hashes []uint64
	// table holds the KV block of each block of computed tokens.
	table []int32
	// settled counts the blocks of table already registered or left private.
	settled int
	// cached is the prompt tokens served from cache at first admission.
	cached   int
	admitted bool
	// outOffset is where in the prose ring the answer starts.
	outOffset int
	// notBefore is the first Step call whose batch the request may join.
	notBefore uint64
	// readyAt is the engine time the request reaches the queue through
	// the profile's serving path (IntakeSteps).
	readyAt time.Duration
	// shownAt is the engine time before which none of its tokens is
	// emitted, through the path beside the engine (BesideSteps).
	shownAt time.Duration
	// emitted counts the generated tokens put in step results; fewer than
	// generated while the path beside the engine holds them.
	emitted int
	// planned is the tokens this step computes for the sequence, or 0.
	planned int
	// reserve is the blocks promised to it and not yet allocated
	// (Profile.ReserveMaxTokens).
	reserve int
	done    bool
}

type planned struct {
	s *sequence
	n int
}

// remaining is how many tokens the sequence must compute before it can
// emit its next token: 1 when decoding.
func (s *sequence) remaining() int { return len(s.tokens) - s.computed }

// decoding says whether the sequence is generating, one token a step.
func (s *sequence) decoding() bool { return s.generated > 0 && s.remaining() == 1 }

// NewEngine returns an idle engine with an empty cache.
func NewEngine(p Profile, opts Options) (*Engine, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Engine{
		prof:   p,
		cache:  newKVCache(p.KVBlocks, p.BlockSize),
		rng:    rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5851f42d4c957f2d)),
		intake: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x2545f4914f6cdd1d)),
		byID:   make(map[uint64]*sequence),
	}, nil
}

// Profile returns the engine's profile.
func (e *Engine) Profile() Profile { return e.prof }

// Submit queues a request. It fails if the id is in use or the request
// cannot fit the model's context.
func (e *Engine) Submit(r Request) error {
	switch {
	case len(r.Prompt) == 0:
		return errors.New("sim: the prompt is empty")
	case r.MaxTokens < 1:
		return fmt.Errorf("sim: max_tokens must be at least 1, got %d", r.MaxTokens)
	case len(r.Prompt)+r.MaxTokens > e.prof.MaxModelLen:
		return fmt.Errorf("sim: this model's maximum context length is %d tokens, but %d prompt tokens and %d max_tokens were asked for",
			e.prof.MaxModelLen, len(r.Prompt), r.MaxTokens)
	}
	if _, dup := e.byID[r.ID]; dup {
		return fmt.Errorf("sim: request id %d is already in the engine", r.ID)
	}
	target, span := r.OutputTokens, 0
	if target <= 0 {
		target = r.MaxTokens
		if e.prof.OutputMax > 0 {
			span = e.prof.OutputMax - e.prof.OutputMin + 1
			target = e.prof.OutputMin + e.rng.IntN(span)
		}
	}
	// Sampling makes two answers to one prompt differ, so they must not
	// share generated blocks: each answer starts at a random word of the
	// prose ring. A greedy answer starts, and ends, where its prompt's hash
	// says.
	offset := answerStart(e.rng.Uint64())
	if r.Greedy {
		h := blockhash.Local(r.Prompt)
		offset = answerStart(h)
		if span > 0 {
			target = e.prof.OutputMin + int((h>>32)%uint64(span))
		}
	}
	s := &sequence{
		req:       r,
		tokens:    slices.Grow(slices.Clone(r.Prompt), min(r.MaxTokens, target)),
		promptLen: len(r.Prompt),
		target:    min(target, r.MaxTokens),
		hashes:    blockhash.Chain(r.Prompt, e.prof.BlockSize),
		outOffset: offset,
		notBefore: e.calls + 1,
	}
	if !e.Idle() {
		if e.prof.OverlapScheduler {
			// The next batch was formed while the step in flight runs.
			s.notBefore++
		}
		s.readyAt = e.elapsed + e.pathJitter() + e.pathDelay(e.prof.IntakeSteps)
		s.shownAt = s.readyAt + e.pathDelay(e.prof.BesideSteps)
	}
	e.waiting = append(e.waiting, s)
	e.byID[r.ID] = s
	return nil
}

// Cancel drops a request, queued or running, and frees its blocks. It
// reports whether the engine held the request.
func (e *Engine) Cancel(id uint64) bool {
	s, ok := e.byID[id]
	if !ok {
		return false
	}
	delete(e.byID, id)
	if i := slices.Index(e.waiting, s); i >= 0 {
		e.waiting = slices.Delete(e.waiting, i, i+1)
		return true
	}
	e.cache.release(s.table)
	e.unreserve(s)
	e.running = slices.DeleteFunc(e.running, func(r *sequence) bool { return r == s })
	return true
}

// Idle says whether the engine has nothing to run.
func (e *Engine) Idle() bool { return len(e.running) == 0 && len(e.waiting) == 0 }

// ResetPrefixCache forgets every cached prefix and returns the events that
// say so (AllBlocksCleared), together with any recorded since the last step.
func (e *Engine) ResetPrefixCache() []kvevents.Event {
	e.cache.reset()
	// Sequences keep their blocks, which are now private: none of them can
	// register again, since their hashes are gone from the cache.
	for _, s := range e.running {
		s.settled = len(s.table)
	}
	return e.cache.drain()
}

// Stats returns the engine's state and counters.
func (e *Engine) Stats() Stats {
	st := e.stats
	st.Running = len(e.running)
	st.Waiting = len(e.waiting)
	st.UsedBlocks = e.cache.used
	st.CachedBlocks = e.cache.cachedBlocks()
	st.TotalBlocks = e.prof.KVBlocks
	st.KVUsage = float64(e.cache.used) / float64(e.prof.KVBlocks)
	return st
}

// Step runs one engine iteration: it schedules a batch by the rule in the
// Engine doc, computes it, and returns what happened. An idle engine returns
// an empty result with zero duration.
func (e *Engine) Step() *StepResult {
	e.calls++
	r := &e.res
	r.Tokens, r.Finished, r.Preempted = r.Tokens[:0], r.Finished[:0], r.Preempted[:0]
	e.plan = e.plan[:0]
	budget := e.prof.MaxNumTokens

	// 1 and 2: running sequences, decoders first, then prefill chunks.
	for _, wantDecode := range []bool{true, false} {
		for i := 0; i < len(e.running) && budget > 0; i++ {
			s := e.running[i]
			if s.decoding() != wantDecode || s.planned > 0 {
				continue
			}
			n := min(s.remaining(), budget)
			if !e.reserveOrPreempt(s, n, &budget) {
				break // s was the newest and had to be preempted: no one is left after it
			}
			budget -= n
		}
	}

	// 3: admit waiting requests, first come first served.
	for len(e.waiting) > 0 && len(e.running) < e.prof.MaxBatchSize && budget > 0 {
		s := e.waiting[0]
		// A late arrival (its batch already formed, or its serving path
		// not yet passed) waits, unless this batch would be empty: the path
		// is only slow while the worker is busy, and an idle GPU takes the
		// request at once.
		late := e.calls < s.notBefore || e.elapsed < s.readyAt
		if (late && len(e.plan) > 0) || !e.admit(s, budget) {
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		budget -= s.planned
	}

	// Time the batch.
	e.batch.Decodes, e.batch.Context, e.batch.Chunks = 0, 0, e.batch.Chunks[:0]
	for _, p := range e.plan {
		if p.s.decoding() {
			e.batch.Decodes++
			e.batch.Context += p.s.computed + 1
		} else {
			e.batch.Chunks = append(e.batch.Chunks, Chunk{Prefix: p.s.computed, New: p.n})
		}
	}
	r.Batch = e.batch
	r.Duration = e.prof.StepTime(e.batch)
	if len(e.plan) > 0 {
		e.stats.Steps++
	}

	// Compute it: advance each sequence, register its newly full blocks,
	// and emit a token where a sequence has caught up.
	ring, _ := proseTokens()
	done := false
	for _, p := range e.plan {
		s := p.s
		s.planned = 0
		s.computed += p.n
		e.settle(s)
		if s.computed < len(s.tokens) {
			continue // prefill goes on next step
		}
		var tok uint32
		if a := s.req.Answer; len(a) > 0 {
			tok = a[s.generated%len(a)]
		} else {
			tok = ring[(s.outOffset+s.generated)%len(ring)]
		}
		s.tokens = append(s.tokens, tok)
		s.generated++
		e.stats.GenerationTokens++
		finished := s.generated >= s.target
		// Tokens wait for the path beside the engine: they go out together
		// at the end of the first step after its delay, or when the
		// request ends, whichever is first.
		if finished || e.elapsed+r.Duration >= s.shownAt {
			for ; s.emitted < s.generated; s.emitted++ {
				r.Tokens = append(r.Tokens, Token{ID: s.req.ID, Index: s.emitted, Token: s.tokens[s.promptLen+s.emitted]})
			}
		}
		if finished {
			r.Finished = append(r.Finished, Finished{
				ID:               s.req.ID,
				PromptTokens:     s.promptLen,
				CachedTokens:     s.cached,
				CompletionTokens: s.generated,
				Length:           s.generated >= s.req.MaxTokens,
			})
			e.cache.release(s.table)
			e.unreserve(s)
			s.table, s.done = nil, true
			delete(e.byID, s.req.ID)
			done = true
		}
	}
	if done {
		e.running = slices.DeleteFunc(e.running, func(s *sequence) bool { return s.done })
	}
	r.Events = e.cache.drain()
	e.elapsed += r.Duration
	return r
}

// pathDelay draws how long a serving path of the given stages holds a
// request that arrives while the engine is busy: each stage an exponential
// wait with a mean of one decode step of the running batch. The sum is
// Erlang-distributed, with a mean of that many decode steps and a spread
// that shrinks, relative to it, as the stages add up.
func (e *Engine) pathDelay(stages int) time.Duration {
	if stages == 0 {
		return 0
	}
	k := max(1, e.prof.PathStageShape)
	steps := 0.0
	for range stages * k {
		steps += e.intake.ExpFloat64()
	}
	return time.Duration(steps / float64(k) * float64(e.decodeStepTime()))
}

// pathJitter draws the serving path's stage timed in milliseconds rather
// than in steps (PathJitterMs): an exponential wait with that mean.
func (e *Engine) pathJitter() time.Duration {
	if e.prof.PathJitterMs == 0 {
		return 0 // no draw, so a profile without it keeps its delays
	}
	return time.Duration(e.intake.ExpFloat64() * e.prof.PathJitterMs * float64(time.Millisecond))
}

// decodeStepTime is how long a step that only decodes the running
// sequences would take.
func (e *Engine) decodeStepTime() time.Duration {
	b := Batch{Decodes: len(e.running)}
	for _, s := range e.running {
		b.Context += len(s.tokens)
	}
	return e.prof.StepTime(b)
}

// reserveOrPreempt makes sure s has blocks for n more tokens, preempting the
// newest running sequences while the cache is full. It plans s and reports
// true, or reports false if s itself had to be preempted.
func (e *Engine) reserveOrPreempt(s *sequence, n int, budget *int) bool {
	need := e.blocksFor(s.computed+n) - len(s.table)
	promised := min(need, s.reserve)
	s.reserve -= promised
	e.reserved -= promised
	for need > e.cache.available()-e.reserved {
		victim := e.running[len(e.running)-1]
		e.preempt(victim, budget)
		if victim == s {
			return false
		}
	}
	for range need {
		slot, _ := e.cache.allocate()
		s.table = append(s.table, slot)
	}
	s.planned = n
	e.plan = append(e.plan, planned{s, n})
	return true
}

// preempt sends the newest running sequence s back to the head of the
// queue, releasing its blocks; it will recompute its prompt and the tokens
// generated so far.
func (e *Engine) preempt(s *sequence, budget *int) {
	if s.planned > 0 {
		*budget += s.planned
		e.plan = slices.DeleteFunc(e.plan, func(p planned) bool { return p.s == s })
		s.planned = 0
	}
	e.cache.release(s.table)
	e.unreserve(s)
	s.table, s.settled, s.computed = nil, 0, 0
	e.running = e.running[:len(e.running)-1]
	e.waiting = slices.Insert(e.waiting, 0, s)
	e.stats.Preemptions++
	e.res.Preempted = append(e.res.Preempted, s.req.ID)
}

// admit takes the cached prefix of s and blocks for its first chunk, within
// budget tokens, and plans the chunk. It reports false, changing nothing,
// when the blocks do not fit.
func (e *Engine) admit(s *sequence, budget int) bool {
	bs := e.prof.BlockSize
	// At least one token must be computed to produce the next token's
	// logits, so a full hit still recomputes the last block.
	hits := s.hashes[:min(len(s.hashes), (len(s.tokens)-1)/bs)]
	hits = hits[:e.cache.match(hits)]
	start := len(hits) * bs
	n := min(len(s.tokens)-start, budget)
	need := e.blocksFor(start+n) - len(hits)
	whole := need
	if e.prof.ReserveMaxTokens {
		whole = e.blocksFor(len(s.tokens)+s.req.MaxTokens-s.generated) - len(hits)
	}
	if whole > e.cache.available()-e.cache.idleAmong(hits)-e.reserved {
		return false
	}
	s.table = e.cache.acquire(s.table, hits)
	s.settled = len(hits)
	for range need {
		slot, _ := e.cache.allocate()
		s.table = append(s.table, slot)
	}
	s.reserve = whole - need
	e.reserved += s.reserve
	s.computed = start
	if !s.admitted {
		s.admitted = true
		s.cached = start
		e.stats.PrefixQueries += uint64(s.promptLen)
		e.stats.PrefixHits += uint64(start)
		e.stats.PromptTokens += uint64(s.promptLen)
	}
	s.planned = n
	e.plan = append(e.plan, planned{s, n})
	return true
}

// settle registers the blocks of s that its computed tokens have filled:
// those the profile lets be reused (prompt blocks, and generated ones with
// KeepGeneratedBlocks) enter the prefix cache; the others stay private.
func (e *Engine) settle(s *sequence) {
	bs := e.prof.BlockSize
	full := s.computed / bs
	if e.prof.KeepGeneratedBlocks && len(s.hashes) < full {
		s.hashes = blockhash.Extend(s.hashes, s.tokens[len(s.hashes)*bs:full*bs], bs)
	}
	for ; s.settled < full; s.settled++ {
		i := s.settled
		if i >= len(s.hashes) {
			continue // a block with generated tokens the profile does not keep
		}
		var parent uint64
		if i > 0 {
			parent = s.hashes[i-1]
		}
		e.cache.register(s.table[i], i, s.hashes[i], parent, s.tokens[i*bs:(i+1)*bs])
	}
}

// unreserve takes back the blocks promised to s and not allocated.
func (e *Engine) unreserve(s *sequence) {
	e.reserved -= s.reserve
	s.reserve = 0
}

func (e *Engine) blocksFor(tokens int) int {
	return (tokens + e.prof.BlockSize - 1) / e.prof.BlockSize
}
