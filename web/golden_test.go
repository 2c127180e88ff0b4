package web

import (
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestPagesMatchTheirGoldenFiles renders the page and its fragments for a
// settled A/B view (round-robin at TTFT p95 561 ms and a 86% hit rate, kv at
// 372 ms and 98%), as an operator and as a visitor, and compares each with
// its golden file: a change to what the page says shows up in review as a
// diff (go test ./web -run TestPagesMatchTheirGoldenFiles -update rewrites
// them).
func TestPagesMatchTheirGoldenFiles(t *testing.T) {
	s, la, lb, _, _ := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	la.convs, lb.convs = goldenConversations()
	h := s.Handler()
	tests := []struct {
		name, path, remote string
	}{
		{"page_operator", "/", "127.0.0.1:1234"},
		{"page_visitor", "/", "192.0.2.7:1234"},
		{"how", "/how", "127.0.0.1:1234"},
		{"conversations", "/conversations", "127.0.0.1:1234"},
		{"conversation_a", "/conversations/7", "127.0.0.1:1234"},
		{"conversation_b_failed_turn", "/conversations/8?lane=b", "192.0.2.7:1234"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.path, nil)
			r.RemoteAddr = tt.remote
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != 200 {
				t.Fatalf("GET %s: %d %s", tt.path, w.Code, w.Body)
			}
			got, _ := io.ReadAll(w.Body)
			golden(t, tt.name, tt.path, got)
		})
	}
}

// goldenConversations are each lane's log: in lane A conversation 7, two
// turns answered and done, and 9, still asking (its wait depends on the
// clock, so only the list shows it); in lane B conversation 8, whose second
// turn failed with a 503 from the worker.
func goldenConversations() (a, b []loadgen.ConversationLog) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	opening := loadgen.TurnLog{Index: 0, Question: "Explain this text.", QuestionSource: "opening",
		Answer: "PagedAttention stores the KV cache in fixed-size blocks.", TTFT: 412, E2E: 21800, TPOT: 25.8, ISL: 3912, OSL: 830, CachedTokens: 3840, Worker: "sim-1"}
	a = []loadgen.ConversationLog{
		{ID: 7, StarterID: "paged-attention", Title: "Paged attention", Started: start, Planned: 2, Done: true, Turns: []loadgen.TurnLog{
			opening,
			{Index: 1, Question: "Why blocks of 16 tokens?", QuestionSource: "builtin", Answer: "A block of 16 keeps the waste under one block a sequence.",
				TTFT: 288, E2E: 19400, TPOT: 23.1, ISL: 4768, OSL: 830, CachedTokens: 4736, Worker: "sim-1"},
		}},
		{ID: 9, StarterID: "paged-attention", Title: "Paged attention", Started: start, Planned: 5,
			Asking: &loadgen.AskingTurn{Index: 0, Question: "Explain this text.", QuestionSource: "opening", Sent: start}},
	}
	b = []loadgen.ConversationLog{
		{ID: 8, StarterID: "paged-attention", Title: "Paged attention", Started: start, Planned: 3, Turns: []loadgen.TurnLog{
			opening,
			{Index: 1, Question: "What does a block of 16 cost?", QuestionSource: "fallback", TTFT: 0, E2E: 31, ISL: 4768, Worker: "sim-4",
				Error: "HTTP 503: injected fault", Class: loadgen.ErrHTTP503},
		}},
	}
	return a, b
}

// TestTheSingleViewPageMatchesItsGoldenFile renders the page with one
// fleet (--ab off, or real workers): kv live at 120 conversations, with a
// settled window of TTFT p95 372 ms and a 98% hit rate, against the
// built-in baseline, as an operator sees it.
func TestTheSingleViewPageMatchesItsGoldenFile(t *testing.T) {
	load := &fakeLoad{target: 120}
	load.snap.Window = settled(window(372, 0.98))
	s := New(load, newFakeRouter("kv"), testOptions())
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:1234"
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("GET /: %d %s", w.Code, w.Body)
	}
	golden(t, "page_single", "/", w.Body.Bytes())
}

// golden compares the page GET path answered with testdata/name.golden.html,
// or rewrites that file with -update.
func golden(t *testing.T, name, path string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden.html")
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("GET %s differs from %s (rerun with -update and review the diff):\n%s", path, file, got)
	}
}

// TestRecordingPagesMatchTheirGoldenFiles renders the list of recordings and
// the replay of one with frames (recordingServer's) and compares each with
// its golden file. The store stamps a recording's start with the real
// clock, so the list's start times are masked before the comparison.
func TestRecordingPagesMatchTheirGoldenFiles(t *testing.T) {
	s, _ := recordingServer(t)
	started := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	for _, tt := range []struct{ name, path string }{
		{"recordings", "/recordings"},
		{"replay", "/recordings/1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(s, "GET", tt.path, false)
			if w.Code != 200 {
				t.Fatalf("GET %s: %d %s", tt.path, w.Code, w.Body)
			}
			golden(t, tt.name, tt.path, started.ReplaceAll(w.Body.Bytes(), []byte("YYYY-MM-DD hh:mm:ss")))
		})
	}
}
