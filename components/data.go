// Package components holds the dashboard's templ components. Each renders
// from a plain data struct, so tests can render them without a server.
package components

import (
	"fmt"
	"math"
)

// PageData is what the dashboard page needs on first load.
type PageData struct {
	// Mode is the active routing policy in plain words, such as "Round-robin".
	Mode string
	// Workers describes the fleet, such as "3 simulated H200 workers".
	Workers string
	// Running says whether load is being generated.
	Running bool
	// SliderMin, SliderMax and SliderStep bound the concurrency slider.
	SliderMin, SliderMax, SliderStep int
	// Target is the concurrency asked for.
	Target int
	// SLOTTFTms is the TTFT objective, in ms.
	SLOTTFTms float64
	// SLOTPOTms is the TPOT objective, in ms.
	SLOTPOTms float64
	// Tiles are the headline figures at render time.
	Tiles TilesData
	// Operator says whether this browser may change the demo; viewers see
	// the controls disabled.
	Operator bool
	// CanLogin says whether an operator token exists to enter.
	CanLogin bool
	// QR says whether to show the QR code of PublicURL.
	QR bool
	// PublicURL is the address the QR code opens.
	PublicURL string
	// How fills the "How it works" panel.
	How HowData
}

// TilesData are the headline figures, pushed to the browser every second.
type TilesData struct {
	// Live is the number of conversations running.
	Live int
	// Target is the concurrency asked for.
	Target int
	// TTFTp50 and TTFTp95 are in ms; 0 with TTFTCount 0 means no data yet.
	TTFTp50, TTFTp95 float64
	// TTFTCount is how many requests the TTFT figures cover.
	TTFTCount int
	// TPOTp50 and TPOTp95 are in ms.
	TPOTp50, TPOTp95 float64
	// TPOTCount is how many requests the TPOT figures cover.
	TPOTCount int
	// OutputTokensPerSec is the window's output throughput.
	OutputTokensPerSec float64
	// Errors counts failed requests in the window.
	Errors int
	// ErrorRate is from 0 to 1.
	ErrorRate float64
	// SLOTTFTms and SLOTPOTms colour the tiles.
	SLOTTFTms, SLOTPOTms float64
}

// msText formats a latency in ms for a tile, or a dash when there is no data.
func msText(v float64, n int) string {
	if n == 0 || math.IsNaN(v) {
		return "—"
	}
	if v >= 10000 {
		return fmt.Sprintf("%.1f s", v/1000)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// sloLevel is "ok", "warn" (from 90% of the objective) or "bad" (at or over
// it), as the original demo coloured its table.
func sloLevel(v, slo float64, n int) string {
	switch {
	case n == 0 || slo <= 0:
		return "none"
	case v >= slo:
		return "bad"
	case v >= 0.9*slo:
		return "warn"
	}
	return "ok"
}

func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

func num(v float64) string { return fmt.Sprintf("%.0f", v) }

func errLevel(n int) string {
	if n > 0 {
		return "bad"
	}
	return "ok"
}

func itoa(n int) string { return fmt.Sprint(n) }

func fixed1(v float64) string { return fmt.Sprintf("%.1f", v) }
