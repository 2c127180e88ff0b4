package clock

import "time"

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
type Warp struct {
	base   Clock
	start  time.Time // base time the warp began
	origin time.Time // warp time at start
	meet   time.Time // base time, and warp time, at which the two meet
	span   time.Duration
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
	return &Warp{base: base, start: start, origin: start.Add(run - span), meet: start.Add(run), span: span, speed: speed}
}

// Now implements Clock.
func (w *Warp) Now() time.Time { return w.at(w.base.Now()) }

// AfterFunc implements Clock: f runs at the base time at which the warp
// reaches now+d. Part of d that lies beyond the meeting point passes at
// the base's pace.
func (w *Warp) AfterFunc(d time.Duration, f func()) Timer {
	b := w.base.Now()
	due := w.baseAt(w.at(b).Add(d))
	return w.base.AfterFunc(max(due.Sub(b), 0), f)
}

// at is the warp's time at base time b.
func (w *Warp) at(b time.Time) time.Time {
	if !b.Before(w.meet) {
		return b
	}
	return w.origin.Add(time.Duration(float64(b.Sub(w.start)) * w.speed))
}

// baseAt is the base time at which the warp reaches t.
func (w *Warp) baseAt(t time.Time) time.Time {
	if !t.Before(w.meet) {
		return t
	}
	return w.start.Add(time.Duration(float64(t.Sub(w.origin)) / w.speed))
}

// Left is the base time until the warp meets its base; 0 once it has.
func (w *Warp) Left() time.Duration { return max(w.meet.Sub(w.base.Now()), 0) }

// Span is the time the warp plays ahead of its base.
func (w *Warp) Span() time.Duration { return w.span }

// Speed is how many times faster than its base the warp runs until they meet.
func (w *Warp) Speed() float64 { return w.speed }

// AtMeet calls f, in its own goroutine, once the warp has met its base
// (at once if it has), unless the returned Timer is stopped first.
func (w *Warp) AtMeet(f func()) Timer { return w.base.AfterFunc(w.Left(), f) }
