package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/bench"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
)

// planCmd is `kvlens plan`: capacity planning on the virtual-time pipeline.
func planCmd(args []string) int {
	var (
		modes, workers, profile, admission, out, seeds string
		pc                                             = simulate.PlanConfig{SLO: baselines.DefaultSLO}
		load                                           = loadgen.DefaultConfig()
	)
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.StringVar(&modes, "modes", "rr,dynamo,kv", "comma-separated routing policies to plan for (rr = round_robin)")
	fs.StringVar(&workers, "workers", "1,2,3,4,6,8", "comma-separated worker counts to find the highest concurrency for")
	fs.IntVar(&pc.Target, "target", 0, "a concurrency to find the fewest workers for (0: skip)")
	fs.IntVar(&pc.MaxWorkers, "max-workers", 64, "largest worker count tried for --target")
	fs.IntVar(&pc.PerWorker, "per-worker", 100, "highest concurrency searched, per worker")
	fs.IntVar(&pc.Step, "step", simulate.DefaultPlanStep, "grid of the envelope, in conversations: every level from step up is probed until one fails (at most 5)")
	fs.StringVar(&seeds, "seeds", "", "seeds every level is probed with, a list or a range such as 1-3 (at least 3; default: --seed and the two after it); a level holds only under every one")
	fs.IntVar(&pc.Parallel, "parallel", 2, "probes simulated at once")
	fs.BoolVar(&pc.PerSeed, "per-seed", false, "also give each seed's own envelope, walking on past the first failure under the seeds that still hold (slower)")
	fs.StringVar(&profile, "sim-profile", sim.DefaultProfile, "engine profile of the simulated workers: a built-in name or a JSON file")
	fs.StringVar(&admission, "admission", router.AdmitQueue, "router admission: queue (never shed), or shed. "+router.ShedRule)
	fs.DurationVar(&pc.SLO.TTFT, "slo-ttft", baselines.DefaultSLO.TTFT, "TTFT p95 objective")
	fs.DurationVar(&pc.SLO.TPOT, "slo-tpot", baselines.DefaultSLO.TPOT, "TPOT p95 objective")
	fs.DurationVar(&pc.Warmup, "warmup", 60*time.Second, "virtual warmup of each probed level")
	fs.DurationVar(&pc.Measure, "measure", 120*time.Second, "virtual measurement of each probed level")
	fs.IntVar(&load.MaxTokens, "max-tokens", load.MaxTokens, "max_tokens of every request")
	fs.Float64Var(&load.StartRate, "target-rps", load.StartRate, "conversations started per second while ramping up")
	fs.Uint64Var(&load.Seed, "seed", load.Seed, "seed of the simulation")
	fs.StringVar(&out, "out", "kvlens-plan.png", "path of the chart (PNG)")
	var study string
	var perWorkerLoad int
	fs.StringVar(&study, "study", "", "instead of planning, run a scaling study at these comma-separated worker counts: round_robin (queue) against dynamo and kv (both with kvlens's shed admission, which Dynamo 0.9 itself never applies in KV mode), printed as a Markdown table")
	fs.IntVar(&perWorkerLoad, "study-load", 40, "with --study, conversations per worker")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: kvlens plan [flags]

Plans capacity in virtual time: for each policy and worker count, finds the
highest concurrency whose level holds the SLOs (TTFT p95 and TPOT p95 within
them, and no failed or shed request), and with --target, the fewest workers
holding them at that concurrency. Each probe is a sweep level simulated on a
fresh deployment.

Flags:
`)
		fs.PrintDefaults()
	}
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	usage := func(err error) int {
		fmt.Fprintf(os.Stderr, "kvlens plan: %v\n", err)
		return 2
	}
	given := givenFlags(fs)
	var err error
	if pc.Policies, err = parseModes(modes, false); err != nil {
		return usage(fmt.Errorf("--modes: %w", err))
	}
	if pc.Workers, err = bench.ParseList(workers, 1, sim.MaxWorkers); err != nil {
		return usage(fmt.Errorf("--workers: %w", err))
	}
	switch {
	case pc.Parallel < 1:
		return usage(fmt.Errorf("--parallel %d: need at least 1", pc.Parallel))
	case pc.MaxWorkers < 1 || pc.MaxWorkers > sim.MaxWorkers:
		return usage(fmt.Errorf("--max-workers %d: want 1 to %d", pc.MaxWorkers, sim.MaxWorkers))
	case pc.Target < 0 || pc.Target > loadgen.MaxConcurrency:
		// One past the most conversations ran the whole envelope search
		// before the first probe at the target failed.
		return usage(fmt.Errorf("--target %d: want a concurrency up to %d, or 0 to skip", pc.Target, loadgen.MaxConcurrency))
	case given["seeds"] && strings.TrimSpace(seeds) == "":
		// Empty, as from an unset variable, it planned with the default
		// seeds.
		return usage(errors.New("--seeds: no value given"))
	}
	if err := pc.SLO.Check(); err != nil {
		// It failed at the first probe, as the load generator's error.
		return usage(err)
	}
	if given["study"] {
		for _, f := range []string{"modes", "seeds", "out", "target", "per-seed", "max-workers", "per-worker", "step", "workers"} {
			if given[f] {
				return usage(fmt.Errorf("--study runs its own three arms at its own worker counts: drop --%s", f))
			}
		}
	}
	prof, err := loadProfile(profile)
	if err != nil {
		return usage(fmt.Errorf("--sim-profile: %w", err))
	}
	if err := checkSimTokens(load.MaxTokens, prof); err != nil {
		return usage(err)
	}
	if admission != router.AdmitQueue && admission != router.AdmitShed {
		return usage(fmt.Errorf("--admission %q: want %s or %s", admission, router.AdmitQueue, router.AdmitShed))
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if seeds != "" {
		ss, err := bench.ParseList(seeds, 0, 1<<31)
		if err != nil {
			return usage(fmt.Errorf("--seeds: %w", err))
		}
		for _, v := range ss {
			pc.Seeds = append(pc.Seeds, uint64(v))
		}
	}
	if err := checkLoad(load); err != nil {
		return usage(err)
	}
	if pc.Warmup < 0 || pc.Measure < time.Second {
		// Under a second no request finishes: --measure 1ns failed at the
		// first probe, and --study printed a table of zeros.
		return usage(fmt.Errorf("--warmup %v must not be negative and --measure %v must be at least 1s", pc.Warmup, pc.Measure))
	}
	if pc.PerWorker < 1 || pc.PerWorker > loadgen.MaxConcurrency {
		return usage(fmt.Errorf("--per-worker %d: want 1 to %d conversations a worker", pc.PerWorker, loadgen.MaxConcurrency))
	}
	if pc.Step < 1 || pc.Step > simulate.DefaultPlanStep {
		return usage(fmt.Errorf("--step %d: want 1 to %d conversations", pc.Step, simulate.DefaultPlanStep))
	}
	if pc.Seeds != nil && len(pc.Seeds) < simulate.MinPlanSeeds {
		return usage(fmt.Errorf("--seeds %s: an envelope needs at least %d seeds", seeds, simulate.MinPlanSeeds))
	}
	pc.Base = simulate.Config{Profile: prof, Load: load, Seed: load.Seed, Router: router.Config{Admission: admission}}
	if pc.Seeds == nil {
		// Resolved here rather than left to the planner, so that the
		// report names the seeds it was probed with.
		pc.Seeds = simulate.DefaultSeeds(load.Seed)
	}
	if given["study"] {
		return studyCmd(pc, study, perWorkerLoad)
	}
	if err := writable(out); err != nil {
		return usage(fmt.Errorf("--out: %w", err))
	}
	pc.OnProbe = func(p simulate.Probe) {
		verdict := "fails"
		if p.Holds {
			verdict = "holds"
		}
		fmt.Fprintf(os.Stderr, "kvlens plan: %s, %d workers, concurrency %d, seed %d: TTFT p95 %.0f ms, TPOT p95 %.1f ms, errors %.1f%%: %s\n",
			p.Policy, p.Workers, p.Concurrency, p.Seed, p.Level.TTFTP95, p.Level.TPOTP95, deref(p.Level.ErrorPct), verdict)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := simulate.Plan(ctx, pc)
	status, interrupted := 0, false
	if err != nil {
		if ctx.Err() == nil || len(res.Capacities) == 0 {
			fmt.Fprintf(os.Stderr, "kvlens plan: %v\n", err)
			return 1
		}
		// Ctrl-C: the envelopes found so far are kept, printed and
		// charted, rather than thrown away with the rest.
		stop()
		fmt.Fprintf(os.Stderr, "kvlens plan: interrupted after %d of %d envelopes: these are the ones found\n",
			len(res.Capacities), len(pc.Policies)*len(pc.Workers))
		status, interrupted = 1, true
	}
	writePlan(stdout, pc, prof, admission, res, interrupted)
	fmt.Fprintf(stdout, "\nsimulated in %s of wall time\n", time.Since(start).Round(100*time.Millisecond))
	if len(res.Capacities) > 0 {
		f, err := os.Create(out)
		if err == nil {
			title := fmt.Sprintf("Capacity at TTFT p95 ≤ %d ms, TPOT p95 ≤ %d ms — %s (simulated)", pc.SLO.TTFT.Milliseconds(), pc.SLO.TPOT.Milliseconds(), prof.Name)
			err = errors.Join(simulate.WritePlanChart(f, res, title), f.Close())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "kvlens plan: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", out)
	}
	return status
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// writePlan prints the planner's answer as tables; interrupted says that
// the planner stopped early, so that a policy it has no worker count for
// was not searched rather than needing more than --max-workers.
func writePlan(w io.Writer, pc simulate.PlanConfig, prof sim.Profile, admission string, res simulate.PlanResult, interrupted bool) {
	fmt.Fprintf(w, "Capacity plan, simulated in virtual time: profile %s (max batch %d, %d KV blocks), admission %s\n",
		prof.Name, prof.MaxBatchSize, prof.KVBlocks, admission)
	fmt.Fprintf(w, "SLO: TTFT p95 ≤ %v, TPOT p95 ≤ %v, no failed or shed request; each probe %v warmup + %v measure\n",
		pc.SLO.TTFT, pc.SLO.TPOT, pc.Warmup, pc.Measure)
	fmt.Fprintf(w, "Envelope: the highest level on a grid of %d conversations such that it and every level below it hold under each of the seeds %s\n",
		pc.Step, seedList(pc.Seeds))
	fmt.Fprintf(w, "At the envelope, TTFT and TPOT p95 are the highest of the seeds', the KV hit rate the lowest\n\n")
	if len(res.Capacities) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "policy\tworkers\tenvelope\tper worker\tTTFT p95 ms\tTPOT p95 ms\tKV hit %\tfirst failure\t"
		if pc.PerSeed {
			head += "per seed\t"
		}
		fmt.Fprintln(tw, head)
		for _, c := range res.Capacities {
			fail := "none, to the search's end"
			if c.FirstFail > 0 {
				fail = fmt.Sprintf("%d (seed %d: %s)", c.FirstFail, c.FailSeed, c.FailWhy)
			}
			ttft, tpot, hit := "-", "-", "-" // an envelope of 0 has no level to describe
			if c.MaxConcurrency > 0 {
				ttft, tpot, hit = fmt.Sprintf("%.0f", c.At.TTFTP95), fmt.Sprintf("%.1f", c.At.TPOTP95), opt(c.At.KVHitRate, "%.1f")
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t", c.Policy, c.Workers, c.MaxConcurrency,
				float64(c.MaxConcurrency)/float64(c.Workers), ttft, tpot, hit, fail)
			if pc.PerSeed {
				each := make([]string, len(c.PerSeed))
				for i, n := range c.PerSeed {
					each[i] = strconv.Itoa(n)
				}
				fmt.Fprintf(tw, "%s\t", strings.Join(each, ", "))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if pc.Target > 0 {
		fmt.Fprintf(w, "\nWorkers needed for %d concurrent conversations:\n", pc.Target)
		for _, pol := range pc.Policies {
			n, found := res.Needed[pol]
			switch {
			case !found && interrupted:
				fmt.Fprintf(w, "  %-12s not searched\n", pol)
			case n > 0:
				fmt.Fprintf(w, "  %-12s %d\n", pol, n)
			default:
				fmt.Fprintf(w, "  %-12s more than %d\n", pol, pc.MaxWorkers)
			}
		}
	}
}

// seedList names seeds as "1, 2, 3".
func seedList(seeds []uint64) string {
	each := make([]string, len(seeds))
	for i, s := range seeds {
		each[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(each, ", ")
}

// studyCmd runs `kvlens plan --study`.
func studyCmd(pc simulate.PlanConfig, list string, perWorker int) int {
	workers, err := bench.ParseList(list, 1, sim.MaxWorkers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens plan: --study: %v\n", err)
		return 2
	}
	for _, n := range workers {
		if perWorker < 1 || perWorker*n > loadgen.MaxConcurrency {
			fmt.Fprintf(os.Stderr, "kvlens plan: --study-load %d: want 1 to %d conversations a worker for %d workers\n", perWorker, loadgen.MaxConcurrency/n, n)
			return 2
		}
	}
	arms := []simulate.Arm{{Policy: "round_robin", Admission: router.AdmitQueue}, {Policy: "dynamo", Admission: router.AdmitShed}, {Policy: "kv", Admission: router.AdmitShed}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	// One worker count at a time, so that each row set is reported as it
	// ends and Ctrl-C keeps the rows finished: the study printed nothing
	// until its end, and Ctrl-C lost it all.
	var rows []simulate.StudyRow
	for i, n := range workers {
		got, err := simulate.Study(ctx, pc.Base, arms, []int{n}, perWorker, pc.SLO, pc.Warmup, pc.Measure)
		rows = append(rows, got...)
		if err != nil {
			if ctx.Err() == nil || len(rows) == 0 {
				fmt.Fprintf(os.Stderr, "kvlens plan: %v\n", err)
				return 1
			}
			stop()
			fmt.Fprintf(os.Stderr, "kvlens plan: interrupted after %d of %d rows: these are the ones finished\n", len(rows), len(workers)*len(arms))
			writeStudy(stdout, rows)
			return 1
		}
		fmt.Fprintf(os.Stderr, "kvlens plan: --study: %d workers done (%d of %d worker counts)\n", n, i+1, len(workers))
	}
	writeStudy(stdout, rows)
	fmt.Fprintf(stdout, "\nsimulated in %s of wall time\n", time.Since(start).Round(100*time.Millisecond))
	return 0
}

// writeStudy prints a scaling study's rows as a Markdown table, with a
// dagger on every dynamo row that sheds, which Dynamo 0.9 never does.
func writeStudy(w io.Writer, rows []simulate.StudyRow) {
	fmt.Fprintf(w, "| N | policy (admission) | concurrency | TTFT p50 ms | TTFT p95 ms | shed %% | goodput req/s | KV hit %% |\n")
	fmt.Fprintf(w, "|--:|:--|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		admission := r.Admission
		if r.Policy == "dynamo" && admission == router.AdmitShed {
			admission += "†"
		}
		fmt.Fprintf(w, "| %d | %s (%s) | %d | %.0f | %.0f | %.1f | %.2f | %s |\n", r.Workers, r.Policy, admission, r.Concurrency,
			r.Level.TTFTP50, r.Level.TTFTP95, r.ShedPct, r.GoodputPerSec, opt(r.Level.KVHitRate, "%.1f"))
	}
	// ShedRule ends by saying that Dynamo 0.9 never sheds in KV mode.
	fmt.Fprintf(w, "\n† Dynamo 0.9's cost under kvlens's admission: %s.\n", router.ShedRule)
}
