package web

import (
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestPagesMatchTheirGoldenFiles renders the page and its fragments for a
// settled A/B view (round-robin at TTFT p95 561 ms and a 86% hit rate, kv at
// 372 ms and 98%), as an operator and as a visitor, and compares each with
// its golden file: a change to what the page says shows up in review as a
// diff (go test ./web -run TestPagesMatchTheirGoldenFiles -update rewrites
// them).
func TestPagesMatchTheirGoldenFiles(t *testing.T) {
	s, _, _, _, _ := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	h := s.Handler()
	tests := []struct {
		name, path, remote string
	}{
		{"page_operator", "/", "127.0.0.1:1234"},
		{"page_visitor", "/", "192.0.2.7:1234"},
		{"how", "/how", "127.0.0.1:1234"},
		{"conversations", "/conversations", "127.0.0.1:1234"},
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
