package sim

import (
	"errors"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/kvevents"
)

// EventSink receives each engine step's KV events, in order, as one batch.
// It is called with the runner's lock held, so it must not block: a
// publisher queues the batch and returns.
type EventSink func(kvevents.Batch)

// Runner drives an Engine in real time: it runs a step, waits out the
// step's duration on its clock, then delivers the step's tokens to the
// requests' streams and its KV events to the sink, and runs the next step.
// With nothing to run it schedules nothing, until a Submit. It is the only
// concurrent part of a simulated worker; its methods are safe for
// concurrent use.
type Runner struct {
	clk  clock.Clock
	sink EventSink

	mu      sync.Mutex
	eng     *Engine
	streams map[uint64]*Stream
	nextID  uint64
	// inStep is the step in flight, whose results are delivered when its
	// time is up; nil when the engine is idle.
	inStep *StepResult
	// due is when the step in flight ends on the modelled GPU.
	due time.Time
	// begin is when the step in flight starts on the modelled GPU, later
	// than it was run when a stall holds it; unstalled is when it would
	// have started without the stall, and length is its slowed duration.
	// A stall that is changed or cancelled while it holds the step
	// re-times the step from these.
	begin, unstalled time.Time
	length           time.Duration
	timer            clock.Timer
	closed           bool
	// slowdown multiplies step durations; 1 is the profile's speed.
	slowdown   float64
	stallUntil time.Time
	// obs, when set, sees every delivered token and finished request.
	obs observer
	// late counts steps delivered more than LateStep after they were due.
	late uint64
}

// observer is told of deliveries, for latency metrics.
type observer interface {
	// token sees output token index arrive, gap after the one before it
	// (or, for the first, after the request was submitted).
	token(index int, gap time.Duration)
	// done sees a request end, e2e after it was submitted.
	done(e2e time.Duration)
}

// NewRunner returns a runner for eng on clk; sink may be nil.
func NewRunner(eng *Engine, clk clock.Clock, sink EventSink) *Runner {
	return &Runner{clk: clk, sink: sink, eng: eng, streams: make(map[uint64]*Stream), slowdown: 1}
}

// Stream is one request's output as the runner delivers it.
type Stream struct {
	// ID is the engine's request id.
	ID uint64
	// Submitted is when the request reached the runner.
	Submitted time.Time

	mu     sync.Mutex
	tokens []Token
	fin    *Finished
	// lastAt is when the latest token arrived.
	lastAt time.Time
	ready  chan struct{}
	// notify, if set, is called whenever tokens or the end arrive.
	notify func()
}

// Ready is signalled whenever tokens or the end arrive.
func (s *Stream) Ready() <-chan struct{} { return s.ready }

// Take moves the tokens delivered so far into dst and returns it, with the
// request's summary once it has ended.
func (s *Stream) Take(dst []Token) ([]Token, *Finished) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dst = append(dst, s.tokens...)
	s.tokens = s.tokens[:0]
	return dst, s.fin
}

func (s *Stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
	if s.notify != nil {
		s.notify()
	}
}

// Submit hands a request to the engine, giving it a fresh id, and returns
// the stream its tokens arrive on.
func (r *Runner) Submit(req Request) (*Stream, error) { return r.SubmitNotify(req, nil) }

// SubmitNotify is Submit for a caller that is told instead of waiting on
// Ready: notify is called whenever tokens or the end arrive. It runs with
// the runner's lock held, so it must not block or call the runner; a
// discrete-event transport schedules an event and returns.
func (r *Runner) SubmitNotify(req Request, notify func()) (*Stream, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("sim: the worker is shutting down")
	}
	r.nextID++
	req.ID = r.nextID
	if err := r.eng.Submit(req); err != nil {
		return nil, err
	}
	s := &Stream{ID: req.ID, Submitted: r.clk.Now(), ready: make(chan struct{}, 1), notify: notify}
	r.streams[req.ID] = s
	if r.inStep == nil && !r.closed {
		r.step()
	}
	return s, nil
}

// Cancel drops a request, as when its client goes away.
func (r *Runner) Cancel(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eng.Cancel(id)
	delete(r.streams, id)
}

// ResetPrefixCache clears the engine's prefix cache and publishes
// AllBlocksCleared, after the events of any step in flight.
func (r *Runner) ResetPrefixCache() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.eng.ResetPrefixCache()
	if r.inStep != nil {
		r.inStep.Events = append(r.inStep.Events, ev...)
		return
	}
	r.publish(ev)
}

// Stats returns the engine's state and counters, and the runner's count of
// late steps.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.eng.Stats()
	s.Late = r.late
	return s
}

// Profile returns the engine's profile.
func (r *Runner) Profile() Profile { return r.eng.Profile() }

// SetSlowdown makes every step take f times its modelled duration (f ≥ 1
// slows the engine down).
func (r *Runner) SetSlowdown(f float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f <= 0 {
		f = 1
	}
	r.slowdown = f
}

// Stall pauses the engine for d from now: the step after the one in flight
// starts no sooner than that. It replaces any earlier stall, so d = 0
// cancels one: a step held by the old stall then starts at once (or when
// the new, shorter stall ends).
func (r *Runner) Stall(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clk.Now()
	r.stallUntil = now.Add(max(d, 0))
	if r.inStep == nil || r.timer == nil || !r.begin.After(now) {
		return // no step is waiting: the next one reads stallUntil
	}
	begin := r.unstalled
	if r.stallUntil.After(begin) {
		begin = r.stallUntil
	}
	if now.After(begin) {
		begin = now
	}
	if begin.Equal(r.begin) || !r.timer.Stop() {
		return // unchanged, or the step's end is already being delivered
	}
	r.begin = begin
	r.due = begin.Add(r.length)
	r.timer = r.clk.AfterFunc(r.due.Sub(now), r.endStep)
}

// stalled returns how much longer the stall lasts.
func (r *Runner) stalled() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(0, r.stallUntil.Sub(r.clk.Now()))
}

// Close stops stepping; streams in flight get no more tokens.
func (r *Runner) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
}

// maxLag is how far behind its schedule a runner may fall and still make
// up the time. A host further behind than this was stopped (suspended, or
// held in a debugger) rather than busy, and catching up would only flood
// the clients with a second's worth of steps at once.
const maxLag = time.Second

// LateStep is how long after its modelled end a step may be delivered
// before the runner counts it late (Stats.Late). A wall-clock timer on an
// idle host fires about 1 ms late; a step delivered this late has added a
// visible share of an engine step to its tokens' latency, from a host
// too busy to keep the model's pace.
const LateStep = 20 * time.Millisecond

// step runs one engine step and schedules its end; r.mu is held.
//
// A step that follows another begins when that one ended on the modelled
// GPU (r.due), not when its timer happened to fire. A wall-clock timer fires
// late (0.8 ms on average, 1.6 ms at the 95th percentile, on a 2-core host
// shared with other work), and delivering a step takes host time too.
// Scheduling each step from the moment that work was done added both to
// every step, so a real-time engine ran a few percent slower than its
// profile, and slower still whenever the host was busy. On a discrete-event
// clock timers are never late, and both rules give the same times.
func (r *Runner) step() {
	res := r.eng.Step()
	if res.Batch.Decodes == 0 && len(res.Batch.Chunks) == 0 {
		r.inStep = nil // nothing to run: wait for a Submit
		r.publish(res.Events)
		return
	}
	now := r.clk.Now()
	begin := r.due
	if r.inStep == nil || now.Sub(begin) > maxLag {
		begin = now // from idle, or after the host stopped
	}
	r.unstalled = begin
	if r.stallUntil.After(begin) {
		begin = r.stallUntil
	}
	r.inStep = res
	r.begin = begin
	r.length = time.Duration(float64(res.Duration) * r.slowdown)
	r.due = begin.Add(r.length)
	r.timer = r.clk.AfterFunc(r.due.Sub(now), r.endStep)
}

// endStep delivers the step in flight and starts the next one.
func (r *Runner) endStep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.inStep
	if r.closed || res == nil {
		return
	}
	now := r.clk.Now()
	if now.Sub(r.due) > LateStep {
		r.late++
	}
	for j, t := range res.Tokens {
		s := r.streams[t.ID]
		if s == nil {
			continue // cancelled while the step ran
		}
		s.mu.Lock()
		s.tokens = append(s.tokens, t)
		if j == len(res.Tokens)-1 || res.Tokens[j+1].ID != t.ID {
			// A request's tokens of a step are adjacent. Its last one and
			// its end, if it ended, are handed over together, so that a
			// reader never takes the last token without the end: the
			// server puts finish_reason on the last token's chunk, as
			// vLLM does.
			s.fin = endOf(res.Finished, t.ID)
		}
		prev := s.lastAt
		if t.Index == 0 {
			prev = s.Submitted
		}
		s.lastAt = now
		s.mu.Unlock()
		if r.obs != nil {
			r.obs.token(t.Index, now.Sub(prev))
		}
		s.signal()
	}
	for _, f := range res.Finished {
		s := r.streams[f.ID]
		if s == nil {
			continue
		}
		delete(r.streams, f.ID)
		s.mu.Lock()
		if s.fin == nil {
			s.fin = &f // an end with no token in its step
		}
		s.mu.Unlock()
		if r.obs != nil {
			r.obs.done(now.Sub(s.Submitted))
		}
		s.signal()
	}
	r.publish(res.Events)
	r.step()
}

// endOf returns a copy of the end of request id among ends, nil when it
// did not end; a step ends few requests, so a scan costs less than a map.
func endOf(ends []Finished, id uint64) *Finished {
	for i := range ends {
		if ends[i].ID == id {
			f := ends[i] // ends is reused by the engine's next step
			return &f
		}
	}
	return nil
}

// publish hands events to the sink as one batch; r.mu is held.
func (r *Runner) publish(ev []kvevents.Event) {
	if len(ev) == 0 || r.sink == nil {
		return
	}
	ts := r.clk.Now()
	r.sink(kvevents.Batch{TS: float64(ts.UnixNano()) / 1e9, Events: ev})
}
