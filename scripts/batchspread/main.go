// Command batchspread measures how evenly a routing policy loads the
// workers: it runs the chat workload in virtual time (package simulate, as
// `kvlens bench routing` does), samples every simulated engine's batch
// (running sequences) every half second of the measured window, and
// prints the share of samples above the CUDA-graph limit of 32 and a
// histogram of the spread, the largest batch minus the smallest, over the
// seeds given.
//
// With -in-flight it counts a worker's requests in flight (running and
// queued) instead, loads the fleet as `kvlens sim calibrate` does (its
// chat of 5 turns, in step; -workload is then not used), and also prints, per seed, the largest spread
// and the busiest worker that a 15 s scrape would have seen: the figures
// seed 003 gives for the hardware at 170 conversations.
//
//	go run ./scripts/batchspread -policy kv -level 213 -workers 8
//	go run ./scripts/batchspread -policy least_loaded -level 213 -workers 8
//	go run ./scripts/batchspread -in-flight -policy dynamo -level 170 -workers 3 -measure 5m
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kvlens/kvlens/calibrate"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
)

func main() {
	policy := flag.String("policy", "kv", "routing policy")
	workload := flag.String("workload", "chat", "workload of the suite")
	level := flag.Int("level", 213, "conversations")
	workers := flag.Int("workers", 8, "simulated workers")
	seeds := flag.Int("seeds", 3, "seeds 1 to this")
	warmup := flag.Duration("warmup", time.Minute, "time before sampling")
	measure := flag.Duration("measure", 2*time.Minute, "time sampled")
	inFlight := flag.Bool("in-flight", false, "count requests in flight (running and queued), under the calibration's load")
	flag.Parse()

	w, err := loadgen.LookupWorkload(*workload)
	if err != nil {
		fail("%v", err)
	}
	prof := sim.MustProfile("h200-llama3.1-70b-fp8-tp1")
	load := loadgen.DefaultConfig()
	w.Apply(&load)
	load.Concurrency = *level
	load.MaxContext = prof.MaxModelLen
	cfg := router.Config{Admission: router.AdmitQueue}
	if *inFlight {
		// The calibration's deployment: its chat in step, its router.
		d := calibrate.Config{Profile: prof, Workers: *workers}.Deployment(1)
		load, cfg = d.Load, d.Router
		load.Concurrency = *level
		load.MaxContext = prof.MaxModelLen
	}
	what := "batch"
	if *inFlight {
		what = "in flight"
	}
	over, samples := 0, 0
	spread := map[int]int{}
	var all []int
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(*seeds); seed++ {
		p, err := simulate.New(simulate.Config{Profile: prof, Workers: *workers, Policy: *policy,
			Router: cfg, Load: load, Seed: seed})
		if err != nil {
			fail("%v", err)
		}
		p.Gen.Start()
		if err := p.Loop.Sleep(ctx, *warmup); err != nil {
			fail("%v", err)
		}
		scrapeSpread, scrapeBusiest := 0, 0
		for t := time.Duration(0); t < *measure; t += 500 * time.Millisecond {
			if err := p.Loop.Sleep(ctx, 500*time.Millisecond); err != nil {
				fail("%v", err)
			}
			var batch []int
			for _, st := range p.Engines() {
				n := st.Running
				if *inFlight {
					n += st.Waiting
				}
				batch = append(batch, n)
				samples++
				if st.Running > 32 {
					over++
				}
			}
			d := slices.Max(batch) - slices.Min(batch)
			spread[d]++
			all = append(all, d)
			if t%(15*time.Second) == 0 {
				scrapeSpread, scrapeBusiest = max(scrapeSpread, d), max(scrapeBusiest, slices.Max(batch))
			}
		}
		p.Close()
		if *inFlight {
			fmt.Printf("seed %d, every 15 s: largest minus smallest in flight at most %d; busiest worker %d\n", seed, scrapeSpread, scrapeBusiest)
		}
	}
	slices.Sort(all)
	fmt.Printf("%s, %s at %d on %d workers, seeds 1-%d: %.1f%% of batches above 32; largest minus smallest %s: median %d, 90th percentile %d, 99th %d\n",
		*policy, *workload, *level, *workers, *seeds, 100*float64(over)/float64(samples), what, all[len(all)/2], all[len(all)*9/10], all[len(all)*99/100])
	fmt.Printf("largest minus smallest %s (samples):", what)
	keys := make([]int, 0, len(spread))
	for k := range spread {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Printf(" %d (%d)", k, spread[k])
	}
	fmt.Println()
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "batchspread: "+format+"\n", a...)
	os.Exit(1)
}
