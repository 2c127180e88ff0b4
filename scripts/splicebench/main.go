// Command splicebench puts the runs of a routing benchmark (kvlens bench
// routing's JSON) in place of the same runs of a larger one: after a change
// to one policy, only that policy's runs need measuring again. A run
// depends only on its policy, workload, level, seed and the grid's settings
// (workers, engine profile, warmup, measurement, SLO), never on what ran
// beside it, so the spliced report is the one a whole new run would write.
// The two grids' settings must match, and every run taken must have a place
// in the larger grid (with -within, runs without one are left out: for a
// report cut from a larger grid). With -add, the runs of a policy the
// larger grid did not run are added to it, as a new column in the default
// policies' order, when they cover its every workload, level and seed. Draw the reports again afterwards with
// `kvlens bench routing --from FILE.json --out FILE`.
//
//	go run ./scripts/splicebench -into docs/routing-bench-full.json -from sglang-full.json
package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"

	"github.com/kvlens/kvlens/bench"
	"github.com/kvlens/kvlens/loadgen"
)

type key struct {
	workload, policy string
	level            int
	seed             uint64
}

func main() {
	into := flag.String("into", "", "the report to splice into (rewritten in place)")
	from := flag.String("from", "", "the report whose runs replace the same runs in -into")
	within := flag.Bool("within", false, "leave out runs of -from that have no place in -into")
	add := flag.Bool("add", false, "add the runs of policies -into did not run, as new columns")
	reproduced := flag.Bool("reproduced", false, "accept engine profiles that differ: runs of -into were checked to come out the same under -from's (a field added to the profile since -into ran, say)")
	flag.Parse()
	if *into == "" || *from == "" {
		fail("both -into and -from are needed")
	}
	dst, src := read(*into), read(*from)
	a, b := dst.Grid, src.Grid
	if a.Workers != b.Workers || a.Measure != b.Measure || a.SLO != b.SLO {
		fail("%s and %s ran different settings (workers, measurement or SLO)", *into, *from)
	}
	if !reflect.DeepEqual(a.Profile, b.Profile) {
		if !*reproduced {
			fail("%s and %s ran different engine profiles (%+v and %+v): with -reproduced if runs of the first come out the same under the second's", *into, *from, a.Profile, b.Profile)
		}
		fmt.Printf("splicebench: the engine profiles differ, taken as reproduced:\n  %+v\n  %+v\n", a.Profile, b.Profile)
	}
	at := map[key]int{}
	for i, r := range dst.Runs {
		at[key{r.Workload, r.Policy, r.Level, r.Seed}] = i
	}
	had := slices.Clone(a.Policies)
	n := 0
	if *add {
		n = addPolicies(dst, src)
	}
	for _, r := range src.Runs {
		if *add && !slices.Contains(had, r.Policy) {
			continue
		}
		i, ok := at[key{r.Workload, r.Policy, r.Level, r.Seed}]
		if !ok && *within {
			continue
		}
		if !ok {
			fail("%s has no run of %s on %s at %d, seed %d", *into, r.Policy, r.Workload, r.Level, r.Seed)
		}
		if old := dst.Runs[i]; old.WarmupSec != r.WarmupSec {
			fail("%s on %s: warmup %g s in %s, %g s in %s", r.Policy, r.Workload, old.WarmupSec, *into, r.WarmupSec, *from)
		}
		dst.Runs[i] = r
		n++
	}
	f, err := os.Create(*into)
	if err != nil {
		fail("%v", err)
	}
	if err := bench.WriteJSON(f, dst); err != nil {
		fail("%v", err)
	}
	if err := f.Close(); err != nil {
		fail("%v", err)
	}
	fmt.Printf("splicebench: %d runs of %s put in %s\n", n, *from, *into)
}

// addPolicies appends to dst the runs of src's policies that dst did not
// run, and those policies to its columns, failing unless they cover dst's
// every workload, level and seed. It returns how many runs it added.
func addPolicies(dst, src *bench.Result) int {
	g := &dst.Grid
	var added []bench.Run
	for _, p := range src.Grid.Policies {
		if slices.Contains(g.Policies, p) {
			continue
		}
		have := map[key]bool{}
		for _, r := range src.Runs {
			if r.Policy == p {
				have[key{r.Workload, r.Policy, r.Level, r.Seed}] = true
			}
		}
		for _, w := range g.Workloads {
			for _, l := range g.Levels {
				for _, seed := range g.Seeds {
					if !have[key{w.Name, p, l, seed}] {
						fail("%s has no run on %s at %d, seed %d, which the larger grid runs", p, w.Name, l, seed)
					}
				}
			}
		}
		for _, r := range src.Runs {
			if r.Policy == p && slices.Contains(g.Seeds, r.Seed) && slices.Contains(g.Levels, r.Level) &&
				slices.ContainsFunc(g.Workloads, func(w loadgen.Workload) bool { return w.Name == r.Workload }) {
				added = append(added, r)
			}
		}
		g.Policies = append(g.Policies, p)
	}
	dst.Runs = append(dst.Runs, added...)
	// The columns in the default order, as a new run of the grid would
	// have them, when every policy is a default one.
	if !slices.ContainsFunc(g.Policies, func(p string) bool { return !slices.Contains(bench.DefaultPolicies, p) }) {
		slices.SortStableFunc(g.Policies, func(x, y string) int {
			return slices.Index(bench.DefaultPolicies, x) - slices.Index(bench.DefaultPolicies, y)
		})
	}
	// Back in the grid's order: workload, level, policy, seed.
	pos := func(r bench.Run) [4]int {
		w := slices.IndexFunc(g.Workloads, func(w loadgen.Workload) bool { return w.Name == r.Workload })
		return [4]int{w, slices.Index(g.Levels, r.Level), slices.Index(g.Policies, r.Policy), slices.Index(g.Seeds, r.Seed)}
	}
	slices.SortStableFunc(dst.Runs, func(x, y bench.Run) int {
		px, py := pos(x), pos(y)
		return slices.Compare(px[:], py[:])
	})
	return len(added)
}

func read(name string) *bench.Result {
	f, err := os.Open(name)
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	r, err := bench.ReadJSON(f)
	if err != nil {
		fail("%s: %v", name, err)
	}
	return r
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "splicebench: "+format+"\n", a...)
	os.Exit(1)
}
