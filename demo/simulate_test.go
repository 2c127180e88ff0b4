package demo

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/store"
)

func TestSimulateThisCurve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvlens.db")
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NoStart = true
	// Without a recording (--record=false) the store still keeps the
	// simulated curves: it was opened only to record, and the page said
	// "not stored: no database".
	cfg.DB, cfg.Record = path, false
	// Two levels keep the test short; the dashboard's default slider has 7.
	cfg.Dashboard.SliderMin, cfg.Dashboard.SliderMax, cfg.Dashboard.SliderStep = 60, 80, 20
	cfg.Load.Concurrency = 60
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if d.sim == nil {
		t.Fatal("a simulated fleet offers no simulation")
	}
	// Shorter levels than the dashboard's keep the race-detector run short.
	d.sim.sweep.Warmup, d.sim.sweep.Measure = 20*time.Second, 30*time.Second
	if err := d.sim.Simulate(); err != nil {
		t.Fatal(err)
	}
	if err := d.sim.Simulate(); err == nil {
		t.Fatal("a second simulation started while one was running")
	}
	// About 10 s under the race detector on an idle 2-core machine; over
	// 60 s, half done, in a full CI run beside a fuzzer. The deadline
	// only catches a simulation that never ends.
	const wait = 3 * time.Minute
	deadline := time.Now().Add(wait)
	for d.sim.SimStatus().Running {
		if time.Now().After(deadline) {
			t.Fatalf("still simulating after %s: %+v", wait, d.sim.SimStatus())
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := d.sim.SimStatus()
	if st.Err != "" || st.Result == nil {
		t.Fatalf("status %+v", st)
	}
	for _, mode := range []string{"round_robin", "kv"} {
		curve := st.Result.Curve(mode)
		if len(curve) != 2 || curve[0].Concurrency != 60 || curve[1].Concurrency != 80 {
			t.Fatalf("%s curve = %+v, want the slider's levels 60 and 80", mode, curve)
		}
		if curve[0].TTFTP95 <= 0 || curve[0].TOPS <= 0 {
			t.Fatalf("%s at 60 has no figures: %+v", mode, curve[0])
		}
	}
	if !st.Stored || st.Finished != st.Steps || st.Steps != 4 {
		t.Fatalf("status %+v: want stored, 4 of 4 levels", st)
	}
	if d.Recording != 0 {
		t.Errorf("--record=false, yet the session is recording %d", d.Recording)
	}
	d.Close(context.Background())
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Set(context.Background(), st.Result.Name); err != nil {
		t.Fatalf("the simulated set is not in the store: %v", err)
	}
}

func TestInjectedFaultReachesClients(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NoStart = true
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	ask := func() int {
		body := `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
		resp, err := http.Post(d.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := ask(); code != 200 {
		t.Fatalf("before any fault: %d", code)
	}
	if err := (fleetFaults{d.fleet}).InjectFault("503", 100); err != nil {
		t.Fatal(err)
	}
	if code := ask(); code != 503 {
		t.Fatalf("with 100%% 503s injected: %d", code)
	}
	(fleetFaults{d.fleet}).InjectFault("none", 0)
	if code := ask(); code != 200 {
		t.Fatalf("after faults off: %d", code)
	}
}

func TestNoStoreReasonSaysWhy(t *testing.T) {
	for _, tt := range []struct {
		name, db string
		err      error
		want     string
	}{
		{"no --db", "", nil, "kvlens runs without a store (--db)"},
		{"a store that would not open names it", "/nonexistent/k.db", errors.New("boom"), "the store at /nonexistent/k.db could not be opened (see the warning kvlens printed at start)"},
		{"an open store needs no reason", "/tmp/k.db", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DB = tt.db
			if got := noStoreReason(cfg, tt.err); got != tt.want {
				t.Errorf("noStoreReason = %q, want %q", got, tt.want)
			}
		})
	}
}
