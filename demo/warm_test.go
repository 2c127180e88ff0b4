package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tokenizer"
	"github.com/kvlens/kvlens/tour"
	"github.com/kvlens/kvlens/web"
)

// warmConfig is the default A/B demo on free ports, unrecorded, this
// machine its operator, with a warm-up of 8 s at 4x (2 s of wall time).
func warmConfig() Config {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB, cfg.Record = "", false
	cfg.Dashboard.Access = web.Access{} // this machine is the operator
	cfg.Warm, cfg.WarmSpeed = 8*time.Second, 4
	return cfg
}

// TestAWarmUpRunsTheSimulatedLanesAheadThenJoinsTheWallClock starts the
// default A/B demo with a warm-up of 8 s at 4x and a tour: for its 2 s the
// lanes' time runs behind the wall clock, the controls are refused and the
// tour waits; then the lanes' time is the wall clock's, the tour's first
// step plays and the controls work.
func TestAWarmUpRunsTheSimulatedLanesAheadThenJoinsTheWallClock(t *testing.T) {
	cfg := warmConfig()
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

// lateClock is the wall clock whose timers, until a time, fire a fixed
// time late, as on a host that cannot keep a warm-up's pace.
type lateClock struct {
	late  time.Duration
	until time.Time
}

func (lateClock) Now() time.Time { return time.Now() }

func (l lateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if time.Now().Before(l.until) {
		d += l.late
	}
	return time.AfterFunc(d, f)
}

func TestBehindNamesAWorkerThatFellBehind(t *testing.T) {
	tests := []struct {
		name         string
		clk          clock.Clock
		windowBefore bool // the last window begins after the first request
		want         string
	}{
		{"a worker that kept its schedule", &stepClock{now: time.Unix(0, 0)}, false, ""},
		{"a worker whose every step came 25 ms late", lateClock{late: 25 * time.Millisecond, until: time.Now().Add(time.Hour)}, false, "sim-0 delivered 10 of its 10 steps in the last 1m0s more than 20ms late"},
		{"late steps before the last window do not count", lateClock{late: 25 * time.Millisecond, until: time.Now().Add(time.Hour)}, true, "sim-0 delivered 5 of its 5 steps in the last 1m0s more than 20ms late"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := sim.StartFleet(sim.FleetConfig{Count: 1, Clock: tt.clk})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(context.Background())
			watch := newWarmWatch([]*lane{{id: "a", fleet: f}}, time.Minute)
			answer := func() {
				st, err := f.Workers[0].Runner().Submit(sim.Request{Prompt: make([]uint32, 64), MaxTokens: 5, OutputTokens: 5})
				if err != nil {
					t.Fatal(err)
				}
				for deadline := time.After(10 * time.Second); ; {
					if _, fin := st.Take(nil); fin != nil {
						return
					}
					select {
					case <-st.Ready():
					case <-deadline:
						t.Fatal("the request never finished")
					}
				}
			}
			answer()
			if tt.windowBefore {
				watch.from = watch.stats() // as pace does when the last window begins
			}
			answer()
			if got := watch.behind(); got != tt.want {
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

func TestLateSinceNamesAWorkerLateSinceTheLastLook(t *testing.T) {
	names := []string{"sim-0", "sim-1"}
	at := func(steps, late uint64) sim.Stats { return sim.Stats{Steps: steps, Late: late} }
	tests := []struct {
		name      string
		last, now []sim.Stats
		want      string
	}{
		{"no step late", []sim.Stats{at(100, 0), at(100, 0)}, []sim.Stats{at(300, 0), at(300, 0)}, ""},
		{"exactly 1% of the last steps late keeps the pace", []sim.Stats{at(100, 0), at(100, 0)}, []sim.Stats{at(300, 2), at(300, 2)}, ""},
		{"3 of 200 late slows it", []sim.Stats{at(100, 0), at(100, 0)}, []sim.Stats{at(300, 0), at(300, 3)}, "sim-1 delivered 3 of its last 200 steps more than 20ms late"},
		{"steps late before the last look do not count again", []sim.Stats{at(100, 40), at(100, 0)}, []sim.Stats{at(300, 41), at(300, 0)}, ""},
		{"too few steps to judge", []sim.Stats{at(100, 0), at(100, 0)}, []sim.Stats{at(149, 10), at(149, 0)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lateSince(names, tt.last, tt.now); got != tt.want {
				t.Fatalf("lateSince = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPaceWarmUpSlowsAWarpItsWorkersCannotKeep runs a simulated worker on
// a warm-up at 4x over a base clock whose timers fire 15 ms late (60 ms of
// the warp's time, so every step is late). In its last window the warm-up
// slows to 3x at its second late look and says why; far from it, the late
// steps are let be.
func TestPaceWarmUpSlowsAWarpItsWorkersCannotKeep(t *testing.T) {
	tests := []struct {
		name      string
		span      time.Duration // at 4x
		wantSpeed float64
		wantSaid  string
	}{
		{"a 1 min warm-up is its last window: it slows", time.Minute, 3, "it now plays at 3× real time, and figures show in"},
		{"10 min from the meeting point, lateness is let be", 10 * time.Minute, 4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warp := clock.NewWarp(lateClock{late: 15 * time.Millisecond, until: time.Now().Add(time.Hour)}, tt.span, 4)
			f, err := sim.StartFleet(sim.FleetConfig{Count: 1, Clock: warp})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(context.Background())
			if _, err := f.Workers[0].Runner().Submit(sim.Request{Prompt: make([]uint32, 64), MaxTokens: 5000, OutputTokens: 5000}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var (
				mu   sync.Mutex
				said []string
			)
			done := make(chan struct{})
			go func() {
				defer close(done)
				newWarmWatch([]*lane{{id: "a", fleet: f}}, time.Minute).pace(ctx, warp, func(format string, a ...any) {
					mu.Lock()
					defer mu.Unlock()
					said = append(said, fmt.Sprintf(format, a...))
				})
			}()
			// The first two looks, or the slowing they make.
			for deadline := time.Now().Add(2*paceInterval + 1500*time.Millisecond); warp.Speed() == 4 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			<-done
			if warp.Speed() != tt.wantSpeed {
				t.Errorf("the warm-up plays at %gx, want %gx", warp.Speed(), tt.wantSpeed)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tt.wantSaid == "" && len(said) > 0:
				t.Errorf("the warm-up said %q; want nothing", said)
			case tt.wantSaid != "" && (len(said) != 1 || !strings.Contains(said[0], "the host cannot keep the warm-up's pace (sim-0 delivered ") || !strings.Contains(said[0], tt.wantSaid)):
				t.Errorf("the warm-up said %q; want one line naming the late worker and %q", said, tt.wantSaid)
			}
		})
	}
}

func TestSlowerLowersTheSpeedByAQuarterToAQuarter(t *testing.T) {
	tests := []struct {
		name     string
		from, to float64
	}{
		{"the default 4x slows to 3x", 4, 3},
		{"3x to 2.25x", 3, 2.25},
		{"2.25x to the floor, 2x", 2.25, 2},
		{"6x to 4.5x", 6, 4.5},
		{"4.5x to 3.25x, rounded down to a quarter", 4.5, 3.25},
		{"at the floor it stays", 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slower(tt.from); got != tt.to {
				t.Fatalf("slower(%g) = %g, want %g", tt.from, got, tt.to)
			}
		})
	}
}

// manualBase is a base clock for a warp that moves only when a test sets it.
type manualBase struct{ now time.Time }

func (m *manualBase) Now() time.Time { return m.now }

func (m *manualBase) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(time.Hour, func() {})
}

func TestLastWindowBeginsAWindowBeforeTheMeetingPoint(t *testing.T) {
	t0 := time.Unix(0, 0)
	// 2 min at 4x: 30 s of wall time, 120 s of the warp's.
	tests := []struct {
		name string
		at   time.Duration // wall time since the warm-up began
		slow float64       // Slow to this at 10 s; 0 for none
		want bool
	}{
		{"at the start 120 s are left to play", 0, 0, false},
		{"at 14 s, 64 s", 14 * time.Second, 0, false},
		{"at 15 s, 60 s: the last window begins", 15 * time.Second, 0, true},
		{"slowed to 2x at 10 s, still 120 s left to play at 10 s", 10 * time.Second, 2, false},
		{"slowed to 2x at 10 s, 80 s at 30 s", 30 * time.Second, 2, false},
		{"slowed to 2x at 10 s, 60 s at 40 s", 40 * time.Second, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &manualBase{now: t0}
			warp := clock.NewWarp(base, 2*time.Minute, 4)
			if tt.slow > 0 {
				base.now = t0.Add(10 * time.Second)
				warp.Slow(tt.slow)
			}
			base.now = t0.Add(tt.at)
			if got := lastWindow(warp, time.Minute); got != tt.want {
				t.Fatalf("lastWindow = %v (%v left at %gx), want %v", got, warp.Left(), warp.Speed(), tt.want)
			}
		})
	}
}

// namedTransport records that it was asked to start a turn.
type namedTransport struct {
	name string
	got  *[]string
}

func (n namedTransport) Start(loadgen.TurnRequest, func(string, time.Duration), func(loadgen.Result)) func(error) {
	*n.got = append(*n.got, n.name)
	return func(error) {}
}

// TestWarmTransportSkipsHTTPOnlyWhileTheWarpPlays: a turn the warm-up
// starts goes in process, and one started after the warp met the wall
// clock goes over HTTP, as every turn does without a warm-up.
func TestWarmTransportSkipsHTTPOnlyWhileTheWarpPlays(t *testing.T) {
	var got []string
	warp := clock.NewWarp(clock.Real, 400*time.Millisecond, 4) // meets the wall clock after 100 ms
	wt := &warmTransport{warp: warp, inProcess: namedTransport{"in process", &got}, http: namedTransport{"http", &got}}
	wt.Start(loadgen.TurnRequest{}, nil, nil)
	for warp.Left() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	wt.Start(loadgen.TurnRequest{}, nil, nil)
	if want := []string{"in process", "http"}; !slices.Equal(got, want) {
		t.Errorf("turns went %q, want %q", got, want)
	}
}

// TestLateLooksSlowAtTheSecondLateLookInARow: one late look (a host's
// stall) is let be; two in a row slow the warm-up, and the slower speed is
// judged by two more.
func TestLateLooksSlowAtTheSecondLateLookInARow(t *testing.T) {
	const late = "sim-0 delivered 5 of its last 399 steps more than 20ms late"
	tests := []struct {
		name  string
		looks []string
		want  []bool
	}{
		{"a look on time", []string{""}, []bool{false}},
		{"one late look is a stall", []string{late, ""}, []bool{false, false}},
		{"two late looks in a row slow", []string{late, late}, []bool{false, true}},
		{"late looks apart do not", []string{late, "", late, ""}, []bool{false, false, false, false}},
		{"after slowing, two more late looks", []string{late, late, late, late}, []bool{false, true, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l lateLooks
			var got []bool
			for _, why := range tt.looks {
				got = append(got, l.slow(why))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("slowed at %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWarmUpTurnsGiveTheWorkersTheirOwnTokens holds the warm-up's
// in-process turns against the workers: those turns hand each engine the
// router's tokens (router.ChatTokens), which is right only while the
// simulated workers tokenize a chat exactly so. Each worker's own
// /tokenize, as a router in "worker" mode would ask it, must agree; a fleet
// given a tokenizer of its own would fail here before it made the warm-up
// share the router's assumption.
func TestWarmUpTurnsGiveTheWorkersTheirOwnTokens(t *testing.T) {
	cfg := warmConfig()
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	msgs := []tokenizer.Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: loadgen.BuiltinStarters()[0].Text},
		{Role: "assistant", Content: "Prefix caching keeps the blocks of a prompt seen before."},
		{Role: "user", Content: "And when the cache is full?"},
	}
	want := router.ChatTokens(msgs)
	body, _ := json.Marshal(map[string]any{"messages": msgs})
	for _, l := range d.lanes {
		for i, u := range l.fleet.URLs {
			resp, err := http.Post(u+"/tokenize", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Tokens []uint32 `json:"tokens"`
			}
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Tokens, want) {
				t.Errorf("%s tokenizes the chat into %d tokens, the router into %d: the warm-up's in-process turns would give it the router's", l.workerName(i), len(got.Tokens), len(want))
			}
		}
	}
}
