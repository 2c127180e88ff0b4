package router

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
			switch {
			case tt.wantSwitch == "" && len(switched) > 0:
				t.Errorf("switched: %q; want no switch", switched)
			case tt.wantSwitch != "" && (len(switched) != 1 || !strings.Contains(switched[0], tt.wantSwitch)):
				t.Errorf("switched: %q; want one line naming %q", switched, tt.wantSwitch)
			}
		})
	}
}
