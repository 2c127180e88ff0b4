package clocktest

import (
	"slices"
	"sync"
	"testing"
	"time"
)

func TestAdvanceFiresTheTimersDueAndNoOthers(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	c := New(t0)
	var (
		mu    sync.Mutex
		fired []time.Duration
		wg    sync.WaitGroup
	)
	set := func(d time.Duration) {
		wg.Add(1)
		c.AfterFunc(d, func() {
			defer wg.Done()
			mu.Lock()
			fired = append(fired, d)
			mu.Unlock()
		})
	}
	set(3 * time.Second)
	set(time.Second)
	stopped := c.AfterFunc(2*time.Second, func() { t.Error("a stopped timer fired") })
	set(10 * time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports true once, for a timer not yet fired")
	}
	if got := c.Pending(); !slices.Equal(got, []time.Duration{3 * time.Second, time.Second, 10 * time.Second}) {
		t.Fatalf("pending %v", got)
	}
	c.Advance(5 * time.Second)
	wg.Add(-1) // the 10 s timer is not due
	wg.Wait()
	if !slices.Equal(fired, []time.Duration{time.Second, 3 * time.Second}) && !slices.Equal(fired, []time.Duration{3 * time.Second, time.Second}) {
		t.Fatalf("fired %v, want the 1 s and 3 s timers", fired)
	}
	if now := c.Now(); !now.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("now %v, want 5 s on", now)
	}
	if got := c.Pending(); !slices.Equal(got, []time.Duration{10 * time.Second}) {
		t.Fatalf("pending after 5 s: %v, want the 10 s timer", got)
	}
}

// TestInlineTimersFireInOrderBeforeAdvanceReturns: an inline clock's
// timers have run, earliest first and each reading its own time, when
// Advance returns; one a timer sets within the advance fires in it too.
func TestInlineTimersFireInOrderBeforeAdvanceReturns(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	c := NewInline(t0)
	var fired []time.Duration // no lock: an inline clock fires in this goroutine
	at := func(d time.Duration) func() {
		return func() {
			if now := c.Now(); !now.Equal(t0.Add(d)) {
				t.Errorf("the %v timer read %v", d, now.Sub(t0))
			}
			fired = append(fired, d)
		}
	}
	c.AfterFunc(3*time.Second, at(3*time.Second))
	c.AfterFunc(time.Second, func() {
		at(time.Second)()
		c.AfterFunc(time.Second, at(2*time.Second)) // due within the same advance
	})
	c.AfterFunc(10*time.Second, at(10*time.Second))
	c.Advance(5 * time.Second)
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v when Advance returned, want %v", fired, want)
	}
	c.Advance(5 * time.Second)
	if len(fired) != 4 || fired[3] != 10*time.Second {
		t.Fatalf("fired %v, want the 10 s timer last", fired)
	}
}
