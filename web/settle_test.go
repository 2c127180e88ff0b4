package web

import (
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

func TestSettling(t *testing.T) {
	tests := []struct {
		name        string
		covered     time.Duration
		firstTokens int
		completed   int
		errors      int
		want        string
	}{
		{"a window just begun is settling from zero", 0, 0, 0, 0, "settling (0 s of 30)"},
		{"a young window counts its seconds", 12500 * time.Millisecond, 300, 40, 0, "settling (12 s of 30)"},
		{"plenty of requests do not shorten the time", 29 * time.Second, 900, 500, 0, "settling (29 s of 30)"},
		{"thirty seconds with too few first tokens waits for them", 45 * time.Second, 12, 0, 0, "settling (12 of 20 requests)"},
		// after a cache reset at 180 conversations nothing ends for some
		// 45 s, while first tokens come every second
		{"thirty seconds and twenty first tokens are settled, with nothing ended", SettleTime, SettleRequests, 0, 0, ""},
		// a fleet answering every request with 503 has no first token: its
		// error tile is the figure to read
		{"failed requests count as heard from", time.Minute, 0, 0, 20, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := settling(loadgen.Stats{Covered: tt.covered, TTFT: loadgen.Quantiles{Count: tt.firstTokens}, Completed: tt.completed, Errors: tt.errors})
			if got != tt.want {
				t.Fatalf("settling = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAnswering(t *testing.T) {
	tests := []struct {
		name    string
		covered time.Duration
		answers int
		want    string
	}{
		{"a young window says its seconds, as for TTFT", 12 * time.Second, 40, "settling (12 s of 30)"},
		{"thirty seconds wait for answers from requests all of whose predecessors ended", 40 * time.Second, 3, "answers (3 of 20)"},
		{"twenty such answers are settled", 40 * time.Second, SettleRequests, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Plenty of first tokens and ended requests: they settle TTFT,
			// not the answers.
			w := loadgen.Stats{Covered: tt.covered, TTFT: loadgen.Quantiles{Count: 500}, Completed: 100, Answers: tt.answers}
			if got := answering(w); got != tt.want {
				t.Fatalf("answering = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRatesWaitForAFewSecondsOfWindow(t *testing.T) {
	tests := []struct {
		name    string
		covered time.Duration
		want    bool
	}{
		// one 1,000-token answer ending 0.2 s into a window is not 5,000 tok/s
		{"a window 0.2 s old has no rate", 200 * time.Millisecond, false},
		{"a window just short of rateSpan has none", rateSpan - time.Millisecond, false},
		{"a window of rateSpan has its rates", rateSpan, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := loadgen.Snapshot{Window: loadgen.Stats{Covered: tt.covered, Completed: 1, RequestsPerSec: 5, OutputTokensPerSec: 5000}}
			p := point(snap)
			if got := p.OutputTokensPerSec != nil && p.RequestsPerSec != nil; got != tt.want {
				t.Fatalf("rates in the chart point: %v, want %v", got, tt.want)
			}
			s := New(&fakeLoad{snap: snap}, newFakeRouter("kv"), testOptions())
			if got := tile(tilesNow(s), "tops").Value != "—"; got != tt.want {
				t.Fatalf("throughput tile shows a figure: %v, want %v", got, tt.want)
			}
		})
	}
}
