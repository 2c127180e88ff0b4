package loadgen

import (
	"sort"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
)

// manualClock is a virtual clock: time moves only when the test advances it,
// and AfterFunc callbacks run, in time order, as it passes their deadline.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c    *manualClock
	at   time.Time
	f    func()
	dead bool
}

func newManualClock() *manualClock { return &manualClock{now: time.Unix(1_700_000_000, 0)} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.dead
	t.dead = true
	return was
}

// pending counts timers not yet fired or stopped.
func (c *manualClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.dead {
			n++
		}
	}
	return n
}

// advance moves time forward by d, firing due timers in order.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		var next *manualTimer
		for _, t := range c.timers {
			if !t.dead && !t.at.After(end) {
				next = t
				break
			}
		}
		if next == nil {
			break
		}
		next.dead = true
		c.now = next.at
		c.mu.Unlock()
		go next.f()
		c.mu.Lock()
	}
	c.now = end
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.dead {
			live = append(live, t)
		}
	}
	c.timers = live
	c.mu.Unlock()
}
