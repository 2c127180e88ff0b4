package demo

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/kvlens/kvlens/sim"
)

// TestTargetRunsNoWorkersAndSaysWhereTheLoadGoes checks what --target
// starts and how kvlens describes it, at start and in the page header.
func TestTargetRunsNoWorkersAndSaysWhereTheLoadGoes(t *testing.T) {
	w, err := sim.NewServer(sim.ServerOptions{Name: "real"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	real := httptest.NewServer(w)
	defer real.Close()
	target := "http://frontend.example:8000/v1"
	tests := []struct {
		name    string
		target  string
		workers []string
		// wantWorkers is how many workers the router has; wantFleet says
		// simulated workers run.
		wantWorkers int
		wantFleet   bool
		wantLines   []string
		wantHeader  string
		// single turns the A/B view off (--ab off).
		single bool
	}{
		{"no flags run two simulated fleets side by side, round-robin against kv", "", nil, 3, true,
			[]string{"A/B: two identical fleets", "lane A: routing round_robin over 3 workers: sim-0=", "lane B: routing kv over 3 workers: sim-3="},
			"2 × 3 simulated H200 workers, one fleet per lane", false},
		{"--ab off runs the simulated fleet once and routes over it", "", nil, 3, true,
			[]string{"routing round_robin over 3 workers: sim-0="}, "3 simulated H200 workers", true},
		{"a target alone runs no workers and names the target", target, nil, 0, false,
			[]string{"sending the load to " + target + "; kvlens's own router is not in its path", "running no workers: --target given without --workers"},
			"load sent to " + target, false},
		{"real workers with a pair take turns and say so", "", []string{"a=" + real.URL}, 1, false,
			[]string{"routing round_robin over 1 workers: a=" + real.URL, "A/B: round_robin and kv take turns of 1m30s on these workers"},
			"1 real worker", false},
		{"a target with workers watches the workers and names the target", target, []string{"a=" + real.URL}, 1, false,
			[]string{"sending the load to " + target, "routing round_robin over 1 workers: a=" + real.URL},
			"load sent to " + target + "; 1 real worker watched", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Addr = "127.0.0.1:0"
			cfg.NoStart = true
			cfg.Target = tt.target
			cfg.Workers = tt.workers
			if tt.single {
				cfg.AB = nil
			}
			d, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			if got := len(d.Proxy.Workers()); got != tt.wantWorkers || (d.fleet != nil) != tt.wantFleet {
				t.Fatalf("%d workers, simulated fleet %v; want %d and %v", got, d.fleet != nil, tt.wantWorkers, tt.wantFleet)
			}
			lines := d.Lines()
			if len(lines) != len(tt.wantLines) {
				t.Fatalf("lines %q, want %d of them", lines, len(tt.wantLines))
			}
			for i, want := range tt.wantLines {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d = %q, want it to start %q", i, lines[i], want)
				}
			}
			resp, err := http.Get(d.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			doc, err := goquery.NewDocumentFromReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			header := doc.Find(`[data-testid="workers"]`).Text()
			if !strings.Contains(header, tt.wantHeader) {
				t.Fatalf("header %q, want it to say %q", header, tt.wantHeader)
			}
			if tt.target != "" && strings.Contains(header, "simulated") {
				t.Fatalf("header %q speaks of simulated workers that do not run", header)
			}
		})
	}
}

// TestTheRouterWithNoWorkersRefusesClearly proves that kvlens's own router,
// idle under --target, answers whoever calls it with a typed 503 that says when
// to retry, and keeps serving.
func TestTheRouterWithNoWorkersRefusesClearly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NoStart = true
	cfg.Target = "http://frontend.example:8000/v1"
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	for range 2 {
		resp, err := http.Post(d.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"type":"ServiceUnavailableError"`) || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("got %d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
}
