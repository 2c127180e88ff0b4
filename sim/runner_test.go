package sim

import (
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/kvevents"
)

// manualClock runs AfterFunc callbacks only when the test says so, so the
// runner's step boundaries are under the test's control.
type manualClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []func()
}

type manualTimer struct{}

func (manualTimer) Stop() bool { return false }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, func() {
		c.mu.Lock()
		c.now = c.now.Add(d)
		c.mu.Unlock()
		f()
	})
	return manualTimer{}
}

// fire ends the step in flight; it reports false when none is.
func (c *manualClock) fire() bool {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return false
	}
	f := c.pending[0]
	c.pending = c.pending[1:]
	c.mu.Unlock()
	f()
	return true
}

func TestRunnerDeliversAStepOnlyWhenItsTimeIsUp(t *testing.T) {
	clk := &manualClock{now: time.Unix(1000, 0)}
	var batches []kvevents.Batch
	eng, _ := NewEngine(tiny(), Options{Seed: 1})
	r := NewRunner(eng, clk, func(b kvevents.Batch) { batches = append(batches, b) })
	st, err := r.Submit(Request{Prompt: seqTokens(1, 8), MaxTokens: 3, OutputTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	if toks, _ := st.Take(nil); len(toks) != 0 || len(batches) != 0 {
		t.Fatalf("%d tokens and %d event batches before the first step ended", len(toks), len(batches))
	}
	// A reset while the step runs is published after the step's own events,
	// so a subscriber never sees blocks stored after the clear.
	r.ResetPrefixCache()
	clk.fire()
	toks, fin := st.Take(nil)
	if len(toks) != 1 || toks[0].Index != 0 || fin != nil {
		t.Fatalf("after one step: tokens %v, finished %v; want the first token only", toks, fin)
	}
	if len(batches) != 1 || describe(batches[0].Events)[0] != "BlockStored" || describe(batches[0].Events)[1] != "AllBlocksCleared" {
		t.Fatalf("batches %v, want one with BlockStored then AllBlocksCleared", batches)
	}
	if want := float64(clk.Now().UnixNano()) / 1e9; batches[0].TS != want {
		t.Fatalf("batch stamped %v, want the step's end %v", batches[0].TS, want)
	}
	for clk.fire() {
	}
	toks, fin = st.Take(nil)
	if len(toks) != 2 || fin == nil || fin.CompletionTokens != 3 {
		t.Fatalf("at the end: tokens %v, finished %+v; want 2 more and a summary of 3", toks, fin)
	}
	if clk.fire() {
		t.Fatal("an idle runner scheduled a step")
	}
}

// lateClock is a discrete-event clock whose timers fire late by a fixed
// amount, as the wall clock's do on a busy host.
type lateClock struct {
	loop *des.Loop
	late time.Duration
}

func (c lateClock) Now() time.Time { return c.loop.Now() }

func (c lateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.loop.AfterFunc(d+c.late, f)
}

func TestRunnerKeepsToTheModelledScheduleWhenTimersFireLate(t *testing.T) {
	const out = 6
	req := Request{Prompt: seqTokens(1, 8), MaxTokens: out, OutputTokens: out}
	// The modelled time: the same request on a twin engine, stepped by hand.
	twin, _ := NewEngine(tiny(), Options{Seed: 1})
	if err := twin.Submit(Request{ID: 1, Prompt: req.Prompt, MaxTokens: out, OutputTokens: out}); err != nil {
		t.Fatal(err)
	}
	var modelled time.Duration
	steps := 0
	for !twin.Idle() {
		modelled += twin.Step().Duration
		steps++
	}
	tests := []struct {
		name string
		late time.Duration
		// want is the request's end after its submission.
		want time.Duration
		// wantLate is the steps counted late (Stats.Late).
		wantLate int
	}{
		// Timers on time: the steps follow one another back to back.
		{"timers that fire on time end the request after the modelled steps", 0, modelled, 0},
		// Each step begins when the last one was due, so only the final
		// timer's lateness shows, not one lateness per step.
		{"a millisecond of lateness per timer delays the end by one millisecond", time.Millisecond, modelled + time.Millisecond, 0},
		// A host that cannot keep up delivers every step late, and says so.
		{"timers later than LateStep count every step late", LateStep + time.Millisecond, modelled + LateStep + time.Millisecond, steps},
		// Beyond maxLag the host is taken to have stopped, and each step
		// starts afresh from when its timer fired.
		{"a host stopped longer than maxLag restarts the schedule at every step", 2 * maxLag, modelled + time.Duration(steps)*2*maxLag, steps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loop := des.New(time.Time{})
			eng, _ := NewEngine(tiny(), Options{Seed: 1})
			r := NewRunner(eng, lateClock{loop, tt.late}, nil)
			st, err := r.Submit(req)
			if err != nil {
				t.Fatal(err)
			}
			var end time.Time
			st.notify = func() {
				if _, fin := st.Take(nil); fin != nil {
					end = loop.Now()
				}
			}
			loop.Run(time.Hour)
			if end.IsZero() {
				t.Fatal("the request never finished")
			}
			if got := end.Sub(st.Submitted); got != tt.want {
				t.Errorf("the request ended %v after submission, want %v (%d steps of %v modelled in all)", got, tt.want, steps, modelled)
			}
			if got := r.Stats().Late; got != uint64(tt.wantLate) {
				t.Errorf("%d steps counted late, want %d", got, tt.wantLate)
			}
		})
	}
}
