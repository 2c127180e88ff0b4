package router

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kvlens/kvlens/internal/clocktest"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlens/kvlens/tokenizer"
)

// swappable is a worker whose engine can change while it is down, as a
// pod restarted on another model would: /health answers while up, and
// /tokenize with the current engine. probes counts /tokenize calls.
type swappable struct {
	srv    *httptest.Server
	eng    atomic.Pointer[tokenizer.Engine]
	up     atomic.Bool
	probes atomic.Int64
}

func newSwappable(t *testing.T, eng *tokenizer.Engine) *swappable {
	t.Helper()
	s := &swappable{}
	s.eng.Store(eng)
	s.up.Store(true)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/health" {
			return
		}
		var req struct {
			Messages []tokenizer.Message `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		e := s.eng.Load()
		text, _ := e.Render(req.Messages)
		s.probes.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"tokens": e.Encode(text)})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func TestAutoChooseTriesTheModelsFiles(t *testing.T) {
	model := fixtureEngine(t, "llama3")
	tests := []struct {
		name     string
		workers  []*tokenizer.Engine
		files    *tokenizer.Engine
		want     Source
		wantLine string
	}{
		{"workers running the model's tokenizer match its files", []*tokenizer.Engine{model, model}, model, SourceFiles, "files (the model's tokenizer.json"},
		{"kvlens's workers match the embedded tokenizer, not the files", []*tokenizer.Engine{tokenizer.Embedded}, model, SourceEmbedded, "embedded"},
		{"with no files, the model's workers are asked", []*tokenizer.Engine{model}, nil, SourceWorker, "differently"},
		// sad path
		{"a fleet split between two tokenizers is asked", []*tokenizer.Engine{model, tokenizer.Embedded}, model, SourceWorker, "b tokenizes a sample chat differently"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []string
			for i, e := range tt.workers {
				specs = append(specs, string(rune('a'+i))+"="+newSwappable(t, e).srv.URL)
			}
			ws, _ := ParseWorkers(specs)
			pool := NewPool(ws)
			a := &Auto{Worker: &WorkerTokenize{Pool: pool, Client: http.DefaultClient}, Files: tt.files}
			line := a.Choose(context.Background(), pool)
			if a.Source() != tt.want || !strings.Contains(line, tt.wantLine) {
				t.Errorf("Choose: source %d, line %q; want %d and a line naming %q", a.Source(), line, tt.want, tt.wantLine)
			}
		})
	}
}

// TestAutoRechecksReadmittedWorkers is the re-admission probe: a worker
// that fails its health check and comes back running another tokenizer
// makes Auto choose again, through Watch, and say why.
func TestAutoRechecksReadmittedWorkers(t *testing.T) {
	model := fixtureEngine(t, "llama3")
	tests := []struct {
		name       string
		files      *tokenizer.Engine
		aAfter     *tokenizer.Engine // worker a's engine after b comes back
		bAfter     *tokenizer.Engine // worker b's
		want       Source
		wantSwitch string // "" when Auto must not switch
	}{
		{"a worker back with the same tokenizer changes nothing", model, tokenizer.Embedded, tokenizer.Embedded, SourceEmbedded, ""},
		{"a worker back with the model's tokenizer beside an embedded one makes Auto ask the workers", model, tokenizer.Embedded, model, SourceWorker,
			"b tokenizes a sample chat differently"},
		{"a fleet now all on the model's tokenizer switches to its files", model, model, model, SourceFiles,
			"was the embedded tokenizer, until b was re-admitted"},
		{"without files, a worker back on another tokenizer makes Auto ask the workers", nil, tokenizer.Embedded, model, SourceWorker,
			"worker (each worker's /tokenize)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newSwappable(t, tokenizer.Embedded), newSwappable(t, tokenizer.Embedded)
			ws, _ := ParseWorkers([]string{"a=" + a.srv.URL, "b=" + b.srv.URL})
			pool := NewPool(ws)
			var mu sync.Mutex
			var switched []string
			auto := &Auto{Worker: &WorkerTokenize{Pool: pool, Client: http.DefaultClient}, Files: tt.files,
				OnSwitch: func(line string) { mu.Lock(); switched = append(switched, line); mu.Unlock() }}
			auto.Watch(pool, 5*time.Second)
			if auto.Choose(context.Background(), pool); auto.Source() != SourceEmbedded {
				t.Fatalf("at start, source %d; want embedded", auto.Source())
			}
			b.up.Store(false)
			pool.CheckHealth(context.Background(), http.DefaultClient, time.Second)
			a.eng.Store(tt.aAfter)
			b.eng.Store(tt.bAfter)
			b.up.Store(true)
			probes := b.probes.Load()
			pool.CheckHealth(context.Background(), http.DefaultClient, time.Second)
			for deadline := time.Now().Add(5 * time.Second); ; {
				mu.Lock()
				n := len(switched)
				mu.Unlock()
				if auto.Source() == tt.want && b.probes.Load() > probes && (tt.wantSwitch == "" || n > 0) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("5 s after b came back: source %d, %d probes of b; want %d", auto.Source(), b.probes.Load()-probes, tt.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // a Check still running would show here
			mu.Lock()
			defer mu.Unlock()
			checkSwitched(t, switched, tt.wantSwitch)
		})
	}
}

// checkSwitched fails unless Auto said it switched in one line naming want,
// or, with want empty, said nothing.
func checkSwitched(t *testing.T, switched []string, want string) {
	t.Helper()
	switch {
	case want == "" && len(switched) > 0:
		t.Errorf("switched: %q; want no switch", switched)
	case want != "" && (len(switched) != 1 || !strings.Contains(switched[0], want)):
		t.Errorf("switched: %q; want one line naming %q", switched, want)
	}
}

// TestAutoRetriesAProbeThatTimedOut is a worker slow to answer its first
// probe, not down: Auto tries it again a second later on its clock, while
// the worker is healthy, and the admin API says so until it answers.
func TestAutoRetriesAProbeThatTimedOut(t *testing.T) {
	model := fixtureEngine(t, "llama3")
	tests := []struct {
		name       string
		engine     *tokenizer.Engine // the worker's
		want       Source
		wantProbe  string
		wantSwitch string // "" when Auto must not switch
	}{
		{"a worker on the embedded tokenizer is verified by the retry", tokenizer.Embedded, SourceEmbedded, ProbeMatches, ""},
		{"a worker on another tokenizer makes Auto ask the workers once the retry answers", model, SourceWorker, ProbeDiffers,
			"until a answered a retried probe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var probes atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/tokenize" {
					http.NotFound(w, r) // /health answers 404 here, which no test asks
					return
				}
				if probes.Add(1) == 1 {
					// Slower than the probe's 50 ms, but answering.
					select {
					case <-r.Context().Done():
					case <-time.After(2 * time.Second):
					}
					return
				}
				text, _ := tt.engine.Render(probeChat)
				json.NewEncoder(w).Encode(map[string]any{"tokens": tt.engine.Encode(text)})
			}))
			defer srv.Close()
			ws, _ := ParseWorkers([]string{"a=" + srv.URL})
			pool := NewPool(ws)
			rt := NewRouter(pool, &RoundRobin{}, Config{})
			clk := clocktest.New(time.Unix(1e9, 0))
			var mu sync.Mutex
			var switched []string
			auto := &Auto{Worker: &WorkerTokenize{Pool: pool, Client: http.DefaultClient, Timeout: 50 * time.Millisecond}, Clock: clk,
				OnSwitch: func(line string) { mu.Lock(); switched = append(switched, line); mu.Unlock() }}

			if line := auto.Choose(context.Background(), pool); !strings.Contains(line, "unverified") || !strings.Contains(line, "deadline exceeded") {
				t.Fatalf("Choose: %q; want the embedded tokenizer, unverified, for a probe that timed out", line)
			}
			if st := rt.Workers()[0]; st.TokenizerProbe != ProbeFailed || st.TokenizerProbeFailures != 1 || !strings.Contains(st.TokenizerProbeError, "deadline exceeded") || st.TokenizerProbeRetry != 0 {
				t.Fatalf("before Watch, admin shows probe %q, %d failures, error %q, retry %v s; want failed, 1, the timeout, none",
					st.TokenizerProbe, st.TokenizerProbeFailures, st.TokenizerProbeError, st.TokenizerProbeRetry)
			}
			auto.Watch(pool, time.Second)
			if st := rt.Workers()[0]; st.TokenizerProbeRetry != 1 || !slices.Equal(clk.Pending(), []time.Duration{ProbeRetryFirst}) {
				t.Fatalf("Watch set retries %v, admin shows %v s; want one in 1 s", clk.Pending(), st.TokenizerProbeRetry)
			}
			clk.Advance(ProbeRetryFirst - time.Millisecond)
			time.Sleep(20 * time.Millisecond) // a retry fired early would show here
			if n := probes.Load(); n != 1 {
				t.Fatalf("%d probes before the retry was due, want 1", n)
			}
			clk.Advance(time.Millisecond)
			eventually(t, "answered", func() bool { return rt.Workers()[0].TokenizerProbe == tt.wantProbe })
			st := rt.Workers()[0]
			if auto.Source() != tt.want || st.TokenizerProbeFailures != 1 || st.TokenizerProbeError != "" || st.TokenizerProbeRetry != 0 || len(clk.Pending()) != 0 {
				t.Fatalf("after the retry: source %d, admin shows %d failures, error %q, retry %v s, timers %v; want %d, 1, none, none, none",
					auto.Source(), st.TokenizerProbeFailures, st.TokenizerProbeError, st.TokenizerProbeRetry, clk.Pending(), tt.want)
			}
			mu.Lock()
			defer mu.Unlock()
			checkSwitched(t, switched, tt.wantSwitch)
		})
	}
}

// TestAutoBacksOffWhileTheProbeFails is a healthy worker whose /tokenize
// always fails: the waits between tries double from 1 s to 30 s, stop while
// it fails its health check, and start over at 1 s when it is re-admitted.
func TestAutoBacksOffWhileTheProbeFails(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	var probes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/health" && up.Load():
		case r.URL.Path == "/tokenize":
			probes.Add(1)
			http.Error(w, "tokenizer not loaded", http.StatusInternalServerError)
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ws, _ := ParseWorkers([]string{"a=" + srv.URL})
	pool := NewPool(ws)
	rt := NewRouter(pool, &RoundRobin{}, Config{})
	clk := clocktest.New(time.Unix(1e9, 0))
	var logged []string
	var mu sync.Mutex
	auto := &Auto{Worker: &WorkerTokenize{Pool: pool, Client: http.DefaultClient}, Clock: clk,
		Logf: func(format string, args ...any) {
			mu.Lock()
			logged = append(logged, fmt.Sprintf(format, args...))
			mu.Unlock()
		}}
	auto.Choose(context.Background(), pool)
	auto.Watch(pool, time.Second)
	for i, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30} {
		want *= time.Second
		eventually(t, fmt.Sprintf("retry %d set", i+1), func() bool { return len(clk.Pending()) == 1 })
		if got := clk.Pending()[0]; got != want {
			t.Fatalf("retry %d waits %v, want %v", i+1, got, want)
		}
		if st := rt.Workers()[0]; st.TokenizerProbeRetry != want.Seconds() || st.TokenizerProbeFailures != int64(i+1) || !strings.Contains(st.TokenizerProbeError, "HTTP 500") {
			t.Fatalf("before retry %d, admin shows retry %v s, %d failures, error %q; want %v s, %d, the 500",
				i+1, st.TokenizerProbeRetry, st.TokenizerProbeFailures, st.TokenizerProbeError, want.Seconds(), i+1)
		}
		clk.Advance(want)
		eventually(t, fmt.Sprintf("probe %d", i+2), func() bool { return probes.Load() == int64(i+2) })
	}

	// Down: the pending retry is called off, and none is set.
	eventually(t, "retry 8 set", func() bool { return len(clk.Pending()) == 1 })
	up.Store(false)
	pool.CheckHealth(context.Background(), http.DefaultClient, time.Second)
	if w, st := clk.Pending(), rt.Workers()[0]; len(w) != 0 || st.TokenizerProbeRetry != 0 {
		t.Fatalf("while the worker is down: timers %v, admin retry %v s; want none", w, st.TokenizerProbeRetry)
	}
	// Back: its re-admission's probe fails, and the waits start over.
	up.Store(true)
	pool.CheckHealth(context.Background(), http.DefaultClient, time.Second)
	eventually(t, "a retry after re-admission", func() bool { return len(clk.Pending()) == 1 })
	if got := clk.Pending()[0]; got != ProbeRetryFirst {
		t.Fatalf("the first retry after re-admission waits %v, want %v", got, ProbeRetryFirst)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "a's probe failed") {
		t.Fatalf("logged %q; want one line, for the one reason the probes failed", logged)
	}
}
