// Package des is a discrete-event loop: a virtual clock whose time moves
// only from one scheduled event to the next, so that a simulated hour runs
// in as long as its events take to compute.
//
// It is how kvlens runs its whole pipeline (load generator, router and
// simulated engines) in virtual time. Those are event-driven: everything
// they wait for is an AfterFunc on their clock or a callback from an
// event. So a single goroutine, the loop's driver, runs every callback, one
// at a time, in the order of their due times, ties broken by the order they
// were scheduled in. Nothing else runs, so a run is a pure function of its
// inputs and seeds: reproducible byte for byte.
package des

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
)

// Epoch is where a Loop's time starts unless told otherwise: a fixed instant,
// so that nothing in a run depends on the wall clock.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Loop is a virtual clock and the event loop that drives it. It implements
// clock.Clock and clock.Sleeper: AfterFunc schedules an event, and Sleep
// (or Run) runs the events due within its time, in the caller's goroutine.
// Its methods are safe for concurrent use, but a reproducible run calls them
// only from the driver and from the events themselves.
type Loop struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	events eventHeap
	ran    uint64
}

// New returns a loop whose time starts at start (Epoch when zero).
func New(start time.Time) *Loop {
	if start.IsZero() {
		start = Epoch
	}
	return &Loop{now: start}
}

// Now returns the loop's current time.
func (l *Loop) Now() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.now
}

// AfterFunc schedules f at d from now (a negative d counts as 0). Unlike
// the real clock's, f runs in the goroutine driving the loop, after every
// event due earlier, and after events due at the same time that were
// scheduled before it.
func (l *Loop) AfterFunc(d time.Duration, f func()) clock.Timer {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	e := &event{at: l.now.Add(max(d, 0)), seq: l.seq, f: f, loop: l}
	heap.Push(&l.events, e)
	return e
}

// Events counts the events run so far.
func (l *Loop) Events() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ran
}

// Pending counts the events scheduled and not yet run or stopped.
func (l *Loop) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if !e.stopped {
			n++
		}
	}
	return n
}

// RunUntil runs every event due at or before t, including those the events
// schedule, then sets the time to t (if it is later than now).
func (l *Loop) RunUntil(t time.Time) {
	for l.runNext(t) {
	}
	l.mu.Lock()
	if t.After(l.now) {
		l.now = t
	}
	l.mu.Unlock()
}

// Run runs the loop for d of virtual time.
func (l *Loop) Run(d time.Duration) { l.RunUntil(l.Now().Add(d)) }

// cancelCheck is how many events run between checks of a Sleep's context.
const cancelCheck = 4096

// Sleep runs the loop for d of virtual time, or until ctx ends.
func (l *Loop) Sleep(ctx context.Context, d time.Duration) error {
	end := l.Now().Add(d)
	for n := 0; ; n++ {
		if n%cancelCheck == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if !l.runNext(end) {
			break
		}
	}
	l.mu.Lock()
	if end.After(l.now) {
		l.now = end
	}
	l.mu.Unlock()
	return ctx.Err()
}

// runNext runs the earliest event due at or before t; it reports false if
// there was none.
func (l *Loop) runNext(t time.Time) bool {
	l.mu.Lock()
	for len(l.events) > 0 && l.events[0].stopped {
		heap.Pop(&l.events)
	}
	if len(l.events) == 0 || l.events[0].at.After(t) {
		l.mu.Unlock()
		return false
	}
	e := heap.Pop(&l.events).(*event)
	e.fired = true
	if e.at.After(l.now) {
		l.now = e.at
	}
	l.ran++
	l.mu.Unlock()
	e.f()
	return true
}

// event is one scheduled call; it is also its clock.Timer.
type event struct {
	at      time.Time
	seq     uint64
	f       func()
	loop    *Loop
	stopped bool
	fired   bool
}

// Stop cancels the event; it reports whether it did so before it ran.
func (e *event) Stop() bool {
	e.loop.mu.Lock()
	defer e.loop.mu.Unlock()
	if e.stopped || e.fired {
		return false
	}
	e.stopped = true
	return true
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
