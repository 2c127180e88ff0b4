package demo

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tour"
	"github.com/kvlens/kvlens/web"
)

// TestAWarmUpRunsTheSimulatedLanesAheadThenJoinsTheWallClock starts the
// default A/B demo with a warm-up of 8 s at 4x and a tour: for its 2 s the
// lanes' time runs behind the wall clock, the controls are refused and the
// tour waits; then the lanes' time is the wall clock's, the tour's first
// step plays and the controls work.
func TestAWarmUpRunsTheSimulatedLanesAheadThenJoinsTheWallClock(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB, cfg.Record = "", false
	cfg.Dashboard.Access = web.Access{} // this machine is the operator
	cfg.Warm, cfg.WarmSpeed = 8*time.Second, 4
	script, err := tour.Parse("warm.tour", strings.NewReader("1h concurrency 100 \"first\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dashboard.Tour = script
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if !strings.Contains(strings.Join(d.Lines(), "\n"), "warming up: the fleets play 8s of traffic ahead at 4× real time") {
		t.Errorf("the startup lines do not say the fleets warm up: %q", d.Lines())
	}
	for _, l := range d.lanes {
		if behind := time.Since(l.gen.Snapshot().Time); behind < 3*time.Second {
			t.Errorf("lane %s's time is %v behind the wall clock at start, want about 6 s", l.id, behind)
		}
	}
	slider := func() (int, string) {
		resp, err := http.PostForm(d.URL+"/api/concurrency", url.Values{"concurrency": {"80"}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := slider(); code != http.StatusConflict || !strings.HasPrefix(body, "warming up, ") {
		t.Fatalf("the slider during the warm-up: %d %q, want 409 warming up", code, body)
	}
	if n := d.Gen.Snapshot().Target; n != 60 {
		t.Fatalf("the tour's first step played during the warm-up: target %d", n)
	}
	over := func() bool {
		resp, err := http.Get(d.URL + "/api/state")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Warmup struct {
				Over bool `json:"over"`
			} `json:"warmup"`
		}
		json.NewDecoder(resp.Body).Decode(&st)
		return st.Warmup.Over
	}
	for deadline := time.Now().Add(20 * time.Second); !over(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the warm-up never ended")
		}
	}
	for _, l := range d.lanes {
		if off := time.Since(l.gen.Snapshot().Time); off < 0 || off > 100*time.Millisecond {
			t.Errorf("after the warm-up lane %s's time is %v off the wall clock, want its own", l.id, off)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); d.Gen.Snapshot().Target != 100; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tour's first step did not play after the warm-up")
		}
	}
	if code, body := slider(); code != http.StatusOK {
		t.Fatalf("the slider after the warm-up: %d %q", code, body)
	}
}

// stepClock is a virtual clock that runs each timer at once, moving its
// time to the timer's: a runner on it is never late.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *stepClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	at := c.now.Add(d)
	c.mu.Unlock()
	go func() {
		c.mu.Lock()
		c.now = at
		c.mu.Unlock()
		f()
	}()
	return time.AfterFunc(time.Hour, func() {}) // a Timer to stop; f runs regardless
}

// lateClock is the wall clock whose timers fire a fixed time late, as on a
// host that cannot keep a warm-up's pace.
type lateClock time.Duration

func (lateClock) Now() time.Time { return time.Now() }

func (l lateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d+time.Duration(l), f)
}

func TestBehindNamesAWorkerThatFellBehind(t *testing.T) {
	tests := []struct {
		name string
		clk  clock.Clock
		want string
	}{
		{"a worker that kept its schedule", &stepClock{now: time.Unix(0, 0)}, ""},
		{"a worker whose every step came 25 ms late", lateClock(25 * time.Millisecond), "sim-0 delivered 5 of its 5 steps more than 20ms late"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := sim.StartFleet(sim.FleetConfig{Count: 1, Clock: tt.clk})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(context.Background())
			st, err := f.Workers[0].Runner().Submit(sim.Request{Prompt: make([]uint32, 64), MaxTokens: 5, OutputTokens: 5})
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.After(10 * time.Second); ; {
				if _, fin := st.Take(nil); fin != nil {
					break
				}
				select {
				case <-st.Ready():
				case <-deadline:
					t.Fatal("the request never finished")
				}
			}
			if got := behind([]*lane{{id: "a", fleet: f}}); got != tt.want {
				t.Fatalf("behind says %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTooLateDropsAWarmUpOnlyPastItsShareOfLateSteps(t *testing.T) {
	tests := []struct {
		name       string
		late, all  uint64
		wantToDrop bool
	}{
		{"no step yet", 0, 0, false},
		{"none late", 0, 4000, false},
		{"1.5% late, as beside one busy core, is kept", 60, 4000, false},
		{"exactly 2.5% late is kept", 100, 4000, false},
		{"one step past 2.5% is dropped", 101, 4000, true},
		{"9% late, as beside two busy cores, is dropped", 360, 4000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tooLate(sim.Stats{Late: tt.late, Steps: tt.all}); got != tt.wantToDrop {
				t.Fatalf("tooLate(%d of %d) = %v, want %v", tt.late, tt.all, got, tt.wantToDrop)
			}
		})
	}
}
