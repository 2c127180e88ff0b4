//go:build !race

package loadgen

import (
	"math"
	"testing"
	"time"
)

// TestAccuracy checks, at 50 streams, that the client measures where it
// should: no systematic skew in TTFT (median error), ITL within 1 ms at p99
// whether chunks carry one token or three, OSL from usage rather than chunk
// counts, and a window that reports what was measured. TTFT's p99 at 500
// streams depends on the machine's scheduling more than on the client, and is
// measured by BenchmarkAccuracy500Streams and ...ServerApart. It is built
// without the race detector only, whose slowdown is not the client's error,
// so make test runs it in its second step.
func TestAccuracy(t *testing.T) {
	tests := []struct {
		name     string
		perChunk int
	}{
		{"one token per chunk is measured without skew", 1},
		{"three tokens per chunk neither inflate OSL nor distort ITL", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := measureAccuracy(t, 50, tt.perChunk)
			// A host too busy to keep the server's own schedule (a CI run
			// beside a browser test once made its flushes 61 ms late at
			// p99, and the client's reads 244 µs late at the median) says
			// nothing of the client's accuracy: measure again, twice at
			// most. A quiet host keeps the schedule to 1-2 ms.
			for try := 1; try < 3 && a.late > 10*time.Millisecond && a.ttftMed > 200*time.Microsecond; try++ {
				t.Logf("the server flushed %v late at p99: the host is busy, measuring again", a.late)
				a = measureAccuracy(t, 50, tt.perChunk)
			}
			t.Logf("|error| p50/p99: TTFT %v/%v, ITL %v/%v; server late p99 %v; window TTFT p99 %.2f ms, TPOT p99 %.3f ms, inter-chunk p50 %.2f ms",
				a.ttftMed, a.ttft, a.itlMed, a.itl, a.late, a.window.TTFT.P99, a.window.TPOT.P99, a.window.InterChunk.P50)
			if a.ttftMed > 200*time.Microsecond || a.itl > time.Millisecond {
				t.Errorf("TTFT median error %v (want ≤ 0.2 ms), ITL p99 error %v (want ≤ 1 ms)", a.ttftMed, a.itl)
			}
			if d := a.window.TTFT.P99 - a.measuredTTFTp99Ms; math.Abs(d) > a.measuredTTFTp99Ms*sketchAccuracy {
				t.Errorf("window TTFT p99 %.3f ms, exact p99 of the same TTFTs %.3f ms: beyond the sketch's accuracy", a.window.TTFT.P99, a.measuredTTFTp99Ms)
			}
			if gap := a.window.InterChunk.P50; math.Abs(gap-ms(accITL)*float64(tt.perChunk)) > 1 {
				t.Errorf("inter-chunk p50 %.2f ms, want %d × 20 ms: chunk gaps are not ITL", gap, tt.perChunk)
			}
		})
	}
}
