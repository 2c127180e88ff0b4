package scenario

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/tokenizer"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/")

// newRouter returns a router over n workers of capacity 64 running policy,
// seeded so that runs repeat exactly.
func newRouter(t *testing.T, policy string, n int, clk *Clock) *router.Router {
	t.Helper()
	var specs []string
	for i := range n {
		specs = append(specs, fmt.Sprintf("w%d=http://w%d:8000,events=tcp://w%d:5557", i, i, i))
	}
	ws, err := router.ParseWorkers(specs)
	if err != nil {
		t.Fatal(err)
	}
	p, err := router.NewPolicyWith(policy, router.Knobs{Weight: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := router.Config{}
	if clk != nil {
		cfg.Clock = clk
	}
	return router.NewRouter(router.NewPool(ws), p, cfg)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("report differs from %s (run with -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestAffinity(t *testing.T) {
	tests := []struct {
		policy   string
		min, max float64 // bounds on the share of follow-ups that return to their worker
	}{
		// Every follow-up returns to the worker holding its conversation.
		{"kv", 1, 1},
		{"dynamo", 1, 1},
		// Round-robin ignores the cache: about 1 in 3 over 3 workers.
		{"round_robin", 0.2, 0.47},
		{"random", 0.2, 0.47},
	}
	var report strings.Builder
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			rt := newRouter(t, tt.policy, 3, nil)
			a, err := RunAffinity(context.Background(), &InProcess{Router: rt}, 12, 5, 42)
			if err != nil {
				t.Fatal(err)
			}
			if r := a.StickyRate(); r < tt.min || r > tt.max {
				t.Fatalf("%s: %v; want a share in [%g, %g]", tt.policy, a, tt.min, tt.max)
			}
			fmt.Fprintf(&report, "%-12s %v\n", tt.policy, a)
		})
	}
	golden(t, "affinity.golden", report.String())
}

func TestOverload(t *testing.T) {
	o := Overload{
		Requests: 150, SystemTokens: 8000, UserTokens: 64,
		Every: 50 * time.Millisecond, Prefill: 300 * time.Millisecond, Duration: 20 * time.Second,
	}
	workers := []string{"w0", "w1", "w2"}
	var report strings.Builder
	fmt.Fprintf(&report, "150 conversations sharing an 8,000-token system prompt, 3 workers of batch capacity 64:\n")
	for _, tt := range []struct {
		policy       string
		withinLimits bool
	}{
		{"kv", true},
		{"dynamo", false},
	} {
		t.Run(tt.policy, func(t *testing.T) {
			clk := NewClock()
			rt := newRouter(t, tt.policy, 3, clk)
			rep, err := RunOverload(context.Background(), &InProcess{Router: rt}, clk, o, workers)
			if err != nil {
				t.Fatal(err)
			}
			over, used := false, 0
			for _, w := range workers {
				if rep.Peak[w] > router.DefaultCapacity {
					over = true
				}
				if rep.Routed[w] > 0 {
					used++
				}
			}
			if tt.withinLimits && (over || used < len(workers)) {
				t.Fatalf("%s pushed a worker past capacity or left one idle: %v", tt.policy, rep)
			}
			if !tt.withinLimits && !over {
				t.Fatalf("%s kept every worker within capacity; the scenario no longer reproduces #737: %v", tt.policy, rep)
			}
			if c := rt.Counts(); c.InFlight != 0 {
				t.Fatalf("%d bookings left after the run", c.InFlight)
			}
			fmt.Fprintf(&report, "%-8s %v\n", tt.policy, rep)
		})
	}
	golden(t, "overload.golden", report.String())
}

// TestAffinityOverHTTP runs the same harness through the proxy against
// workers that answer at once, reading the chosen worker from the header.
func TestAffinityOverHTTP(t *testing.T) {
	var specs []string
	for i := range 3 {
		w := httptest.NewServer(fakeWorker(fmt.Sprintf("w%d", i)))
		defer w.Close()
		specs = append(specs, fmt.Sprintf("w%d=%s", i, w.URL))
	}
	ws, _ := router.ParseWorkers(specs)
	p, _ := router.NewPolicy("kv_approx") // these workers publish no events
	px := httptest.NewServer(router.NewProxy(router.NewRouter(router.NewPool(ws), p, router.Config{})))
	defer px.Close()
	a, err := RunAffinity(context.Background(), &HTTP{BaseURL: px.URL + "/v1", Model: "m", MaxTokens: 8}, 6, 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	if a.StickyRate() != 1 {
		t.Fatalf("over HTTP with kv_approx: %v; want every follow-up back on its worker", a)
	}
}

// TestHTTPTurnReadsEventsAsTheStandardDoes proves the HTTP target reads an
// answer whose chunks are split over several data lines, with CRLF or bare
// CR line ends, as the SSE standard allows a worker to send them.
func TestHTTPTurnReadsEventsAsTheStandardDoes(t *testing.T) {
	tests := []struct {
		name, stream string
	}{
		{"one data line per chunk",
			"data: {\"choices\":[{\"delta\":{\"content\":\"Paged \"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"KV\"}}]}\n\ndata: [DONE]\n\n"},
		{"chunks split over two data lines with CRLF line ends",
			"data: {\"choices\":\r\ndata: [{\"delta\":{\"content\":\"Paged \"}}]}\r\n\r\ndata:{\"choices\":[{\"delta\":\r\ndata:{\"content\":\"KV\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n"},
		{"bare CR line ends and a comment inside an event",
			"data: {\"choices\":\r: split here\rdata: [{\"delta\":{\"content\":\"Paged \"}}]}\r\rdata: {\"choices\":[{\"delta\":{\"content\":\"KV\"}}]}\r\r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tt.stream)
			}))
			defer w.Close()
			turn, err := (&HTTP{BaseURL: w.URL + "/v1", Model: "m"}).Begin(context.Background(), Prompt{Messages: []tokenizer.Message{{Role: "user", Content: "hi"}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := turn.Finish(); err != nil || turn.Reply() != "Paged KV" {
				t.Fatalf("reply %q, err %v; want Paged KV", turn.Reply(), err)
			}
		})
	}
}
