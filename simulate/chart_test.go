package simulate

import (
	"bytes"
	"image/color"
	"testing"

	"github.com/kvlens/kvlens/internal/chartcheck"
)

// TestPlanChartDrawsEachPolicy draws a plan over 1–3 workers for three
// policies, one with an envelope of 0 throughout: a 1500×844 PNG with each
// policy's line in its own colour.
func TestPlanChartDrawsEachPolicy(t *testing.T) {
	var r PlanResult
	for n := 1; n <= 3; n++ {
		r.Capacities = append(r.Capacities,
			Capacity{Policy: "round_robin", Workers: n},
			Capacity{Policy: "dynamo", Workers: n, MaxConcurrency: 40 * n},
			Capacity{Policy: "kv", Workers: n, MaxConcurrency: 60 * n})
	}
	var b bytes.Buffer
	if err := WritePlanChart(&b, r, "3 × H200"); err != nil {
		t.Fatal(err)
	}
	img, drawn, err := chartcheck.Colours(&b)
	if err != nil {
		t.Fatal(err)
	}
	if sz := img.Bounds().Size(); sz.X != 1500 || sz.Y < 840 || sz.Y > 845 {
		t.Fatalf("size %v, want 1500×~844", sz)
	}
	for i, pol := range []string{"round_robin", "dynamo", "kv"} {
		if c := planColors[i].(color.RGBA); !drawn[c] {
			t.Errorf("the chart has no pixel of %s's colour %v", pol, c)
		}
	}
}
