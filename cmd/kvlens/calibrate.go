package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/bench"
	"github.com/kvlens/kvlens/calibrate"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

const calibrateUsage = `Usage: kvlens sim calibrate [flags]

Sweeps round_robin and dynamo in virtual time, once per seed, averages each
level over the seeds, and prints a Markdown table of TTFT p50 and p95, TPOT
p50 and output tok/s beside the seeds' averaged hardware curves (dynamo is
held against their kv column, Dynamo 0.9's KV router), marking the cells
more than 10% apart. Progress goes to stderr.

Flags:
`

// simCalibrate is `kvlens sim calibrate`.
func simCalibrate(args []string) int {
	var levels, modes, seeds, profile, out string
	c := calibrate.Config{Workers: 3}
	fs := flag.NewFlagSet("sim calibrate", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.StringVar(&levels, "levels", "60-180/20", "concurrency levels: a list, a range 60-180 or a range with a step 60-180/20; each must be in the seeds' set")
	fs.StringVar(&modes, "modes", "rr,dynamo", "simulated policies, each held against the seeds' column for it (round_robin, dynamo or kv against kv)")
	fs.StringVar(&seeds, "seeds", "1-3", "seeds to sweep with, averaged: a list or a range")
	fs.StringVar(&profile, "sim-profile", sim.DefaultProfile, "engine profile: a built-in name or a JSON file whose fields override the default profile's")
	fs.IntVar(&c.Workers, "workers", c.Workers, "simulated workers")
	fs.DurationVar(&c.Warmup, "warmup", 60*time.Second, "virtual warmup of each level")
	fs.DurationVar(&c.Measure, "measure", 300*time.Second, "virtual measurement of each level")
	fs.IntVar(&c.Parallel, "parallel", runtime.NumCPU(), "seeds swept at once")
	fs.Var(&c.Turns, "turns", "turns per conversation: a count, a range like 3-5 or weights like 3:1,5:2 (default: kvlens's chat, 5, as the original demo's code ran the seeds' baselines)")
	fs.BoolVar(&c.Staggered, "staggered", false, "start the conversations each level starts at once part-way through, as kvlens's own load does, instead of in step, every one from its first turn, as the original demo's generator did when it measured the seeds' baselines")
	fs.StringVar(&out, "out", "", "write the table to this file instead of stdout")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), calibrateUsage)
		fs.PrintDefaults()
	}
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	usage := func(err error) int {
		fmt.Fprintf(os.Stderr, "kvlens sim calibrate: %v\n", err)
		return 2
	}
	var err error
	if c.Levels, err = bench.ParseList(levels, 1, loadgen.MaxConcurrency); err != nil {
		return usage(fmt.Errorf("--levels: %w", err))
	}
	if c.Modes, err = parseModes(modes, false); err != nil {
		return usage(fmt.Errorf("--modes: %w", err))
	}
	ss, err := bench.ParseList(seeds, 0, 1<<31)
	if err != nil {
		return usage(fmt.Errorf("--seeds: %w", err))
	}
	for _, s := range ss {
		c.Seeds = append(c.Seeds, uint64(s))
	}
	if c.Profile, err = loadProfile(profile); err != nil {
		return usage(fmt.Errorf("--sim-profile: %w", err))
	}
	if err := checkMeasure(c.Measure); err != nil {
		return usage(err)
	}
	sets, err := baselines.Builtin()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim calibrate: %v\n", err)
		return 1
	}
	c.Reference = &sets[0]
	if err := c.Check(); err != nil {
		return usage(errors.New(strings.TrimPrefix(err.Error(), "calibrate: ")))
	}
	if out != "" {
		if err := writable(out); err != nil {
			return usage(fmt.Errorf("--out: %w", err))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var last calibrate.Progress
	rep, err := calibrate.Run(ctx, c, func(p calibrate.Progress) {
		last = p
		fmt.Fprintf(os.Stderr, "kvlens sim calibrate: [%d/%d] seed %d: %s @ %d measured\n", p.Done, p.Total, p.Seed, p.Step.Mode, p.Step.Concurrency)
	})
	if err != nil && ctx.Err() != nil {
		// Said as "calibrate: seed 1: context canceled", of whichever seed
		// came first, it read as that seed's failure.
		fmt.Fprintf(os.Stderr, "kvlens sim calibrate: interrupted after %d of %d levels: the table averages every level over all the seeds, so none is written\n", last.Done, len(c.Seeds)*len(c.Levels)*len(c.Modes))
		return 1
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim calibrate: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "kvlens sim calibrate: done in %s of wall time\n", time.Since(start).Round(time.Second))
	rep.Command = strings.TrimSpace("kvlens sim calibrate " + shellWords(args))
	if out == "" {
		if err := rep.WriteMarkdown(stdout); err != nil && !isStdoutError(err) {
			fmt.Fprintf(os.Stderr, "kvlens sim calibrate: %v\n", err)
			return 1
		}
		return 0 // main reports a failed write to standard output
	}
	f, err := os.Create(out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim calibrate: %v\n", err)
		return 1
	}
	if err := errors.Join(rep.WriteMarkdown(f), f.Close()); err != nil {
		fmt.Fprintf(os.Stderr, "kvlens sim calibrate: %v\n", err)
		return 1
	}
	return 0
}
