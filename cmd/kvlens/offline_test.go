package main

import (
	"strings"
	"testing"
)

// TestSimBenchOfflineShowsProgressOnStderr: a million requests ran for
// minutes with nothing on the screen. Progress goes to stderr, a line a
// case in a log, and stdout holds the table alone.
func TestSimBenchOfflineShowsProgressOnStderr(t *testing.T) {
	cmd := kvlens("sim", "bench", "offline", "--cases", "100/10,200/20", "--requests", "30")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	want := []string{"kvlens sim bench offline: [1/2] 100/10: 30 requests in ", "kvlens sim bench offline: [2/2] 200/20: 30 requests in "}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d, one a case:\n%s", len(lines), len(want), stderr.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("stderr line %d is %q, want it to start %q", i+1, lines[i], w)
		}
	}
	rows := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(rows) != 3 || !strings.Contains(rows[0], "ISL/OSL") || !strings.Contains(rows[1], "100/10") || !strings.Contains(rows[2], "200/20") {
		t.Fatalf("stdout is not the table alone:\n%s", stdout.String())
	}
}

func TestOfflineProgressDisplays(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		want     []string // each must appear on stderr
		not      string   // must not
	}{
		// A bar over both cases' requests, its count at the end whole.
		{"a terminal gets a bar over every case's requests", true, []string{"[2/2] 200/20", "(20/20)"}, "requests in "},
		// A line a case, without a bar's carriage returns.
		{"a log gets a line a case", false, []string{"[1/2] 100/10: 10 requests in ", "\nkvlens sim bench offline: [2/2] 200/20: 10 requests in "}, "\r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w strings.Builder
			p := newOfflineProgress(&w, tt.terminal, 2, 10)
			for i, c := range [][2]int{{100, 10}, {200, 20}} {
				p.start(i, c[0], c[1])
				for n := 1; n <= 10; n++ {
					p.finished(n)
				}
				p.done()
			}
			p.finish()
			for _, s := range tt.want {
				if !strings.Contains(w.String(), s) {
					t.Errorf("progress lacks %q:\n%q", s, w.String())
				}
			}
			if strings.Contains(w.String(), tt.not) {
				t.Errorf("progress holds %q:\n%q", tt.not, w.String())
			}
		})
	}
}
