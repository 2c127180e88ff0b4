package clock

import (
	"testing"
	"time"
)

// manual is a base clock whose time moves only when a test sets it, and
// whose AfterFunc records the delay asked for instead of waiting.
type manual struct {
	now    time.Time
	delays []time.Duration
}

func (m *manual) Now() time.Time { return m.now }

func (m *manual) AfterFunc(d time.Duration, f func()) Timer {
	m.delays = append(m.delays, d)
	return stopped{}
}

type stopped struct{}

func (stopped) Stop() bool { return false }

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestWarpNow(t *testing.T) {
	// 2 min played at 4x: the warp starts 90 s in the past and meets the
	// base 30 s after it starts.
	tests := []struct {
		name string
		base time.Duration // since the warp began
		want time.Duration // warp time, from t0
	}{
		{"at the start the warp is span/speed − span in the past", 0, -90 * time.Second},
		{"10 s of base time are 40 s of warp time", 10 * time.Second, -50 * time.Second},
		{"a moment before the meeting point the warp is just behind", 30*time.Second - time.Millisecond, 30*time.Second - 4*time.Millisecond},
		{"at the meeting point the two agree", 30 * time.Second, 30 * time.Second},
		{"after the meeting point the warp is its base", 75 * time.Second, 75 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &manual{now: t0}
			w := NewWarp(base, 2*time.Minute, 4)
			base.now = t0.Add(tt.base)
			if got := w.Now().Sub(t0); got != tt.want {
				t.Errorf("warp time %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWarpAfterFunc(t *testing.T) {
	tests := []struct {
		name string
		at   time.Duration // base time since the warp began
		d    time.Duration // warp time asked for
		want time.Duration // base time the timer waits
	}{
		{"before the meeting point, warp time passes at 4x", 0, 40 * time.Second, 10 * time.Second},
		{"an engine step of 30 ms takes 7.5 ms", 5 * time.Second, 30 * time.Millisecond, 7500 * time.Microsecond},
		// At 20 s the warp reads −10 s: 40 s of warp time to the meeting
		// point take 10 s, the other 20 s pass 1:1.
		{"a timer that straddles the meeting point", 20 * time.Second, 60 * time.Second, 30 * time.Second},
		{"a deadline exactly at the meeting point", 20 * time.Second, 40 * time.Second, 10 * time.Second},
		{"after the meeting point, 1:1", 40 * time.Second, 5 * time.Second, 5 * time.Second},
		{"a deadline in the past fires at once", 10 * time.Second, -time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &manual{now: t0}
			w := NewWarp(base, 2*time.Minute, 4)
			base.now = t0.Add(tt.at)
			w.AfterFunc(tt.d, func() {})
			if got := base.delays[0]; got != tt.want {
				t.Errorf("waits %v of base time, want %v", got, tt.want)
			}
		})
	}
}

func TestWarpLeft(t *testing.T) {
	tests := []struct {
		name         string
		span         time.Duration
		speed        float64
		at, wantLeft time.Duration
	}{
		{"at the start, span/speed is left", 2 * time.Minute, 4, 0, 30 * time.Second},
		{"12 s into a 2-minute span at 4×, 18 s are left", 2 * time.Minute, 4, 12 * time.Second, 18 * time.Second},
		{"after the meeting point nothing is left", 2 * time.Minute, 4, 31 * time.Second, 0},
		{"a span of 0 is no warp", 0, 4, 0, 0},
		{"a speed below 1 counts as 1: the warp is its base", time.Minute, 0.5, 0, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &manual{now: t0}
			w := NewWarp(base, tt.span, tt.speed)
			base.now = t0.Add(tt.at)
			if got := w.Left(); got != tt.wantLeft {
				t.Errorf("Left %v, want %v", got, tt.wantLeft)
			}
			w.AtMeet(func() {})
			if got := base.delays[0]; got != tt.wantLeft {
				t.Errorf("AtMeet waits %v, want %v", got, tt.wantLeft)
			}
		})
	}
}

// TestWarpOnTheRealClockKeepsMonotonicTime checks that the warp's times
// carry the monotonic reading (Round(0) strips it, and only then do two
// times compare differently by ==), so durations measured on it are immune
// to wall-clock steps, as time.Now's are.
func TestWarpOnTheRealClockKeepsMonotonicTime(t *testing.T) {
	w := NewWarp(Real, time.Minute, 4)
	a := w.Now()
	if a == a.Round(0) {
		t.Fatal("the warp's time has no monotonic reading")
	}
	if ahead := time.Since(a); ahead < 40*time.Second || ahead > 50*time.Second {
		t.Fatalf("the warp reads %v behind the wall clock at its start, want 45 s", ahead)
	}
}

// stepped is a base clock whose time moves only when a test sets it, and
// whose timers fire, in order, as it passes them.
type stepped struct {
	now    time.Time
	timers []*steppedTimer
}

type steppedTimer struct {
	at   time.Time
	f    func()
	done bool
}

func (s *stepped) Now() time.Time { return s.now }

func (s *stepped) AfterFunc(d time.Duration, f func()) Timer {
	t := &steppedTimer{at: s.now.Add(d), f: f}
	s.timers = append(s.timers, t)
	return t
}

func (t *steppedTimer) Stop() bool {
	was := !t.done
	t.done = true
	return was
}

// set moves the clock to now, firing each timer it passes at its own time,
// earliest first (a timer a firing arms fires too if it is due).
func (s *stepped) set(now time.Time) {
	for {
		var next *steppedTimer
		for _, t := range s.timers {
			if !t.done && !t.at.After(now) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		next.done = true
		s.now = next.at
		next.f()
	}
	s.now = now
}

func TestWarpSlow(t *testing.T) {
	// 2 min at 4x, slowed to 2x 10 s in: the warp reads −50 s then, 60 s
	// behind its base, and closes that at 1 s a second.
	tests := []struct {
		name      string
		at        time.Duration // base time since the warp began
		wantNow   time.Duration // warp time, from t0
		wantLeft  time.Duration
		wantSpeed float64
	}{
		{"the warp's time runs on from where it was", 10 * time.Second, -50 * time.Second, 60 * time.Second, 2},
		{"10 s of base time are now 20 s of warp time", 20 * time.Second, -30 * time.Second, 50 * time.Second, 2},
		{"the two meet 60 s later than at 4x", 70 * time.Second, 70 * time.Second, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &manual{now: t0}
			w := NewWarp(base, 2*time.Minute, 4)
			base.now = t0.Add(10 * time.Second)
			if !w.Slow(2) {
				t.Fatal("Slow(2) from 4x changed nothing")
			}
			base.now = t0.Add(tt.at)
			if got := w.Now().Sub(t0); got != tt.wantNow {
				t.Errorf("warp time %v, want %v", got, tt.wantNow)
			}
			if got := w.Left(); got != tt.wantLeft {
				t.Errorf("Left %v, want %v", got, tt.wantLeft)
			}
			if got := w.Speed(); got != tt.wantSpeed {
				t.Errorf("Speed %g, want %g", got, tt.wantSpeed)
			}
			// From −90 s to the meeting point at 70 s, not 30 s.
			if got := w.Played(); got != 160*time.Second {
				t.Errorf("Played %v, want 2m40s", got)
			}
		})
	}
}

func TestWarpSlowRefuses(t *testing.T) {
	tests := []struct {
		name  string
		at    time.Duration
		speed float64
	}{
		{"a speed no lower than the current one", 5 * time.Second, 4},
		{"a speed at which the warp would never meet its base", 5 * time.Second, 1},
		{"a warp that has met its base", 31 * time.Second, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &manual{now: t0}
			w := NewWarp(base, 2*time.Minute, 4)
			base.now = t0.Add(tt.at)
			before, left := w.Now(), w.Left()
			if w.Slow(tt.speed) {
				t.Errorf("Slow(%g) at %v changed the warp", tt.speed, tt.at)
			}
			if w.Now() != before || w.Left() != left || w.Speed() != 4 || w.Played() != 2*time.Minute {
				t.Errorf("after a refused Slow: time %v, left %v, speed %g; want %v, %v, 4", w.Now(), w.Left(), w.Speed(), before, left)
			}
		})
	}
}

// TestWarpTimersArmedBeforeSlowWaitForTheirTime checks that a timer and
// AtMeet, armed at 4x, fire when the slowed warp reaches their moment, not
// when the 4x pace would have.
func TestWarpTimersArmedBeforeSlowWaitForTheirTime(t *testing.T) {
	base := &stepped{now: t0}
	w := NewWarp(base, 2*time.Minute, 4)
	var firedAt, metAt time.Duration
	w.AfterFunc(40*time.Second, func() { firedAt = base.now.Sub(t0) }) // warp −50 s: base 10 s at 4x
	w.AtMeet(func() { metAt = base.now.Sub(t0) })                      // base 30 s at 4x
	stopped := w.AfterFunc(40*time.Second, func() { t.Error("a stopped timer fired") })

	// At 5 s the warp reads −70 s; slowed to 2x it reaches −50 s 10 s
	// later, and meets its base (75 s behind) 75 s later.
	base.set(t0.Add(5 * time.Second))
	w.Slow(2)
	if !stopped.Stop() {
		t.Error("Stop before the timer fired reported it had already run")
	}
	base.set(t0.Add(12 * time.Second))
	if firedAt != 0 {
		t.Fatalf("the timer fired at base %v, before the slowed warp reached its time", firedAt)
	}
	base.set(t0.Add(40 * time.Second))
	if firedAt != 15*time.Second {
		t.Errorf("the timer fired at base %v, want 15 s", firedAt)
	}
	if metAt != 0 {
		t.Fatalf("AtMeet fired at base %v, before the slowed warp met its base", metAt)
	}
	base.set(t0.Add(2 * time.Minute))
	if metAt != 80*time.Second {
		t.Errorf("AtMeet fired at base %v, want 80 s", metAt)
	}
	if stopped.Stop() {
		t.Error("a second Stop reported it stopped the call")
	}
}
