package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
	"github.com/kvlens/kvlens/store"
)

// exitCode runs cmd and returns its combined output and exit status.
func exitCode(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err == nil {
		return string(out), 0
	}
	exit, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("run: %v", err)
	}
	return string(out), exit.ExitCode()
}

const dualJSON = `{"levels":[{"concurrency":40,
 "round_robin":{"ttft_p50_ms":271.4,"ttft_p95_ms":677.7,"kv_hit_rate_pct":99.7,"tops":1591.052529,"tpot_p50_ms":25.3,"tpot_p95_ms":27.6,"latency_p50_ms":21807.7,"latency_p95_ms":28451.8},
 "kv_aware":{"ttft_p50_ms":222.7,"ttft_p95_ms":370.9,"kv_hit_rate_pct":100.0,"tops":1615.820497,"tpot_p50_ms":24.4,"tpot_p95_ms":25.5,"latency_p50_ms":19906.5,"latency_p95_ms":25662.1}}]}`

func TestBaselinesCommands(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "kvlens.db")
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(dualJSON), 0o644)
	os.WriteFile(bad, []byte(strings.Replace(dualJSON, `"ttft_p95_ms":370.9`, `"ttft_p95_ms":-1`, 1)), 0o644)
	unknownMode := filepath.Join(dir, "unknown-mode.json")
	os.WriteFile(unknownMode, []byte(strings.Replace(dualJSON, `"kv_aware"`, `"kv_awear"`, 1)), 0o644)

	steps := []struct {
		name     string
		args     []string
		wantExit int
		want     string // in the output
	}{
		{"list shows the three built-in sets on first run", []string{"list"}, 0, "KV 160–200"},
		{"import stores a seed reference file", []string{"import", good, "--name", "lab"}, 0, `imported "lab": 2 levels of round_robin and kv, from dual format`},
		{"import refuses a name already taken", []string{"import", good, "--name", "lab"}, 1, "--replace"},
		{"import of a bad file names the field", []string{"import", bad, "--name", "broken"}, 1, "levels[0].kv_aware.ttft_p95_ms: must be a number from 0 to 1,000,000,000"},
		{"the bad file left nothing behind", []string{"show", "broken"}, 1, `baseline set "broken": not found`},
		{"import refuses an unknown mode and lists the known ones", []string{"import", unknownMode, "--name", "typo"}, 1, `"kv_awear" is not a known routing mode (known: round_robin, random,`},
		{"the refused file left nothing behind", []string{"show", "typo"}, 1, `baseline set "typo": not found`},
		{"import keeps an external router's modes with --any-mode", []string{"import", unknownMode, "--name", "external", "--any-mode"}, 0, `2 levels of round_robin and kv_awear`},
		{"show prints each mode's curve", []string{"show", "lab"}, 0, "KV cache-aware (kv): within the SLO up to 40"},
		{"show refuses an objective of zero, which would admit every level", []string{"show", "lab", "--slo-ttft", "0"}, 2, "--slo-ttft 0s and --slo-tpot 60ms: both must be positive"},
		{"export writes the dual format", []string{"export", "lab", "--format", "dual"}, 0, `"kv_aware": {`},
		{"export refuses the single format for two modes", []string{"export", "lab", "--format", "single"}, 1, "holds one mode"},
		{"export refuses an unknown format", []string{"export", "lab", "--format", "csv"}, 2, `unknown format "csv"`},
		// It was "open /proc/kvlens/lab.json: no such file or directory", status 1.
		{"export to a file it cannot write names -o", []string{"export", "lab", "-o", "/proc/kvlens/lab.json"}, 2, "kvlens baselines export: -o: cannot write /proc/kvlens/lab.json"},
		{"export to a directory names -o", []string{"export", "lab", "-o", dir}, 2, "-o: cannot write " + dir + ": is a directory"},
		{"delete removes a set", []string{"delete", "lab"}, 0, `deleted "lab"`},
		{"a deleted set is gone", []string{"delete", "lab"}, 1, "not found"},
		{"a missing argument is a usage error", []string{"show"}, 2, "missing the set's NAME"},
		{"a stray argument is a usage error", []string{"list", "extra"}, 2, `unexpected argument "extra"`},
		{"an unknown subcommand is a usage error", []string{"frob"}, 2, `unknown command "frob"`},
		{"an unknown flag is a usage error", []string{"list", "--nope"}, 2, "flag provided but not defined"},
		{"a file that does not exist is a failure", []string{"import", filepath.Join(dir, "none.json")}, 1, "no such file"},
		// A file of another kind is named as what it is, where it was picked
		// apart field by field: "engine: unknown field".
		{"a bench report is named as one", []string{"import", "../../docs/routing-bench.json"}, 1, "routing-bench.json is a report of kvlens bench routing (kvlens bench routing --from draws it), not a baseline set"},
		{"an engine profile is named as one", []string{"import", "../../docs/h200-candidate.json"}, 1, "h200-candidate.json is an engine profile (--sim-profile reads it), not a baseline set"},
		// /dev/zero never ends: it was read whole, until the process died.
		{"a file that never ends is refused past the size limit", []string{"import", "/dev/zero"}, 1, "/dev/zero is longer than 16 MiB"},
		// baselines export wrote a set stored so, and import then refused
		// the file: "deployment: is longer than 4096 bytes".
		{"a deployment longer than a set's file holds is a usage error", []string{"import", good, "--name", "long", "--deployment", strings.Repeat("x", 4097)}, 2, "--deployment is 4097 bytes long: at most 4096"},
		{"the refused deployment left nothing behind", []string{"show", "long"}, 1, `baseline set "long": not found`},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			out, code := exitCode(t, kvlens(append(append([]string{"baselines"}, s.args...), "--db", db)...))
			if code != s.wantExit || !strings.Contains(out, s.want) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, out, s.wantExit, s.want)
			}
			if code != 0 {
				if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, s.want) && s.wantExit == 1 {
					t.Fatalf("the error is not on the first line:\n%s", out)
				}
			}
		})
	}
}

func TestSweepRefusesBadFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "kvlens.db")
	tests := []struct {
		name     string
		args     []string
		wantExit int
		want     string
	}{
		{"an unknown mode", []string{"--modes", "rr,nonsense"}, 2, `unknown routing policy "nonsense"`},
		{"a level that is not a number", []string{"--levels", "40,lots"}, 2, `--levels: "lots" is not a number, a range like 1-5`},
		{"a range that runs downward", []string{"--levels", "120-40"}, 2, `--levels: "120-40": want numbers from 1 to 10000, low to high`},
		{"a level given twice", []string{"--levels", "40,60,40"}, 2, "--levels: 40 is given twice"},
		{"a mode given twice through its alias", []string{"--modes", "rr,round_robin"}, 2, "round_robin is given twice"},
		{"a switch command without an external target", []string{"--mode-switch-cmd", "true"}, 2, "give its --target too"},
		{"two modes on an external router with no way to switch", []string{"--target", "http://127.0.0.1:1/v1", "--modes", "rr,kv"}, 2, "give --mode-switch-cmd"},
		{"zero snapshots", []string{"--snapshots", "0"}, 2, "snapshots 0"},
		{"--run without --resume", []string{"--run", "3"}, 2, "--run goes with --resume"},
		{"--resume with nothing to resume", []string{"--resume"}, 1, "no unfinished sweep run"},
		{"--virtual against an external router", []string{"--virtual", "--target", "http://127.0.0.1:1/v1", "--modes", "rr"}, 2, "--virtual simulates kvlens's own router"},
		{"a target that is not a URL", []string{"--target", "frontend:8000/v1", "--modes", "rr"}, 2, `--target "frontend:8000/v1": want the OpenAI base URL`},
		{"an unknown admission", []string{"--admission", "maybe"}, 2, `--admission "maybe"`},
		{"an unknown engine profile", []string{"--sim-profile", "tpu-v9"}, 2, "tpu-v9"},
		{"a negative think time names its flag", []string{"--virtual", "--think-time", "-5s"}, 2, "--think-time must not be negative, got -5s"},
		{"answers of no tokens name their flag", []string{"--virtual", "--max-tokens", "0"}, 2, "--max-tokens must be at least 1, got 0"},
		{"an objective of zero", []string{"--virtual", "--slo-tpot", "0"}, 2, "--slo-ttft 600ms and --slo-tpot 0s: both must be positive"},
		{"a name of blanks", []string{"--virtual", "--name", "  "}, 2, "name: is blank"},
		// refused before any load, not after the run has been measured
		{"reports with nowhere to go", []string{"--virtual", "--levels", "10", "--modes", "rr", "--out", "/proc/kvlens-reports"}, 2, "--out: cannot write into /proc/kvlens-reports"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := exitCode(t, kvlens(append([]string{"sweep", "--db", db}, tt.args...)...))
			if code != tt.wantExit {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tt.wantExit, out)
			}
			if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, tt.want) {
				t.Fatalf("first line %q does not say %q", first, tt.want)
			}
		})
	}
}

// TestSweepInterruptedThenResumed runs a tiny sweep against the simulated
// fleet, stops it after its first level is stored (politely with SIGINT, or
// with SIGKILL), resumes it, and checks the stored set and the report files.
func TestSweepInterruptedThenResumed(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel() // each sweep mostly waits out its levels' 3 s
			dir := t.TempDir()
			db := filepath.Join(dir, "kvlens.db")
			// 3 s of measurement: with max_tokens 4 a turn takes well under a
			// second, but a loaded 2-core machine must still finish one per level.
			args := []string{"sweep", "--db", db, "--out", dir, "--name", "tiny", "--levels", "2,3,4", "--modes", "rr",
				"--warmup", "200ms", "--measure", "3s", "--snapshots", "2", "--max-tokens", "4", "--target-rps", "0"}

			cmd := kvlens(args...)
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stderr)
			for lines.Scan() && !strings.Contains(lines.Text(), "[2/3]") {
			}
			cmd.Process.Signal(sig) // during the second level's warmup
			var rest strings.Builder
			for lines.Scan() {
				rest.WriteString(lines.Text() + "\n")
			}
			if err := cmd.Wait(); err == nil {
				t.Fatal("the interrupted sweep exited 0")
			}
			if sig == syscall.SIGINT && !strings.Contains(rest.String(), "kvlens sweep: interrupted; 1 of 3 levels are stored: continue with kvlens sweep --resume") {
				t.Fatalf("the interrupted sweep said:\n%s", rest.String())
			}

			out, code := exitCode(t, kvlens("sweep", "--db", db, "--out", dir, "--resume"))
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, out)
			}
			if !strings.Contains(out, "resuming run 1, 1 of 3 levels done") || strings.Contains(out, "[1/3]") {
				t.Fatalf("the resumed sweep did not skip the finished level:\n%s", out)
			}
			show, code := exitCode(t, kvlens("baselines", "show", "tiny", "--db", db))
			if code != 0 || !strings.Contains(show, "source:     kvlens sweep run 1") {
				t.Fatalf("show tiny: exit %d\n%s", code, show)
			}
			for _, lvl := range []string{"\n     2 ", "\n     3 ", "\n     4 "} {
				if !strings.Contains(show, lvl) {
					t.Errorf("the stored set lacks level %s:\n%s", strings.TrimSpace(lvl), show)
				}
			}
			for _, f := range []string{"kvlens-sweep-1.json", "kvlens-sweep-1.md", "kvlens-sweep-1.png"} {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
					t.Errorf("%s: %v", f, err)
				}
			}
		})
	}
}

// TestVirtualSweepWritesTheSameOutputs runs a small sweep in virtual time and
// checks the stored set and the report files, which must say it was
// simulated and with which profile; the same seed gives the same JSON.
// TestAStoreUnderAMissingDirectoryIsATypo: a read of a store whose
// directory does not exist fails, naming it, and creates nothing.
func TestAStoreUnderAMissingDirectoryIsATypo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{{"baselines", "list"}, {"baselines", "show", "x"}, {"recordings", "list"}} {
		out, code := exitCode(t, kvlens(append(args, "--db", filepath.Join(missing, "kvlens.db"))...))
		if code != 1 || !strings.Contains(out, "its directory does not exist") {
			t.Errorf("%v: exit %d, output %q; want exit 1 saying the directory does not exist", args, code, out)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("%s was created (%v)", missing, err)
	}
}

func TestVirtualSweepWritesTheSameOutputs(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "kvlens.db")
	sweep := func(name string, seed string) []byte {
		t.Helper()
		out := filepath.Join(dir, name)
		stdout, code := exitCode(t, kvlens("sweep", "--virtual", "--db", db, "--name", name, "--out", out, "--seed", seed,
			"--levels", "10,20", "--modes", "rr,kv", "--warmup", "20s", "--measure", "40s", "--sim-workers", "2"))
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stdout)
		}
		files, _ := filepath.Glob(filepath.Join(out, "kvlens-sweep-*"))
		if len(files) != 3 {
			t.Fatalf("wrote %v, want JSON, Markdown and PNG", files)
		}
		md, _ := filepath.Glob(filepath.Join(out, "*.md"))
		report, err := os.ReadFile(md[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"| Simulated | yes: virtual time", "h200-llama3.1-70b-fp8-tp1", "2x simulated worker"} {
			if !strings.Contains(string(report), want) {
				t.Errorf("report does not say %q", want)
			}
		}
		js, _ := filepath.Glob(filepath.Join(out, "*.json"))
		data, err := os.ReadFile(js[0])
		if err != nil {
			t.Fatal(err)
		}
		// The generation time is the wall clock's; the figures are not.
		_, levels, _ := strings.Cut(string(data), `"levels"`)
		return []byte(levels)
	}
	a, b := sweep("a", "5"), sweep("b", "5")
	if string(a) != string(b) {
		t.Fatalf("two virtual sweeps with seed 5 differ:\n%s\n%s", a, b)
	}
	out, code := exitCode(t, kvlens("baselines", "list", "--db", db))
	if code != 0 {
		t.Fatalf("stored sets (exit %d):\n%s", code, out)
	}
	stored := map[string]string{} // name -> modes
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			stored[f[0]] = f[1]
		}
	}
	for _, name := range []string{"a", "b"} {
		if stored[name] != "round_robin,kv" {
			t.Errorf("baselines list has no set %q of modes round_robin,kv:\n%s", name, out)
		}
	}
}

func TestPlanRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown policy", []string{"--modes", "rr,fastest"}, `unknown routing policy "fastest"`},
		{"a worker count that is not a number", []string{"--workers", "2,many"}, `--workers: "many" is not a number, a range like 1-5`},
		{"an unknown admission", []string{"--admission", "maybe"}, `--admission "maybe"`},
		{"a stray argument", []string{"now"}, `unexpected argument "now"`},
		{"a start rate that is not a number names its flag", []string{"--target-rps", "NaN"}, "--target-rps must be 0 (start every conversation at once) or a positive rate, got NaN"},
		{"a study of no conversations a worker", []string{"--study", "2", "--study-load", "0"}, "--study-load 0: want 1 to 5000 conversations a worker for 2 workers"},
		{"a study past the most conversations one process drives", []string{"--study", "2,8", "--study-load", "2000"}, "--study-load 2000: want 1 to 1250 conversations a worker for 8 workers"},
		{"a negative warmup names its flag", []string{"--warmup", "-1m"}, "--warmup -1m0s must not be negative and --measure 2m0s must be at least 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := exitCode(t, kvlens(append([]string{"plan"}, tt.args...)...))
			if code != 2 {
				t.Fatalf("exit %d, want 2; output:\n%s", code, out)
			}
			if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, tt.want) {
				t.Fatalf("first line %q does not say %q", first, tt.want)
			}
		})
	}
}

// TestPlanReport draws kvlens plan's report for an answer with every kind
// of row (an envelope of 0, one that failed past its grid, one that never
// failed, a policy that needs more workers than searched), with and
// without each seed's envelope, and compares it with its golden file
// (go test ./cmd/kvlens -run TestPlanReport -update rewrites it).
func TestPlanReport(t *testing.T) {
	hit := 99.1
	res := simulate.PlanResult{
		Capacities: []simulate.Capacity{
			{Policy: "round_robin", Workers: 3, FirstFail: 5, FailSeed: 1, FailWhy: "TTFT p95 827 ms", PerSeed: []int{0, 0, 0}},
			{Policy: "dynamo", Workers: 3, MaxConcurrency: 5, At: baselines.Level{Metrics: baselines.Metrics{TTFTP95: 538, TPOTP95: 31.2}}, FirstFail: 10, FailSeed: 2, FailWhy: "1.5% failed", PerSeed: []int{5, 165, 160}},
			{Policy: "kv", Workers: 3, MaxConcurrency: 180, At: baselines.Level{Metrics: baselines.Metrics{TTFTP95: 582, TPOTP95: 44.9, KVHitRate: &hit}}, PerSeed: []int{180, 185, 180}},
		},
		Needed: map[string]int{"kv": 3},
	}
	for _, perSeed := range []bool{false, true} {
		name := "plan"
		if perSeed {
			name = "plan_per_seed"
		}
		t.Run(name, func(t *testing.T) {
			pc := simulate.PlanConfig{Policies: []string{"round_robin", "dynamo", "kv"}, Step: 5, Seeds: []uint64{1, 2, 3}, PerSeed: perSeed,
				SLO: baselines.DefaultSLO, Warmup: time.Minute, Measure: 2 * time.Minute, Target: 120, MaxWorkers: 8}
			var b strings.Builder
			writePlan(&b, pc, sim.MustProfile(sim.DefaultProfile), "queue", res, false)
			golden(t, name, b.String())
		})
	}
	// Ctrl-C stopped the planner before it searched round-robin's and
	// dynamo's fewest workers: they are not said to need more than 8.
	t.Run("interrupted", func(t *testing.T) {
		pc := simulate.PlanConfig{Policies: []string{"round_robin", "dynamo", "kv"}, Step: 5, Seeds: []uint64{1, 2, 3},
			SLO: baselines.DefaultSLO, Warmup: time.Minute, Measure: 2 * time.Minute, Target: 120, MaxWorkers: 8}
		var b strings.Builder
		writePlan(&b, pc, sim.MustProfile(sim.DefaultProfile), "queue", res, true)
		for _, want := range []string{"round_robin  not searched\n", "dynamo       not searched\n", "kv           3\n"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("report lacks %q:\n%s", want, b.String())
			}
		}
	})
}

// TestStudyReport draws kvlens plan --study's table for two worker counts
// of the three arms, one without a hit rate, and compares it with its
// golden file: the dagger marks only dynamo's shedding rows, and the note
// under the table names the shedding rule.
func TestStudyReport(t *testing.T) {
	hit := func(v float64) *float64 { return &v }
	level := func(p50, p95 float64, kv *float64) baselines.Level {
		return baselines.Level{Metrics: baselines.Metrics{TTFTP50: p50, TTFTP95: p95, KVHitRate: kv}}
	}
	rows := []simulate.StudyRow{
		{Arm: simulate.Arm{Policy: "round_robin", Admission: router.AdmitQueue}, Workers: 2, Concurrency: 80, Level: level(301, 655, hit(85.2)), GoodputPerSec: 2.41},
		{Arm: simulate.Arm{Policy: "dynamo", Admission: router.AdmitShed}, Workers: 2, Concurrency: 80, Level: level(250, 448, hit(96.0)), ShedPct: 0.4, GoodputPerSec: 2.95},
		{Arm: simulate.Arm{Policy: "kv", Admission: router.AdmitShed}, Workers: 2, Concurrency: 80, Level: level(241, 410, nil), GoodputPerSec: 3.02},
		{Arm: simulate.Arm{Policy: "round_robin", Admission: router.AdmitQueue}, Workers: 4, Concurrency: 160, Level: level(330, 701, hit(84.9)), GoodputPerSec: 4.10},
	}
	var b strings.Builder
	writeStudy(&b, rows)
	golden(t, "plan_study", b.String())
}

func TestFreeNamesNeverTakeAnother(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	set := func(name string) {
		s := baselines.Set{Name: name, Levels: []baselines.Level{{Mode: "kv", Concurrency: 1, Metrics: baselines.Metrics{TTFTP50: 1, TTFTP95: 1}}}}
		if _, err := db.SaveSet(ctx, &s, false); err != nil {
			t.Fatal(err)
		}
	}
	set("sweep 2026-11-29 01:44:10")
	set("sweep 2026-11-29 01:44:10 (2)")
	if got := freeSetName(ctx, db, "sweep 2026-11-29 01:44:10"); got != "sweep 2026-11-29 01:44:10 (3)" {
		t.Fatalf("a second sweep in the same second is named %q, want the first free one, (3)", got)
	}
	if got := freeSetName(ctx, db, "lab"); got != "lab" {
		t.Fatalf("a free name became %q", got)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "kvlens-sweep-1.md"), []byte("another store's run 1"), 0o644)
	if got := freeBase(dir, "kvlens-sweep-1", ".json", ".md", ".png"); got != "kvlens-sweep-1-2" {
		t.Fatalf("reports would be written as %q over another run's, want kvlens-sweep-1-2", got)
	}
	if got := freeBase(dir, "kvlens-sweep-2", ".json", ".md", ".png"); got != "kvlens-sweep-2" {
		t.Fatalf("a free base became %q", got)
	}
}

// TestPlanNamesItsDefaultSeeds runs a small plan without --seeds: its
// report names the three seeds the planner probed (from --seed), where it
// used to print "the seeds []".
func TestPlanNamesItsDefaultSeeds(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "plan.png")
	out, code := exitCode(t, kvlens("plan", "--modes", "rr", "--workers", "1", "--per-worker", "5",
		"--warmup", "10s", "--measure", "30s", "--seed", "7", "--out", chart))
	if code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, out)
	}
	if want := "hold under each of the seeds 7, 8, 9\n"; !strings.Contains(out, want) {
		t.Fatalf("report lacks %q:\n%s", want, out)
	}
}
