package demo

import (
	"testing"

	"github.com/kvlens/kvlens/loadgen"
)

func TestStatusLine(t *testing.T) {
	tests := []struct {
		name string
		snap loadgen.Snapshot
		want string
	}{
		{"before any answer, figures are dashes, not zeros",
			loadgen.Snapshot{Target: 60, Live: 12},
			"kvlens: kv, 12/60 conversations, TTFT p50 — p95 — (0), TPOT p50 —, 0 tok/s, 0 errors (0.0%)"},
		{"with data, figures and the error rate show",
			loadgen.Snapshot{Target: 60, Live: 60, Window: loadgen.Stats{
				TTFT: loadgen.Quantiles{Count: 120, P50: 231.4, P95: 402.6}, TPOT: loadgen.Quantiles{Count: 90, P50: 25.04},
				OutputTokensPerSec: 1520.4, Errors: 3, ErrorRate: 0.025}},
			"kvlens: kv, 60/60 conversations, TTFT p50 231 ms p95 403 ms (120), TPOT p50 25.0 ms, 1520 tok/s, 3 errors (2.5%)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusLine("kv", tt.snap); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
