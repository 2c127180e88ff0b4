// Command noiseprobe measures how far two lanes running one policy differ
// by chance: the noise bands the A/B tiles colour a difference beyond
// (metric.noise in web/dashboard.go, the table in docs/dashboard.md).
//
// It runs the default demo in this process with a pair of policies that
// decide alike (dynamo and dynamo_latest), so the two simulated fleets
// differ only by real-time scheduling, waits for the warm-up, then reads
// /api/state every -every for -for and prints, for each tile's figure,
// the 50th and 90th percentiles and the largest of |B − A| (in percent of
// A, in points for the hit rate), and the band: the 90th percentile
// rounded up. The reads are a rolling window's, -every apart, so they are
// not independent: ten minutes hold about ten independent windows.
//
//	go run ./scripts/noiseprobe -concurrency 60 -for 10m
//	go run ./scripts/noiseprobe -concurrency 120 -for 10m
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/kvlens/kvlens/demo"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/scripts/internal/getjson"
)

// figure is one tile's figure as the tiles read it from a window.
type figure struct {
	name   string
	points bool // a difference in percentage points, not percent
	get    func(loadgen.Stats) float64
}

var figures = []figure{
	{"first token p50", false, func(s loadgen.Stats) float64 { return s.TTFT.P50 }},
	{"first token p95", false, func(s loadgen.Stats) float64 { return s.TTFT.P95 }},
	{"per token p50", false, func(s loadgen.Stats) float64 { return s.TPOT.P50 }},
	{"per token p95", false, func(s loadgen.Stats) float64 { return s.TPOT.P95 }},
	{"chunk gap p50", false, func(s loadgen.Stats) float64 { return s.InterChunk.P50 }},
	{"answer p50", false, func(s loadgen.Stats) float64 { return s.E2E.P50 }},
	{"answer p95", false, func(s loadgen.Stats) float64 { return s.E2E.P95 }},
	{"tokens/s", false, func(s loadgen.Stats) float64 { return s.OutputTokensPerSec }},
	{"requests/s", false, func(s loadgen.Stats) float64 { return s.RequestsPerSec }},
	{"good req/s", false, func(s loadgen.Stats) float64 { return s.GoodputPerSec }},
	{"cache hit", true, func(s loadgen.Stats) float64 { return 100 * s.KVHitRate }},
}

type state struct {
	Lanes []struct {
		Window *loadgen.Stats `json:"window"`
	} `json:"lanes"`
	Warmup *struct {
		Over bool `json:"over"`
	} `json:"warmup"`
}

func main() {
	conc := flag.Int("concurrency", 60, "conversations in each lane")
	every := flag.Duration("every", 10*time.Second, "time between reads")
	span := flag.Duration("for", 10*time.Minute, "how long to read, after the warm-up")
	flag.Parse()

	cfg := demo.DefaultConfig()
	cfg.Addr, cfg.DB, cfg.Record = "127.0.0.1:0", "", false
	cfg.AB = []string{"dynamo", "dynamo_latest"}
	cfg.Warm, cfg.WarmSpeed = demo.DefaultWarm, demo.DefaultWarmSpeed // as kvlens starts
	cfg.Load.Concurrency = *conc
	d, err := demo.Start(cfg)
	if err != nil {
		fail("%v", err)
	}
	for {
		var st state
		if err := getjson.Get(d.URL+"/api/state", &st); err == nil && (st.Warmup == nil || st.Warmup.Over) {
			break
		}
		time.Sleep(time.Second)
	}
	// When the warm-up fell behind, its windows were dropped and new ones
	// begun: wait one window's length for them to fill.
	time.Sleep(time.Minute)
	diffs := make([][]float64, len(figures))
	for end := time.Now().Add(*span); time.Now().Before(end); time.Sleep(*every) {
		var st state
		if err := getjson.Get(d.URL+"/api/state", &st); err != nil {
			fail("read the state: %v", err)
		}
		if len(st.Lanes) != 2 || st.Lanes[0].Window == nil || st.Lanes[1].Window == nil {
			fail("the state has no two lanes' windows")
		}
		a, b := *st.Lanes[0].Window, *st.Lanes[1].Window
		for i, f := range figures {
			va, vb := f.get(a), f.get(b)
			switch {
			case f.points:
				diffs[i] = append(diffs[i], math.Abs(vb-va))
			case va > 0:
				diffs[i] = append(diffs[i], 100*math.Abs(vb-va)/va)
			}
		}
	}
	fmt.Printf("%d conversations a lane, %s read every %s\n\n", *conc, *span, *every)
	fmt.Println("| figure | 50th percentile | 90th percentile | largest | band |")
	fmt.Println("|:--|--:|--:|--:|--:|")
	for i, f := range figures {
		unit := "%"
		if f.points {
			unit = " pt"
		}
		v := slices.Sorted(slices.Values(diffs[i]))
		if len(v) == 0 {
			fmt.Printf("| %s | — | — | — | — |\n", f.name)
			continue
		}
		p90 := quantile(v, 0.9)
		fmt.Printf("| %s | %.1f%s | %.1f%s | %.1f%s | %.0f%s |\n", f.name, quantile(v, 0.5), unit, p90, unit, v[len(v)-1], unit, max(1, math.Ceil(p90)), unit)
	}
}

// quantile is the q-quantile of sorted values, the nearest rank.
func quantile(sorted []float64, q float64) float64 {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "noiseprobe: "+format+"\n", a...)
	os.Exit(1)
}
