package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/tokenizer"
)

// TestInjectedFailuresAreCountedByClass drives the generator against a
// server that fails a fixed share of requests in each way, and checks that
// each failure lands in its class and in the error-adjusted percentiles.
func TestInjectedFailuresAreCountedByClass(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(streamServer(func(*http.Request) streamSpec {
		ok := streamSpec{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 5, perChunk: 1, worker: "w1"}
		switch n.Add(1) % 10 { // 60% succeed, 10% each way of failing
		case 1:
			ok.status = 503
		case 2:
			ok.status = 429
		case 3:
			ok.cutAfter = 2
		case 4:
			ok.ttft = time.Second // past the 200 ms request timeout
		}
		return ok
	}))
	defer srv.Close()
	cfg := testConfig(8)
	cfg.Turns = UniformTurns(1, 1)
	cfg.RequestTimeout = 200 * time.Millisecond
	cfg.ErrorPause = time.Millisecond // replace failed conversations at once: this test counts failures
	g, _ := New(NewOpenAIClient(srv.URL+"/v1", "m", ""), cfg, nil)
	g.Start()
	waitFor(t, "100 requests", func() bool { s := g.Snapshot().Window; return s.Completed+s.Errors >= 100 })
	g.Stop()
	s := g.Snapshot().Window
	for _, c := range []ErrorClass{ErrHTTP503, ErrHTTP429, ErrStream, ErrTimeout} {
		share := float64(s.ErrorsByClass[c]) / float64(s.Completed+s.Errors)
		if share < 0.05 || share > 0.15 {
			t.Errorf("%s is %.0f%% of requests, want about 10%% (by class: %v)", c, 100*share, s.ErrorsByClass)
		}
	}
	if s.ErrorRate < 0.3 || s.ErrorRate > 0.5 {
		t.Errorf("error rate %.2f, want about 0.4", s.ErrorRate)
	}
	// 40% failures: p50 still finite, p95 and p99 +Inf; E2E's plain p95
	// looks healthy, which is exactly what the adjusted form must not.
	if a := s.AdjE2E; a.P50.IsInf() || !a.P95.IsInf() || !a.P99.IsInf() || s.E2E.P95 > 100 {
		t.Errorf("adjusted E2E %+v with plain p95 %.1f ms", a, s.E2E.P95)
	}
	if w := g.Snapshot().Workers["w1"]; w.Errors == 0 || w.ErrorsByClass[ErrHTTP503] == 0 {
		t.Errorf("worker w1 shows no failures: %+v", w)
	}
	js, err := json.Marshal(g.Snapshot())
	if err != nil || !strings.Contains(string(js), `"p95":null`) {
		t.Fatalf("snapshot JSON: %v; want +Inf written as null", err)
	}
}

func TestUserModelThroughGoOpenAI(t *testing.T) {
	var lastBody atomic.Value
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
		want    string
	}{
		{"a question comes back trimmed", func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			json.NewDecoder(r.Body).Decode(&body)
			lastBody.Store(body)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"  Why blocks of 16?\n"}}]}`))
		}, "", "Why blocks of 16?"},
		{"a server error fails the call", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"down"}}`, 500)
		}, "user model", ""},
		{"an empty answer fails the call", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":" "}}]}`))
		}, "empty", ""},
		{"a model that ignores max_tokens fails the call rather than fill every later prompt", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"` + strings.Repeat("why ", 1025) + `?"}}]}`))
		}, "a question of 4101 bytes, more than 4096", ""},
		{"a slow model times out", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // so the server notices the client leave
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}, "deadline", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			u := NewUserModel(srv.URL+"/v1", "small", "key", 100*time.Millisecond)
			s := Starter{Title: "Paging", Topic: "paged attention"}
			q, err := u.FollowUp(context.Background(), s, []tokenizer.Message{{Role: "assistant", Content: "vLLM stores the cache in blocks of 16 tokens."}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || q != tt.want {
				t.Fatalf("got %q, %v; want %q", q, err, tt.want)
			}
			body := lastBody.Load().(map[string]any)
			msgs, _ := json.Marshal(body["messages"])
			if body["model"] != "small" || body["max_tokens"] != float64(UserModelMaxTokens) || !strings.Contains(string(msgs), "blocks of 16 tokens") || !strings.Contains(string(msgs), "paged attention") {
				t.Fatalf("request %v: want the model, max_tokens 100, the topic and the last answer", body)
			}
		})
	}
}

// refusing is a transport that refuses every request at the instant it is
// sent, as a router that sheds everything does in virtual time. It stops
// answering after limit requests, so a generator that never pauses ends the
// test instead of hanging it.
type refusing struct {
	loop  *des.Loop
	sent  int
	limit int
}

func (r *refusing) Start(_ TurnRequest, _ func(string, time.Duration), done func(Result)) func(error) {
	r.sent++
	if r.sent <= r.limit {
		r.loop.AfterFunc(0, func() {
			done(Result{Err: errors.New("HTTP 503: all workers are busy"), Class: ErrHTTP503})
		})
	}
	return func(error) {}
}

func TestFailedConversationsAreReplacedAfterThePause(t *testing.T) {
	tests := []struct {
		name  string
		pause time.Duration
		want  int // requests in 10 s of virtual time from 8 conversations
	}{
		{"the default pause replaces each of 8 conversations once a second", 0, 8 * 11},
		{"a 2.5 s pause replaces them every 2.5 s", 2500 * time.Millisecond, 8 * 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loop := des.New(time.Unix(1_700_000_000, 0))
			tr := &refusing{loop: loop, limit: 10_000}
			cfg := testConfig(8)
			cfg.Clock = loop
			cfg.ErrorPause = tt.pause
			g, err := NewAsync(tr, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			g.Start()
			loop.Run(10 * time.Second)
			if tr.sent != tt.want {
				t.Fatalf("%d requests in 10 s, want %d", tr.sent, tt.want)
			}
			if s := g.Snapshot().Window; s.Errors == 0 {
				t.Fatalf("no errors counted: %+v", s)
			}
		})
	}
}
