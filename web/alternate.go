package web

import (
	"fmt"
	"sync"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

// Alternation runs the A/B comparison on one fleet that cannot be split,
// such as real workers: the two policies take turns of Every each, and the
// page compares the live window of the one with the last settled window of
// the other, labelled with its age.
type Alternation struct {
	// Pair are the two policies, A then B.
	Pair [2]string
	// Every is the length of a turn; DefaultTurn when zero.
	Every time.Duration
}

// DefaultTurn is an alternation's turn: a settled window (SettleTime) and
// a minute of it, the dashboard's rolling window.
const DefaultTurn = 90 * time.Second

// alternator is an Alternation's state.
type alternator struct {
	mu     sync.Mutex
	pair   [2]string
	every  time.Duration
	turnAt time.Time // when the live policy's turn began
	kept   [2]*keptWindow
}

// keptWindow is a policy's last settled window, kept when its turn ended.
type keptWindow struct {
	window loadgen.Stats
	shed   int64
	at     time.Time
}

func newAlternator(a Alternation) *alternator {
	if a.Every <= 0 {
		a.Every = DefaultTurn
	}
	return &alternator{pair: a.Pair, every: a.Every}
}

// changed forgets the kept windows after a change that makes them
// incomparable with what comes next (concurrency, a cache reset, a fault,
// a start), and gives the live policy a whole new turn.
func (a *alternator) changed(kind string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if kind == "mode" {
		return
	}
	a.kept = [2]*keptWindow{}
	a.turnAt = time.Time{}
}

// setPair makes policy lane i's (0 for A) and forgets that lane's kept
// window; it returns the policy the fleet should run now.
func (a *alternator) setPair(i int, policy, live string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.pair[i]
	a.pair[i], a.kept[i] = policy, nil
	if live == old {
		// The lane on its turn changed policy: the new one runs at once.
		a.turnAt = time.Time{}
		return policy
	}
	return live
}

// Pair returns the two policies.
func (a *alternator) Pair() [2]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pair
}

// due says, at now, which policy should run: the live one until its turn
// ends, then the other; w and shed are the live window and shed count,
// kept as the ending turn's when the window is settled.
func (a *alternator) due(now time.Time, live string, w loadgen.Stats, shed int64) (next string, switching bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.index(live)
	if cur < 0 {
		return a.pair[0], true
	}
	if a.turnAt.IsZero() {
		a.turnAt = now
	}
	if now.Sub(a.turnAt) < a.every {
		return live, false
	}
	if answering(w) == "" {
		a.kept[cur] = &keptWindow{window: w, shed: shed, at: now}
	}
	a.turnAt = now
	return a.pair[1-cur], a.pair[1-cur] != live
}

// index is the pair's index of policy, or -1.
func (a *alternator) index(policy string) int {
	for i, p := range a.pair {
		if p == policy {
			return i
		}
	}
	return -1
}

// sides are the comparison's two columns at now: the live policy's window
// and the other's kept one.
func (a *alternator) sides(now time.Time, live string, snap loadgen.Snapshot, shed int64) []side {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]side, 2)
	for i, p := range a.pair {
		out[i] = side{policy: p, target: snap.Target}
		switch k := a.kept[i]; {
		case p == live:
			out[i].window, out[i].shed, out[i].stopped = snap.Window, shed, !snap.Running
			out[i].settling, out[i].answering, out[i].rates = settling(snap.Window), answering(snap.Window), flowing(snap.Window)
		case k != nil:
			out[i].window, out[i].shed, out[i].ago = k.window, k.shed, ago(now.Sub(k.at))
			if flowing(k.window) != "" {
				// Its turn ended after the answers settled, before the
				// rates did (a turn at 180 conversations may): they are
				// not compared until a turn that lets them.
				out[i].rates = "rates: its turn ended before they settled"
			}
		default:
			out[i].none = true
			left := a.every
			if !a.turnAt.IsZero() {
				left = max(0, a.every-now.Sub(a.turnAt))
			}
			out[i].settling = fmt.Sprintf("its turn comes in %d s", int(left.Round(time.Second)/time.Second))
			out[i].answering, out[i].rates = out[i].settling, out[i].settling
		}
	}
	return out
}

// ago says how long ago a window ended, as its label shows it: in steps of
// 10 s for the first minute, so that a turn shorter than a minute does not
// keep a window "just now" for all of the next one, and in minutes after.
func ago(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d/(10*time.Second))*10)
	case d < 2*time.Minute:
		return "1 min ago"
	}
	return fmt.Sprintf("%d min ago", int(d/time.Minute))
}

// alternate is the tick's part of an alternation: at the end of a turn it
// keeps the ending window and switches the fleet to the other policy, as a
// change (a new window and a mark), and says whether it did.
func (s *Server) alternate(now time.Time, snap loadgen.Snapshot) bool {
	rt := s.lanes[0].Router
	next, switching := s.alt.due(now, rt.PolicyName(), snap.Window, rt.Counts().Shed)
	if !switching {
		return false
	}
	err := s.change(Mark{Kind: "mode", Label: "turn: " + s.opts.Describe(next)}, func() error { return rt.SwitchPolicy(next) })
	if err != nil {
		s.history.mark(Mark{T: now.Unix(), Kind: "mode", Label: "turn failed: " + err.Error()})
	}
	return true
}
