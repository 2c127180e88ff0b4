// Package lograte keeps what a peer can make kvlens log to a few lines an
// interval. A publisher sending malformed KV events as fast as it can, or a
// client reconnecting in a loop, would otherwise write a line each time and
// fill the operator's terminal and disk. Nothing is hidden: the lines held
// back are counted and summed up in one line at the end of the interval,
// and the callers' own counters (the subscriber's stats, the metrics) still
// count every event.
package lograte

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kvlens/kvlens/clock"
)

const (
	// Every is the interval a summary covers.
	Every = 10 * time.Second
	// Burst is how many lines of one kind from one source are logged at
	// once; after them, one more every Every/Burst (2 s).
	Burst = 5
)

// Limiter decides which lines of each kind and source are logged. Its
// methods are safe for concurrent use.
type Limiter struct {
	clk     clock.Clock
	summary func(line string)

	mu     sync.Mutex
	kinds  map[key]*kind
	closed bool
}

type key struct{ what, from string }

// kind is what the Limiter knows of one kind of line from one source.
type kind struct {
	lim   *rate.Limiter
	held  int         // lines held back since since
	since time.Time   // when the first of them was held back
	timer clock.Timer // the summary of them, due Every after since; nil when none is held
}

// New returns a Limiter on clk (nil means the wall clock, which is what a
// terminal and a disk fill by) that hands summary its summary lines.
func New(clk clock.Clock, summary func(line string)) *Limiter {
	if clk == nil {
		clk = clock.Real
	}
	return &Limiter{clk: clk, summary: summary, kinds: map[key]*kind{}}
}

// Allow reports whether to log a line about one more of what (a plural noun
// phrase, such as "malformed KV-event messages") from from (an endpoint or
// a worker the operator named, never a name a peer chooses: each pair is
// remembered until Close). Burst lines pass at once, then one every
// Every/Burst; the rest are counted, and Every after the first of them
// summary is told how many in one line.
func (l *Limiter) Allow(what, from string) bool {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return true
	}
	k := l.kinds[key{what, from}]
	if k == nil {
		k = &kind{lim: rate.NewLimiter(rate.Every(Every/Burst), Burst)}
		l.kinds[key{what, from}] = k
	}
	if k.lim.AllowN(now, 1) {
		return true
	}
	k.held++
	if k.timer == nil {
		k.since = now
		k.timer = l.clk.AfterFunc(Every, func() { l.flush(what, from) })
	}
	return false
}

// flush says how many lines of what from from were held back.
func (l *Limiter) flush(what, from string) {
	l.mu.Lock()
	k := l.kinds[key{what, from}]
	if l.closed || k == nil || k.held == 0 {
		l.mu.Unlock()
		return
	}
	n := k.held
	k.held, k.timer = 0, nil
	l.mu.Unlock()
	l.summary(line(what, from, n, Every))
}

// Close says at once what was held back and not yet summed up, and stops
// the pending summaries; lines allowed after it all pass.
func (l *Limiter) Close() {
	now := l.clk.Now()
	var lines []string
	l.mu.Lock()
	l.closed = true
	for kk, k := range l.kinds {
		if k.held == 0 {
			continue
		}
		k.timer.Stop()
		lines = append(lines, line(kk.what, kk.from, k.held, now.Sub(k.since)))
		k.held, k.timer = 0, nil
	}
	l.mu.Unlock()
	for _, s := range lines {
		l.summary(s)
	}
}

// line is a summary: the kind and source first, so that it reads right
// whatever n is.
func line(what, from string, n int, d time.Duration) string {
	return fmt.Sprintf("%s from %s: %d more not logged in the last %s", what, from, n, max(d.Round(time.Second), time.Second))
}
