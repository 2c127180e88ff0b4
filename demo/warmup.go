package demo

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

// warmTransport is a lane's load transport during a warm-up: each turn
// started while the warp plays goes in process (simulate.Transport: the
// lane's own router decides and books it, and its own simulated worker's
// runner steps it, as in virtual time), and each turn started after the
// warp has met the wall clock goes over HTTP through the router proxy, as
// every turn does without a warm-up. A turn started just before the meeting
// point ends in process.
//
// Why: over HTTP every token crosses two loopback hops, a write and a read
// on each, and that, not the engines, is what a warm-up at several times
// real time costs (43% of the demo's CPU time is system calls; a 4x
// warm-up over HTTP took 1.13 cores and slowed to 2x on this project's
// 2-core machine, and in process it takes a quarter of a core,
// docs/dashboard.md). In process the same router, engines and generator
// play the same traffic, only without the sockets, whose microseconds the
// figures cannot show.
type warmTransport struct {
	warp            *clock.Warp
	inProcess, http loadgen.AsyncTransport
}

// Start implements loadgen.AsyncTransport.
func (t *warmTransport) Start(req loadgen.TurnRequest, onFirst func(string, time.Duration), done func(loadgen.Result)) func(error) {
	if t.warp.Left() > 0 {
		return t.inProcess.Start(req, onFirst, done)
	}
	return t.http.Start(req, onFirst, done)
}

// warmLateShare is the share of a simulated worker's steps that may be
// delivered late (sim.LateStep) in the last window of a warm-up, the one
// the tiles show at its end, before its windows are dropped: past it, the
// host could not keep the warp's pace and the figures it measured are
// slower than the model's. Late steps delay at most that share of the
// first tokens, so a window's p95 stays at or under the p97.5 of the same
// traffic delivered on time; a p50, under its p52.5. Measured with
// scripts/warmprobe on a 2-core host kept busy (docs/dashboard.md, "Warm
// start"), warm-ups with up to 2.5% of their steps late read kv's TTFT p95
// within the range of idle ones; 1% dropped warm-ups that a single busy
// core or a browser beside the demo caused.
const warmLateShare = 0.025

// A warm-up slows (warmWatch.pace) when, over paceInterval of wall time in
// or just before its last window, a worker that ran at least paceMinSteps
// steps delivered more than paceLateShare of them late: under
// warmLateShare, so that it slows before its windows would be dropped. At
// 6x a worker runs 350-450 steps in 2 s. It never plays slower than
// minWarmSpeed (the default 2 min at 6x, first looked at 8 s in and 60 s
// behind the wall clock, is then over about a minute after start), nor
// faster again, since the engines' timers are set at the pace in force.
const (
	paceInterval  = 2 * time.Second
	paceMinSteps  = 50
	paceLateShare = 0.01
	minWarmSpeed  = 2
)

// warmWatch watches the simulated workers' punctuality during a warm-up:
// it slows the warp while they fall behind (pace), and judges at the end
// whether the window the warm-up leaves was measured on time (behind).
type warmWatch struct {
	names   []string
	workers []*sim.Server
	window  time.Duration // the load's window: the warp time the tiles show at the end

	mu   sync.Mutex
	from []sim.Stats // at the look before the last window; at the start until then
}

// newWarmWatch watches the simulated workers of lanes.
func newWarmWatch(lanes []*lane, window time.Duration) *warmWatch {
	w := &warmWatch{window: window}
	for _, l := range lanes {
		if l.fleet == nil {
			continue
		}
		for i, s := range l.fleet.Workers {
			w.names, w.workers = append(w.names, l.workerName(i)), append(w.workers, s)
		}
	}
	w.from = w.stats()
	return w
}

func (w *warmWatch) stats() []sim.Stats {
	out := make([]sim.Stats, len(w.workers))
	for i, s := range w.workers {
		out[i] = s.Runner().Stats()
	}
	return out
}

// pace slows warp while the host cannot keep its pace: every paceInterval
// from the look before the last window begins, it reads each worker's
// steps since the last look, and when a worker delivered more than
// paceLateShare of them late at two looks in a row (lateLooks), lowers the
// speed by a quarter (slower). Late steps distort the warm figures, and
// past warmLateShare in the last window its windows are dropped (behind):
// a slower warm-up that keeps its windows shows steady figures sooner than
// one that is dropped and settles again. The steps behind judges begin at
// the same look. It returns when the warp meets the wall clock or ctx
// ends.
func (w *warmWatch) pace(ctx context.Context, warp *clock.Warp, logf func(string, ...any)) {
	// A warm-up no longer than the window is judged from its start.
	last, watching := w.stats(), lastWindow(warp, w.window)
	var looks lateLooks
	tick := time.NewTicker(paceInterval)
	defer tick.Stop()
	for warp.Left() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := w.stats()
		// Only the last window is shown at the end: steps late before it
		// (Chromium starting beside the demo, say) distort nothing a
		// visitor reads, and cost no pace. From the look before it begins,
		// its steps count, a few seconds early rather than late.
		ahead := time.Duration(float64(paceInterval) * warp.Speed())
		if lastWindow(warp, w.window+ahead) {
			if !watching {
				watching = true
				w.mu.Lock()
				w.from = now
				w.mu.Unlock()
			}
			why := lateSince(w.names, last, now)
			if looks.slow(why) && warp.Slow(slower(warp.Speed())) {
				logf("the host cannot keep the warm-up's pace (%s): it now plays at %g× real time, and figures show in %s", why, warp.Speed(), warp.Left().Round(time.Second))
			}
		}
		last = now
	}
}

// lateLooks is what pace remembers of its looks: whether the last one
// found a worker late. One late look is let be: a virtual machine's host
// stalls every vCPU for 10-30 ms now and then (this project's 2-core VM
// did every 10-20 s with the demo running), which at 6x makes every
// worker's next five or six steps late at once, about 1.5% of a look's,
// and costs the figures a few tokens delivered late; a host that cannot
// keep the pace is late look after look.
type lateLooks struct{ before bool }

// slow takes a look's verdict (lateSince's; "" when no worker was late)
// and says whether to slow: at the second late look in a row. The speed
// it slows to is then judged afresh, by two more.
func (l *lateLooks) slow(why string) bool {
	slow := why != "" && l.before
	l.before = why != "" && !slow
	return slow
}

// slower is the speed a warm-up playing at speed slows to: a quarter less,
// rounded down to a quarter (4, 3, 2.25; 6, 4.5, 3.25, 2.25), and no less
// than minWarmSpeed.
func slower(speed float64) float64 {
	return max(minWarmSpeed, math.Floor(speed*0.75*4)/4)
}

// behind names a worker that delivered more than warmLateShare of its
// steps late since the look before the last window (or since the start,
// for a warm-up no longer than the window, or one pace did not watch), and
// how many; "" when none did.
func (w *warmWatch) behind() string {
	w.mu.Lock()
	from := w.from
	w.mu.Unlock()
	now := w.stats()
	for i := range now {
		if st := since(from[i], now[i]); tooLate(st) {
			return fmt.Sprintf("%s delivered %d of its %d steps in the last %s more than %s late", w.names[i], st.Late, st.Steps, w.window, sim.LateStep)
		}
	}
	return ""
}

// tooLate says whether a worker delivered more than warmLateShare of its
// steps late.
func tooLate(st sim.Stats) bool {
	return st.Steps > 0 && float64(st.Late) > warmLateShare*float64(st.Steps)
}

// lateSince names the first worker that, between its stats last and now,
// ran at least paceMinSteps steps and delivered more than paceLateShare of
// them late, and how many; "" when none did.
func lateSince(names []string, last, now []sim.Stats) string {
	for i := range now {
		st := since(last[i], now[i])
		if st.Steps >= paceMinSteps && float64(st.Late) > paceLateShare*float64(st.Steps) {
			return fmt.Sprintf("%s delivered %d of its last %d steps more than %s late", names[i], st.Late, st.Steps, sim.LateStep)
		}
	}
	return ""
}

// since is a worker's steps, and late ones, between its stats from and now.
func since(from, now sim.Stats) sim.Stats {
	return sim.Stats{Steps: now.Steps - from.Steps, Late: now.Late - from.Late}
}

// lastWindow says whether warp has at most window of its time left to play
// before it meets its base, at the pace in force.
func lastWindow(warp *clock.Warp, window time.Duration) bool {
	return time.Duration(float64(warp.Left())*warp.Speed()) <= window
}
