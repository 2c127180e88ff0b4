package loadgen

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// gateTransport answers each turn when the test opens the gate, and records
// how many calls are open and whether any was cut by cancellation.
type gateTransport struct {
	gate  chan struct{}
	open  atomic.Int64
	calls atomic.Int64
	cut   atomic.Int64
}

func newGate() *gateTransport { return &gateTransport{gate: make(chan struct{})} }

func (g *gateTransport) Chat(ctx context.Context, req TurnRequest, first func(string, time.Duration)) Result {
	g.open.Add(1)
	g.calls.Add(1)
	defer g.open.Add(-1)
	if first != nil {
		first("", time.Millisecond)
	}
	select {
	case <-g.gate:
		return Result{Text: "an answer with enough words to pick a phrase from it", TTFT: time.Millisecond, E2E: 10 * time.Millisecond, OSL: 10}
	case <-ctx.Done():
		g.cut.Add(1)
		return Result{Err: ctx.Err(), Class: ErrCancelled}
	}
}

func testConfig(n int) Config {
	cfg := DefaultConfig()
	cfg.Concurrency = n
	cfg.StartRate = 0
	cfg.Turns = UniformTurns(5, 5)
	cfg.Starters = []Starter{{ID: "s", Topic: "testing", Text: "Some text."}}
	return cfg
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestLoweringConcurrencyConvergesWithinOneTurnAndCutsNoStream(t *testing.T) {
	tr := newGate()
	g, err := New(tr, testConfig(180), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	defer g.Stop()
	waitFor(t, "180 requests in flight", func() bool { return tr.open.Load() == 180 })
	if err := g.SetConcurrency(60); err != nil {
		t.Fatal(err)
	}
	// Nothing may be cut while the excess waits for its turn to end.
	time.Sleep(20 * time.Millisecond)
	if got := g.Snapshot().Live; got != 180 {
		t.Fatalf("live = %d before any turn ended; lowering must not cut streams", got)
	}
	calls := tr.calls.Load()
	for range 180 { // end the 180 first turns
		tr.gate <- struct{}{}
	}
	// Each of the 180 finished one turn; 120 of them must leave, 60 go on.
	waitFor(t, "60 follow-up turns", func() bool { return tr.calls.Load()-calls >= 60 && tr.open.Load() == 60 })
	time.Sleep(50 * time.Millisecond) // room for any wrongly started extra
	if got := tr.calls.Load() - calls; got != 60 {
		t.Fatalf("%d follow-up turns started, want 60", got)
	}
	if got := g.Snapshot().Live; got != 60 {
		t.Fatalf("live = %d after one turn, want 60", got)
	}
	if tr.cut.Load() != 0 {
		t.Fatalf("%d streams were cut", tr.cut.Load())
	}
}

func TestStopThenStartLeavesNothingOfTheOldRun(t *testing.T) {
	tr := newGate()
	g, _ := New(tr, testConfig(50), nil)
	g.Start()
	waitFor(t, "50 requests in flight", func() bool { return tr.open.Load() == 50 })
	g.Stop()
	if n := tr.open.Load(); n != 0 {
		t.Fatalf("%d requests of the stopped run still open after Stop returned", n)
	}
	if s := g.Snapshot(); s.Running || s.Live != 0 || s.InFlight != 0 {
		t.Fatalf("after Stop: %+v", s)
	}
	g.Start()
	defer g.Stop()
	waitFor(t, "50 requests of the new run", func() bool { return tr.open.Load() == 50 })
	if got := g.Snapshot().Live; got != 50 {
		t.Fatalf("live = %d after restart, want 50 (no double load)", got)
	}
	if s := g.Snapshot().Window; s.Errors != 0 {
		t.Fatalf("Stop's cancellations were counted as %d errors", s.Errors)
	}
}

func TestStartRate(t *testing.T) {
	tests := []struct {
		name    string
		rate    float64
		target  int
		after   time.Duration
		atLeast int
		atMost  int
	}{
		// rate 0 is unpaced: every conversation starts at once
		{"a rate of 0 starts the whole target at once", 0, 100, 200 * time.Millisecond, 100, 100},
		// 10/s with a burst of 1 => 1 at once, then one per 100 ms
		{"a rate of 10 per second paces starts", 10, 100, 250 * time.Millisecond, 2, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newGate()
			cfg := testConfig(tt.target)
			cfg.StartRate = tt.rate
			g, _ := New(tr, cfg, nil)
			g.Start()
			defer g.Stop()
			time.Sleep(tt.after)
			if n := int(tr.open.Load()); n < tt.atLeast || n > tt.atMost {
				t.Fatalf("%d conversations after %v, want %d..%d", n, tt.after, tt.atLeast, tt.atMost)
			}
		})
	}
}

func TestSetConcurrencyRejectsBadValues(t *testing.T) {
	g, _ := New(newGate(), testConfig(60), nil)
	for _, n := range []int{-1, MaxConcurrency + 1} {
		if err := g.SetConcurrency(n); err == nil {
			t.Errorf("SetConcurrency(%d) accepted", n)
		}
	}
	if got := g.Snapshot().Target; got != 60 {
		t.Fatalf("target = %d after rejected values, want 60 unchanged", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no starters", func(c *Config) { c.Starters = nil }},
		{"an empty turn distribution", func(c *Config) { c.Turns = TurnDist{} }},
		{"zero max tokens", func(c *Config) { c.MaxTokens = 0 }},
		{"negative start rate", func(c *Config) { c.StartRate = -1 }},
		{"negative concurrency", func(c *Config) { c.Concurrency = -5 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(10)
			tt.mutate(&cfg)
			if _, err := New(newGate(), cfg, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
