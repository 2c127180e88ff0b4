// Command queueprobe measures how often Dynamo's router queue would hold a
// request: Dynamo queues a request while every worker's active prefill
// tokens (uncached prompt tokens of requests without a first token) exceed
// router_queue_threshold × max_num_batched_tokens. It runs each workload
// of the suite in virtual time, as `kvlens bench routing` does, samples the
// router's per-worker active prefill tokens every 50 ms of the measured
// window, and prints the largest minimum over the workers and the share of
// samples past the thresholds 16 (Dynamo's default now), 4 (its default
// before) and 1.
//
//	go run ./scripts/queueprobe -policy dynamo_latest -level 200 -seeds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
)

func main() {
	policy := flag.String("policy", "dynamo_latest", "routing policy")
	level := flag.Int("level", 200, "conversations, or sessions in flight")
	workers := flag.Int("workers", 3, "simulated workers")
	seeds := flag.Int("seeds", 3, "seeds 1 to this")
	measure := flag.Duration("measure", 2*time.Minute, "time sampled")
	only := flag.String("workload", "", "one workload of the suite (default: every one)")
	flag.Parse()

	prof := sim.MustProfile("h200-llama3.1-70b-fp8-tp1")
	budget := float64(prof.MaxNumTokens)
	thresholds := []float64{16, 4, 1}
	ctx := context.Background()
	for _, w := range loadgen.Workloads {
		if *only != "" && w.Name != *only {
			continue
		}
		most, samples := 0, 0
		past := make([]int, len(thresholds))
		for seed := uint64(1); seed <= uint64(*seeds); seed++ {
			load := loadgen.DefaultConfig()
			w.Apply(&load)
			load.Concurrency = *level
			load.MaxContext = prof.MaxModelLen
			if w.Trace != nil {
				recs, err := w.TraceFor(*level, seed, w.Warmup+*measure)
				if err != nil {
					fail("%v", err)
				}
				load.Trace, _ = loadgen.FitTrace(recs, prof.MaxModelLen)
			}
			p, err := simulate.New(simulate.Config{Profile: prof, Workers: *workers, Policy: *policy,
				Router: router.Config{Admission: router.AdmitQueue}, Load: load, Seed: seed})
			if err != nil {
				fail("%v", err)
			}
			p.Gen.Start()
			if err := p.Loop.Sleep(ctx, w.Warmup); err != nil {
				fail("%v", err)
			}
			for t := time.Duration(0); t < *measure; t += 50 * time.Millisecond {
				if err := p.Loop.Sleep(ctx, 50*time.Millisecond); err != nil {
					fail("%v", err)
				}
				var prefill []int
				for _, st := range p.Router.Workers() {
					prefill = append(prefill, st.ActivePrefillTokens)
				}
				least := slices.Min(prefill)
				most = max(most, least)
				samples++
				for i, th := range thresholds {
					if float64(least) > th*budget {
						past[i]++
					}
				}
			}
			p.Close()
		}
		fmt.Printf("%-14s %s at %d, seeds 1-%d: least-loaded worker's active prefill at most %d tokens (%.2f × %d);",
			w.Name, *policy, *level, *seeds, most, float64(most)/budget, prof.MaxNumTokens)
		for i, th := range thresholds {
			fmt.Printf(" past %g×: %.2f%%", th, 100*float64(past[i])/float64(samples))
		}
		fmt.Println()
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "queueprobe: "+format+"\n", a...)
	os.Exit(1)
}
