package router

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The blindness detector compares, per worker, what the index predicted a
// request would find cached with what the worker then reported
// (usage.prompt_tokens_details.cached_tokens). A router whose tokens differ
// from the engine's, or that hears no events, predicts nothing while the
// worker reports large hits: KV routing has silently become load balancing.

const (
	// blindWindow is how many of a worker's latest answers are compared.
	blindWindow = 64
	// blindMinRequests is the fewest answers in the window before a verdict.
	blindMinRequests = 8
	// blindMinCached is the fewest cached tokens the worker must report over
	// the window before a verdict: a cold fleet predicts and reports nothing.
	blindMinCached = 256
	// blindRatio: the index is blind when it predicted less than this share
	// of the cached tokens the worker reported.
	blindRatio = 0.2
	// eventSilence is how long a worker's KV events may pause before a
	// blind verdict blames the stream rather than the tokens.
	eventSilence = 30 * time.Second
	// refillGrace is how long after a worker's index was cleared because
	// its stream broke off (see eventStream.cleared) a blind verdict blames
	// the break. The cleared index holds nothing the worker cached before,
	// and learns it back one prompt at a time as the worker extends it, so
	// the first answers after the break are misses whatever the tokens,
	// and the verdict, over 64 answers, lags the refill (an audit saw it
	// blind for some 40 s after a restart). A break that recurs within
	// the grace hides a tokenizer mismatch for as long, but names a stream
	// that needs fixing first.
	refillGrace = time.Minute
)

// Blind causes, as /readyz, the dashboard and the metric name them.
const (
	CauseTokenizer     = "tokenizer_mismatch"
	CauseNoEvents      = "no_events"
	CauseUnknownParent = "unknown_parent"
	// CauseWarm is unknown parents on a worker that holds blocks from before
	// kvlens joined, or from a gap in its events, which no prompt in flight
	// has shown (see Feed.adoptParent).
	CauseWarm = "warm_before_join"
	// CauseRefilling is an index cleared less than refillGrace ago because
	// the worker's stream broke off: its publisher restarted, events were
	// lost, or it came back from failed health checks.
	CauseRefilling = "index_refilling"
	// CauseWrongSocket is an events endpoint that answered as a socket of
	// another type than a publisher, such as the worker's replay ROUTER.
	CauseWrongSocket = "events_not_a_publisher"
	// CauseBlockSize is a worker whose stores carry blocks of another size
	// than the router's --block-size: vLLM's default is 16 tokens, the
	// router's 32 (the seeds' TensorRT-LLM), and the index drops each one.
	CauseBlockSize = "block_size_mismatch"
)

// Blindness is one worker whose cache the router cannot see.
type Blindness struct {
	// Worker is the worker's name.
	Worker string `json:"worker"`
	// Cause is tokenizer_mismatch, no_events, unknown_parent,
	// warm_before_join, index_refilling, events_not_a_publisher or
	// block_size_mismatch.
	Cause string `json:"cause"`
	// Reason is a sentence naming the cause, for people.
	Reason string `json:"reason"`
	// EventBlockSize and IndexBlockSize are, for block_size_mismatch, the
	// worker's blocks and the router's, in tokens.
	EventBlockSize int `json:"event_block_size,omitempty"`
	IndexBlockSize int `json:"index_block_size,omitempty"`
	// Requests is how many answers the window holds.
	Requests int `json:"requests"`
	// Predicted and Reported are the window's cached tokens as the index
	// predicted them and as the worker reported them.
	Predicted int64 `json:"predicted_cached_tokens"`
	Reported  int64 `json:"reported_cached_tokens"`
	// Matched is the share of the window's decisions whose prompt matched
	// at least one block on the chosen worker, 0 to 1.
	Matched float64 `json:"matched_share"`
}

// cacheSample is one answer: cached tokens predicted and reported.
type cacheSample struct {
	predicted, reported int
	matched             bool
}

type cacheWindow struct {
	samples [blindWindow]cacheSample
	n, next int
	blind   bool // the last verdict, so the metric counts transitions
}

func (cw *cacheWindow) add(s cacheSample) {
	cw.samples[cw.next] = s
	cw.next = (cw.next + 1) % blindWindow
	cw.n = min(cw.n+1, blindWindow)
}

// sums returns the window's totals.
func (cw *cacheWindow) sums() (predicted, reported int64, matched int) {
	for _, s := range cw.samples[:cw.n] {
		predicted += int64(s.predicted)
		reported += int64(s.reported)
		if s.matched {
			matched++
		}
	}
	return predicted, reported, matched
}

// looksBlind is the verdict on a window's totals.
func looksBlind(n int, predicted, reported int64) bool {
	return n >= blindMinRequests && reported >= blindMinCached && float64(predicted) < blindRatio*float64(reported)
}

// detector holds every worker's window.
type detector struct {
	mu      sync.Mutex
	windows map[string]*cacheWindow
}

// observe records one answer of wk: predicted cached tokens from the
// decision, reported from the worker's usage. It reports whether the
// worker has just turned blind.
func (d *detector) observe(worker string, s cacheSample) (turned bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.windows == nil {
		d.windows = map[string]*cacheWindow{}
	}
	cw := d.windows[worker]
	if cw == nil {
		cw = &cacheWindow{}
		d.windows[worker] = cw
	}
	cw.add(s)
	p, r, _ := cw.sums()
	was := cw.blind
	cw.blind = looksBlind(cw.n, p, r)
	return cw.blind && !was
}

// reset forgets a worker's window, as when its index is cleared.
func (d *detector) reset(worker string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.windows, worker)
}

// resetAll forgets every window.
func (d *detector) resetAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.windows)
}

// ClearBlind forgets every worker's blindness window, for when the
// router's tokens change (--tokenizer auto switched source): predictions
// made with the old tokens say nothing of the new ones, and would keep a
// worker blind for a whole window after the cause is gone.
func (r *Router) ClearBlind() { r.blind.resetAll() }

// ObserveCache records that b's worker reported cached tokens for the
// prompt b was decided on. The proxy calls it when a worker's answer
// carried usage.prompt_tokens_details.cached_tokens; answers without it
// (vLLM without --enable-prompt-tokens-details) tell nothing.
func (r *Router) ObserveCache(b *Booking, cached int) {
	// Complete may still be giving the booking its whole prompt.
	r.mu.Lock()
	predicted := min(b.isl, b.Overlap*r.blockSize)
	// The worker held at least cached/blockSize blocks of the prompt, and
	// one more may be its own cap on a whole prompt (an engine computes
	// the last token). Past that the index's claim was wrong: where it
	// rested on blocks inferred by adoption, which no event can remove,
	// the answer is the only word that they went.
	var gone []uint64
	if k := cached/r.blockSize + 1; cached < predicted && k < min(b.Overlap, len(b.chain)) {
		gone = slices.Clone(b.chain[k:min(b.Overlap, len(b.chain))])
	}
	r.mu.Unlock()
	if len(gone) > 0 {
		if n := r.index.DropInferred(b.Worker.Name, gone); n > 0 {
			r.metrics.InferredDropped.WithLabelValues(b.Worker.Name).Add(float64(n))
		}
	}
	if r.blind.observe(b.Worker.Name, cacheSample{predicted: predicted, reported: cached, matched: b.Overlap > 0}) {
		r.metrics.Blind.WithLabelValues(b.Worker.Name, r.blindCause(b.Worker).Cause).Inc()
	}
}

// Blind returns the workers whose cache the router cannot see, by name; an
// empty list when routing sees every worker it has heard from.
func (r *Router) Blind() []Blindness {
	r.blind.mu.Lock()
	type verdict struct {
		name    string
		n       int
		p, rep  int64
		matched int
		isBlind bool
	}
	var vs []verdict
	for name, cw := range r.blind.windows {
		p, rep, m := cw.sums()
		if looksBlind(cw.n, p, rep) {
			vs = append(vs, verdict{name, cw.n, p, rep, m, true})
		}
	}
	r.blind.mu.Unlock()
	var out []Blindness
	for _, v := range vs {
		var wk *Worker
		for _, w := range r.pool.Workers() {
			if w.Name == v.name {
				wk = w
			}
		}
		if wk == nil {
			continue // it left the pool
		}
		b := r.blindCause(wk)
		b.Requests, b.Predicted, b.Reported = v.n, v.p, v.rep
		b.Matched = float64(v.matched) / float64(v.n)
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Blindness) int {
		switch {
		case a.Worker < b.Worker:
			return -1
		case a.Worker > b.Worker:
			return 1
		}
		return 0
	})
	return out
}

// wrongPeerHint guesses, from a peer's socket type, which port was given
// for the publisher's.
func wrongPeerHint(peer string) string {
	switch peer {
	case "ROUTER":
		return ": is it the worker's replay endpoint? give that as replay= and the publisher's port as events="
	case "SUB", "XSUB":
		return ": is it another subscriber, or a router that binds? give the worker's publisher"
	}
	return ""
}

// refillPhrase says, for a reason, why the index was cleared.
var refillPhrase = map[string]string{
	RefillRestart: "its publisher restarted (its sequence numbers started again)",
	RefillGap:     "events were lost in a gap (as when its network fails for a while)",
	RefillReadmit: "it passed its health check after failing",
}

// blindCause names the likely cause of wk's blindness from its event
// stream: no events heard, an index refilling after the stream broke off,
// stores dropped for want of their parent, or, when events arrive and
// apply, tokens that differ from the engine's.
func (r *Router) blindCause(wk *Worker) Blindness {
	b := Blindness{Worker: wk.Name}
	st := wk.EventStream()
	switch {
	case wk.Events != "" && st != nil && st.WrongPeer != "":
		// Before silence: the silence is this, and the remedy is the port.
		b.Cause = CauseWrongSocket
		b.Reason = fmt.Sprintf("no KV events from %s: %s is a %s socket, not a publisher (PUB)%s", wk.Name, wk.Events, st.WrongPeer, wrongPeerHint(st.WrongPeer))
	case wk.Events != "" && st != nil && st.LastEventAgeSeconds >= eventSilence.Seconds():
		// A busy engine publishes every step or so; the verdict comes only
		// while the worker answers with cached tokens, so its publisher has
		// stopped, or its port is blocked while HTTP still gets through.
		b.Cause = CauseNoEvents
		b.Reason = fmt.Sprintf("no KV events from %s for %.0f s while it answers (%s %s)", wk.Name, st.LastEventAgeSeconds, st.State, wk.Events)
	case wk.Events != "" && (st == nil || st.Messages == 0):
		state := "no stream"
		if st != nil {
			state = st.State
		}
		b.Cause = CauseNoEvents
		b.Reason = fmt.Sprintf("no KV events from %s (%s %s)", wk.Name, state, wk.Events)
	case st != nil && st.ForeignBlockSize > 0 && st.DroppedBlocks[OutcomeInvalid] > st.AppliedBlocks:
		// Before the refill: blocks of another size never apply, however
		// long the index refills.
		b.Cause, b.EventBlockSize, b.IndexBlockSize = CauseBlockSize, st.ForeignBlockSize, r.blockSize
		b.Reason = fmt.Sprintf("%s's KV events carry blocks of %d tokens and the router indexes blocks of %d, so every store is dropped (%d dropped, %d applied blocks); run kvlens with --block-size %d", wk.Name, st.ForeignBlockSize, r.blockSize, st.DroppedBlocks[OutcomeInvalid], st.AppliedBlocks, st.ForeignBlockSize)
	case st != nil && st.RefillCause != "" && st.RefillAgeSeconds < refillGrace.Seconds():
		// Before the tokens and the parents: a break empties the index of
		// what the worker holds, which also drops stores for their parent.
		b.Cause = CauseRefilling
		b.Reason = fmt.Sprintf("%s's index was cleared %.0f s ago, when %s, and is refilling: %s still holds prompts the index has not heard of since", wk.Name, st.RefillAgeSeconds, refillPhrase[st.RefillCause], wk.Name)
	case st != nil && st.Warming && st.DroppedBlocks[OutcomeUnknownParent] > st.AppliedBlocks:
		b.Cause = CauseWarm
		b.Reason = fmt.Sprintf("%s held blocks before kvlens joined (or lost events in a gap) that its new ones extend (%d dropped, %d applied blocks); give its replay= socket, or reset its cache", wk.Name, st.DroppedBlocks[OutcomeUnknownParent], st.AppliedBlocks)
	case st != nil && st.DroppedBlocks[OutcomeUnknownParent] > st.AppliedBlocks:
		b.Cause = CauseUnknownParent
		b.Reason = fmt.Sprintf("%s's KV events are dropped as unknown parent (%d dropped, %d applied blocks); check its parent0 setting", wk.Name, st.DroppedBlocks[OutcomeUnknownParent], st.AppliedBlocks)
	default:
		b.Cause = CauseTokenizer
		b.Reason = fmt.Sprintf("tokenizer mismatch: %s caches prompts the index never matches; the router's tokens differ from the engine's (try --tokenizer auto or worker)", wk.Name)
	}
	return b
}

// BlindSummary says in one line why KV routing is blind, naming each cause
// once with the workers it affects; "" when bs is empty.
func BlindSummary(bs []Blindness) string {
	var causes []string
	workers := map[string][]string{}
	for _, b := range bs {
		if workers[b.Cause] == nil {
			causes = append(causes, b.Cause)
		}
		workers[b.Cause] = append(workers[b.Cause], b.Worker)
	}
	var out []string
	for _, c := range causes {
		on := strings.Join(workers[c], ", ")
		switch c {
		case CauseTokenizer:
			out = append(out, "tokenizer mismatch on "+on+": the router's tokens differ from the engine's, so the index never matches what they cache (try --tokenizer auto or worker)")
		case CauseNoEvents:
			out = append(out, "no KV events from "+on)
		case CauseUnknownParent:
			out = append(out, "KV events from "+on+" dropped as unknown parent (check parent0=)")
		case CauseWarm:
			out = append(out, on+" cached blocks before kvlens joined that the index never saw (give replay=, or press Reset caches)")
		case CauseWrongSocket:
			out = append(out, "the events= endpoint of "+on+" is no KV-event publisher (is it the replay port? give that as replay=)")
		case CauseBlockSize:
			out = append(out, blockSizeSummary(bs, on))
		case CauseRefilling:
			out = append(out, "the index of "+on+" is refilling after its KV events broke off (a restart, lost events or failed health checks)")
		}
	}
	return strings.Join(out, "; ")
}

// blockSizeSummary says which block sizes the workers on (named for the
// summary) publish against the router's, and the flag that mends it.
func blockSizeSummary(bs []Blindness, on string) string {
	var sizes []string
	index := 0
	for _, b := range bs {
		if b.Cause != CauseBlockSize {
			continue
		}
		index = b.IndexBlockSize
		if n := strconv.Itoa(b.EventBlockSize); !slices.Contains(sizes, n) {
			sizes = append(sizes, n)
		}
	}
	fix := "run kvlens with --block-size " + sizes[0]
	if len(sizes) > 1 {
		fix = "the workers disagree: give them one block size"
	}
	return fmt.Sprintf("KV events from %s carry blocks of %s tokens and the router indexes blocks of %d, so none applies (%s)", on, strings.Join(sizes, " and "), index, fix)
}
