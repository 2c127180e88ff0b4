package clock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Warp is a clock that starts in the past and runs faster than its base
// clock until it catches up with it, and is the base clock from then on.
// A simulated demo runs on it to play its first minutes ahead of the wall
// clock (a warm-up), so that by the time the two meet its caches and
// windows hold steady traffic, and every timestamp after that is the wall
// clock's.
//
// With span S and speed k, started at base time t0, the warp reads
// t0 + S/k − S at t0, runs k times as fast as its base, and meets it at
// base time t0 + S/k. Its times are derived from the base's by Add, so on
// the real clock they keep the monotonic reading and differences between
// them are immune to steps of the wall clock.
//
// Slow lowers the speed on the way, for a host that cannot keep the pace:
// the warp's time runs on from where it is, and the meeting point moves
// later.
type Warp struct {
	base  Clock
	begin time.Time // warp time at the start
	pace  atomic.Pointer[pace]
	mu    sync.Mutex // serialises Slow
}

// pace is one stretch of a warp at one speed: at base time start the warp
// read origin, and it meets its base at meet.
type pace struct {
	start  time.Time // base time the stretch began
	origin time.Time // warp time at start
	meet   time.Time // base time, and warp time, at which the two meet
	speed  float64
}

var _ Clock = (*Warp)(nil)

// NewWarp returns a clock over base that plays span of time at speed times
// base's pace, starting now, and meets base after span/speed. A speed
// below 1 counts as 1, and a span of 0 or less is no warp at all.
func NewWarp(base Clock, span time.Duration, speed float64) *Warp {
	speed = max(speed, 1)
	span = max(span, 0)
	start := base.Now()
	run := time.Duration(float64(span) / speed) // base time the warp takes
	w := &Warp{base: base, begin: start.Add(run - span)}
	w.pace.Store(&pace{start: start, origin: start.Add(run - span), meet: start.Add(run), speed: speed})
	return w
}

// Now implements Clock.
func (w *Warp) Now() time.Time { return w.pace.Load().at(w.base.Now()) }

// AfterFunc implements Clock: f runs at the base time at which the warp
// reaches now+d. Part of d that lies beyond the meeting point passes at
// the base's pace. A timer armed before Slow would fire early; it waits
// again for the rest.
func (w *Warp) AfterFunc(d time.Duration, f func()) Timer {
	p, b := w.pace.Load(), w.base.Now()
	due := p.at(b).Add(d)
	if !b.Before(p.meet) {
		// Met: Slow changes nothing any more, and one racing this call
		// moved the meeting point by next to nothing (the gap it divides
		// was next to nothing).
		return w.base.AfterFunc(max(d, 0), f)
	}
	return w.await(func(p *pace, b time.Time) time.Duration { return p.baseAt(due).Sub(b) }, f)
}

// Slow lowers the warp's speed to speed from now on; a speed at or above
// the current one, or at or below 1 (the warp would never meet its base),
// or a warp that has met its base, is left as it is. It reports whether
// the speed changed.
func (w *Warp) Slow(speed float64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, b := w.pace.Load(), w.base.Now()
	if speed >= p.speed || speed <= 1 || !b.Before(p.meet) {
		return false
	}
	t := p.at(b)
	gap := b.Sub(t) // the warp is this far behind its base, and closes it at speed−1
	w.pace.Store(&pace{start: b, origin: t, meet: b.Add(time.Duration(float64(gap) / (speed - 1))), speed: speed})
	return true
}

// at is the warp's time at base time b.
func (p *pace) at(b time.Time) time.Time {
	if !b.Before(p.meet) {
		return b
	}
	return p.origin.Add(time.Duration(float64(b.Sub(p.start)) * p.speed))
}

// baseAt is the base time at which the warp reaches t.
func (p *pace) baseAt(t time.Time) time.Time {
	if !t.Before(p.meet) {
		return t
	}
	return p.start.Add(time.Duration(float64(t.Sub(p.origin)) / p.speed))
}

// Left is the base time until the warp meets its base; 0 once it has.
func (w *Warp) Left() time.Duration { return max(w.pace.Load().meet.Sub(w.base.Now()), 0) }

// Played is the time the warp plays from its start to the meeting point:
// the span it was made with, and more once Slow has moved the meeting
// point later.
func (w *Warp) Played() time.Duration { return w.pace.Load().meet.Sub(w.begin) }

// Speed is how many times faster than its base the warp runs until they meet.
func (w *Warp) Speed() float64 { return w.pace.Load().speed }

// AtMeet calls f, in its own goroutine, once the warp has met its base
// (at once if it has), unless the returned Timer is stopped first.
func (w *Warp) AtMeet(f func()) Timer {
	return w.await(func(p *pace, b time.Time) time.Duration { return p.meet.Sub(b) }, f)
}

// await calls f once wait, the base time left until the moment it waits
// for under the warp's pace, is 0 or less. It sleeps on the base clock for
// what wait says and asks again when it wakes, since Slow may have moved
// the moment later meanwhile.
func (w *Warp) await(wait func(p *pace, b time.Time) time.Duration, f func()) Timer {
	t := &warpTimer{w: w, wait: wait, f: f}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.arm()
	return t
}

// warpTimer is a pending call of Warp.await.
type warpTimer struct {
	w    *Warp
	wait func(p *pace, b time.Time) time.Duration
	f    func()

	mu   sync.Mutex
	base Timer // the base clock's timer now armed
	done bool  // f ran or is running, or Stop was called
}

// arm waits on the base clock for what is left; t.mu is held.
func (t *warpTimer) arm() {
	left := t.wait(t.w.pace.Load(), t.w.base.Now())
	t.base = t.w.base.AfterFunc(max(left, 0), t.fire)
}

func (t *warpTimer) fire() {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	if t.wait(t.w.pace.Load(), t.w.base.Now()) > 0 {
		t.arm() // the warp was slowed while this waited
		t.mu.Unlock()
		return
	}
	t.done = true
	t.mu.Unlock()
	t.f()
}

// Stop implements Timer.
func (t *warpTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.base.Stop()
	return true
}
