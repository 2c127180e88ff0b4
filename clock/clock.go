// Package clock is the time source that everything which waits or measures
// takes, so that the same logic can run in real time or, driven by a
// discrete-event loop, in virtual time.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and schedules wake-ups.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop cancels the call; it reports whether it did so before f ran.
	Stop() bool
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// A Sleeper is a clock that runs time itself: a discrete-event loop, whose
// time passes only while its driver sleeps on it.
type Sleeper interface {
	// Sleep returns once d has passed on the clock, or ctx has ended.
	Sleep(ctx context.Context, d time.Duration) error
}

// Sleep waits d on c, or until ctx ends. On a Sleeper it lets the clock run
// time for d; on any other clock it waits for an AfterFunc.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if s, ok := c.(Sleeper); ok {
		return s.Sleep(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	fired := make(chan struct{})
	t := c.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
