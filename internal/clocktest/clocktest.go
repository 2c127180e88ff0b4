// Package clocktest is a clock.Clock for tests whose time moves only when
// the test moves it.
package clocktest

import (
	"slices"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
)

// Manual is a clock that stands still until Advance moves it. Its timers
// fire as time.AfterFunc's do, each in its own goroutine, in the order of
// their times; or, made by NewInline, one after the other in Advance's
// caller. It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
	inline bool // fire timers in Advance's goroutine
}

type timer struct {
	c    *Manual
	at   time.Time
	wait time.Duration // the wait it was set for
	f    func()
	dead bool // fired or stopped
}

// New returns a Manual clock reading now.
func New(now time.Time) *Manual { return &Manual{now: now} }

// NewInline returns a Manual clock reading now whose timers fire in the
// goroutine that calls Advance, each returning before the next starts, so
// that what they did is done when Advance returns. A timer's function must
// not call Advance.
func NewInline(now time.Time) *Manual { return &Manual{now: now, inline: true} }

// Now implements clock.Clock.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements clock.Clock.
func (c *Manual) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), wait: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop implements clock.Timer.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.dead
	t.dead = true
	return was
}

// Advance moves the clock on by d. Each timer that falls due fires, earliest
// first, with the clock at its time as it starts; the clock then reads
// d later than before.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *timer
		for _, t := range c.timers {
			if !t.dead && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		next.dead = true
		c.now = next.at
		c.mu.Unlock()
		if c.inline {
			next.f()
		} else {
			go next.f()
		}
		c.mu.Lock()
	}
	c.now = end
	c.timers = slices.DeleteFunc(c.timers, func(t *timer) bool { return t.dead })
	c.mu.Unlock()
}

// Pending returns the waits the timers not yet fired or stopped were set
// for, in the order they were set.
func (c *Manual) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []time.Duration
	for _, t := range c.timers {
		if !t.dead {
			ds = append(ds, t.wait)
		}
	}
	return ds
}
