package demo

import (
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

func TestStatusLine(t *testing.T) {
	settled := loadgen.Stats{Covered: time.Minute,
		TTFT: loadgen.Quantiles{Count: 120, P50: 231.4, P95: 402.6}, TPOT: loadgen.Quantiles{Count: 90, P50: 25.04},
		OutputTokensPerSec: 1520.4, Errors: 3, ErrorRate: 0.025}
	young := settled
	young.Covered = 12 * time.Second
	tests := []struct {
		name    string
		warming bool
		snap    loadgen.Snapshot
		want    string
	}{
		{"before any answer, figures are dashes, not zeros, and the window says it settles",
			false, loadgen.Snapshot{Target: 60, Live: 12},
			"kvlens: kv, 12/60 conversations, TTFT p50 — p95 — (0), TPOT p50 —, 0 tok/s, 0 errors (0.0%); settling (0 s of 30)"},
		{"a settled window's figures and error rate show with no note",
			false, loadgen.Snapshot{Target: 60, Live: 60, Window: settled},
			"kvlens: kv, 60/60 conversations, TTFT p50 231 ms p95 403 ms (120), TPOT p50 25.0 ms, 1520 tok/s, 3 errors (2.5%)"},
		{"a window 12 s after a change says it is settling, as the page's tiles do",
			false, loadgen.Snapshot{Target: 60, Live: 60, Window: young},
			"kvlens: kv, 60/60 conversations, TTFT p50 231 ms p95 403 ms (120), TPOT p50 25.0 ms, 1520 tok/s, 3 errors (2.5%); settling (12 s of 30)"},
		{"during the warm-up the figures are the warm-up's, and say so",
			true, loadgen.Snapshot{Target: 60, Live: 60, Window: settled},
			"kvlens: kv, 60/60 conversations, TTFT p50 231 ms p95 403 ms (120), TPOT p50 25.0 ms, 1520 tok/s, 3 errors (2.5%); warming up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusLine("kv", tt.snap, statusNote(tt.warming, tt.snap.Window)); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
