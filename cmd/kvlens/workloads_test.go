package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

func TestWorkloadFlagSetsTheLoadAndGivenFlagsWin(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(loadgen.Config) bool
		want  string
	}{
		{"no workload keeps the seeds' chat", nil,
			func(c loadgen.Config) bool {
				return c.Turns.String() == "5" && c.ThinkTime == 0 && c.SessionLength == 0
			}, "5 turns, no think time"},
		{"think sets an exponential pause of mean 10 s", []string{"--workload", "think"},
			func(c loadgen.Config) bool {
				return c.ThinkDist == loadgen.ThinkExponential && c.ThinkTime == 10*time.Second
			}, "exponential, 10s"},
		{"a --think-time given with think wins, before or after it", []string{"--think-time", "3s", "--workload", "think"},
			func(c loadgen.Config) bool {
				return c.ThinkDist == loadgen.ThinkExponential && c.ThinkTime == 3*time.Second
			}, "exponential, 3s"},
		{"long has 5-15 turns and the profile's context as its limit", []string{"--workload", "long"},
			func(c loadgen.Config) bool { return c.Turns.String() == "5-15" && c.MaxContext == 16384 }, "5-15 turns, max context 16384"},
		{"open-loop is an open loop", []string{"--workload", "open-loop"},
			func(c loadgen.Config) bool { return c.SessionLength == 190*time.Second }, "session length 190s"},
		{"agentic answers briefly with tool results", []string{"--workload", "agentic", "--virtual"},
			func(c loadgen.Config) bool { return c.MaxTokens == 64 && c.ToolTokens.Max == 500 }, "max_tokens 64, tools up to 500"},
		{"trace at one level replays a synthetic trace", []string{"--workload", "trace", "--levels", "60"},
			func(c loadgen.Config) bool { return len(c.Trace) > 0 && c.Trace[0].BlockTokens == 512 }, "a trace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := sweepOptionsFor(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o.serve.Load) {
				t.Fatalf("load %+v, want %s", o.serve.Load, tt.want)
			}
		})
	}
}

func TestSweepWorkloadSadPath(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "two.jsonl")
	if err := os.WriteFile(trace, []byte(`{"timestamp":0,"input_length":10,"output_length":5,"hash_ids":[1]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown workload", []string{"--workload", "chats"}, `unknown workload "chats": want one of chat, think`},
		{"a trace over two levels", []string{"--workload", "trace", "--levels", "40,80"}, "a trace sweep takes one level"},
		{"a trace file with another workload", []string{"--workload", "think", "--trace", trace}, "--trace replays a trace, which is the trace workload, not think"},
		{"a zero trace block size", []string{"--workload", "trace", "--levels", "40", "--trace-block-size", "0"}, "--trace-block-size 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sweepOptionsFor(tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tt.want)
			}
		})
	}
}

func TestNewCommandsRefuseBadValuesInOneLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bench without a benchmark", []string{"bench"}, "say which benchmark: kvlens bench routing"},
		{"an unknown policy", []string{"bench", "routing", "--policies", "kv,fastest"}, "--policies: "},
		{"an unknown workload", []string{"bench", "routing", "--workloads", "chat,chats"}, `--workloads: unknown workload "chats"`},
		{"levels high to low", []string{"bench", "routing", "--levels", "200-40"}, `--levels: "200-40": want numbers from 1 to 10000, low to high`},
		{"a seed given twice", []string{"bench", "routing", "--seeds", "1,1"}, "--seeds: 1 is given twice"},
		{"no measurement", []string{"bench", "routing", "--measure", "0s"}, "measure 0s must be positive"},
		{"no parallelism", []string{"bench", "routing", "--parallel", "0"}, "--parallel 0: need at least 1"},
		{"a fleet of a hundred thousand workers", []string{"bench", "routing", "--workers", "100000"}, "sim: a fleet of 100000 workers: at most 1024"},
		{"a grid of millions of runs, which ran out of memory", []string{"bench", "routing", "--policies", "rr,kv", "--workloads", "chat", "--levels", "1-1000", "--seeds", "1-1000"}, "kvlens bench routing: 2000000 runs (2 policies × 1 workloads × 1000 levels × 1000 seeds): at most 100000"},
		{"seeds past the largest", []string{"bench", "routing", "--seeds", "1-2147483648"}, `--seeds: "1-2147483648": want numbers from 0 to 2147483647`},
		{"a simulated fleet of no workers", []string{"sim", "--count", "0"}, "kvlens sim: --count: a fleet needs at least 1 worker, got 0"},
		{"a sweep's listen address of a port alone", []string{"sweep", "--addr", "9090"}, `kvlens sweep: --addr "9090": want HOST:PORT or :PORT`},
		{"a simulated fleet past the most workers names --count, not --base-port", []string{"sim", "--count", "100000"}, "kvlens sim: --count: a fleet of 100000 workers: at most 1024"},
		{"trace without gen", []string{"trace"}, "kvlens trace gen"},
		{"a trace of no sessions", []string{"trace", "gen", "--sessions", "0"}, "trace gen: sessions 0: need 1..1000000"},
		{"a trace with a zero rate", []string{"trace", "gen", "--rate", "0"}, "rate 0: need a positive number"},
		{"a trace with bad turns", []string{"trace", "gen", "--turns", "5-3"}, `turns "5-3"`},
		{"a trace to no file, which said 'open : no such file or directory' with status 1", []string{"trace", "gen", "--out", ""}, "kvlens trace gen: --out: no file given (- writes to standard output)"},
		{"a trace into a directory", []string{"trace", "gen", "--out", "."}, "kvlens trace gen: --out: cannot write .: is a directory"},
		{"serve with an unknown workload", []string{"serve", "--workload", "chats"}, `--workload: unknown workload "chats"`},
		// Each is refused before it runs, not after minutes or hours of runs.
		{"a study of no worker counts, which used to run the whole plan", []string{"plan", "--study", ""}, "--study: no value given"},
		{"a study row given twice", []string{"plan", "--study", "2,2"}, "--study: 2 is given twice"},
		{"a planned worker count given twice", []string{"plan", "--workers", "1,1"}, "--workers: 1 is given twice"},
		{"a plan of no parallel probes", []string{"plan", "--parallel", "0"}, "--parallel 0: need at least 1"},
		{"a plan searching no workers", []string{"plan", "--max-workers", "0"}, "--max-workers 0: want 1 to 1024"},
		{"a negative target", []string{"plan", "--target", "-1"}, "--target -1: want a concurrency up to 10000, or 0 to skip"},
		{"a study with a plan's flag it would ignore", []string{"plan", "--study", "2", "--modes", "kv"}, "--study runs its own three arms at its own worker counts: drop --modes"},
		{"a worker list that does not parse is a usage error", []string{"serve", "--workers", "http://127.0.0.1:1/v1"}, `kvlens serve: --workers: worker 0: "http://127.0.0.1:1/v1": give the worker's base URL, without /v1`},
		{"a negative stall names its flag, and is a usage error", []string{"sim", "--stall", "-1s"}, "kvlens sim: --stall must not be negative, got -1s"},
		{"a fault rate past 1 names its flag", []string{"sim", "--fault-503", "2"}, "kvlens sim: --fault-503 must be between 0 and 1, got 2"},
		{"worker ports past 65535", []string{"sim", "--base-port", "70000"}, "--base-port 70000: worker ports must lie from 1 to 65535"},
		{"a CPU benchmark of no time, which printed a mean of NaN", []string{"sim", "bench", "cpu", "--duration", "0s"}, "--duration 0s: want at least 1s"},
		{"a CPU benchmark of no streams", []string{"sim", "bench", "cpu", "--streams", "0"}, "--streams 0: want 1 to 10000 streams a worker"},
		{"bench reports of no name", []string{"bench", "routing", "--out", ""}, "--out: no path given for the reports"},
		{"an earlier run's file of no name, which used to start the whole grid", []string{"bench", "routing", "--from", ""}, "--from: no file given"},
		{"an interrupted grid of no name", []string{"bench", "routing", "--resume", ""}, "--resume: no file given"},
		{"both an earlier run to draw and one to finish", []string{"bench", "routing", "--from", "a.json", "--resume", "b.partial.json"}, "--from draws a finished grid's reports and --resume finishes a grid: give one"},
		{"a resumed grid given a grid's flag", []string{"bench", "routing", "--resume", "b.partial.json", "--seeds", "1-5"}, "--resume runs the grid its file holds: drop --seeds"},
		{"a sweep window of nothing, which failed after starting the fleet", []string{"sweep", "--window", "0s"}, "kvlens sweep: --window must be at least 1s, got 0s"},
		{"a plan searching no level a worker", []string{"plan", "--per-worker", "0"}, "--per-worker 0: want 1 to 10000 conversations a worker"},
		{"a replay socket with nothing published to replay", []string{"sim", "--events-replay", "tcp://127.0.0.1:5999"}, "--events-replay replays published KV events: give --events-bind or --events-connect too"},
		{"help for a command there is not", []string{"help", "swep"}, `kvlens help: unknown command "swep"`},
		{"bench reports with nowhere to go", []string{"bench", "routing", "--out", "/proc/kvlens/bench"}, "--out: cannot write /proc/kvlens/bench.md: mkdir /proc/kvlens"},
		{"a plan chart with nowhere to go", []string{"plan", "--out", "/proc/kvlens/plan.png"}, "--out: cannot write /proc/kvlens/plan.png"},
		{"reports drawn again with nowhere to go, which said only 'mkdir /proc/kvlens'", []string{"bench", "routing", "--from", "../../docs/routing-bench.json", "--out", "/proc/kvlens/bench"}, "kvlens bench routing: --out: cannot write /proc/kvlens/bench.md"},
		{"a calibration table with nowhere to go", []string{"sim", "calibrate", "--out", "/proc/kvlens/cal.md"}, "--out: cannot write /proc/kvlens/cal.md"},
		// Another of kvlens's files is named as what it is: these were
		// 'json: unknown field "engine"' and 'line 1: unexpected EOF'.
		{"a bench report given as an engine profile", []string{"plan", "--sim-profile", "../../docs/routing-bench.json"}, "--sim-profile: ../../docs/routing-bench.json is a report of kvlens bench routing (kvlens bench routing --from draws it), not an engine profile"},
		{"an engine profile given as a trace", []string{"sweep", "--trace", "../../docs/h200-candidate.json"}, "../../docs/h200-candidate.json is an engine profile (--sim-profile reads it), not a Mooncake-format trace"},
		// /dev/zero never ends: each was read whole until the process died.
		{"an engine profile that never ends", []string{"sim", "bench", "offline", "--profile", "/dev/zero"}, "--profile: sim: profile /dev/zero is longer than 1024 KiB"},
		{"a sweep's engine profile that never ends", []string{"sweep", "--virtual", "--sim-profile", "/dev/zero"}, "profile /dev/zero is longer than 1024 KiB"},
		{"a tokenizer file that never ends", []string{"serve", "--tokenizer", "/dev/zero"}, "tokenizer: /dev/zero: more than any tokenizer file"},
		// Each ran the sweep's first warmup, then failed, or was stored.
		{"a sweep measuring nothing", []string{"sweep", "--virtual", "--measure", "1ns"}, "kvlens sweep: --measure 1ns: want at least 1s"},
		{"a sweep that never waits for its target", []string{"sweep", "--ready-timeout", "-1s"}, "--ready-timeout -1s: want a positive time"},
		{"a sweep's negative cooldown names its flag", []string{"sweep", "--cooldown", "-1s"}, "--cooldown -1s: want 0 or more"},
		{"a sweep's name of two lines names its flag", []string{"sweep", "--name", "a\nb"}, "--name: holds the control character U+000A"},
		{"a deployment note that would break the report's table", []string{"sweep", "--deployment-note", "GPU | H200\nnext"}, "--deployment-note holds the control character U+000A"},
		{"a deployment note longer than the stored set may carry", []string{"sweep", "--deployment-note", strings.Repeat("x", 4097)}, "--deployment-note is 4097 bytes long: at most 4096"},
		{"a sweep run of a negative id", []string{"sweep", "--resume", "--run", "-1"}, "--run -1: want a sweep run's id"},
		// Every request was refused with 400: a sweep found out after its
		// first level's warmup and measurement, and serve showed errors.
		{"a sweep's answers longer than a simulated worker's context", []string{"sweep", "--virtual", "--max-tokens", "20000"}, "--max-tokens 20000: the simulated workers (h200-llama3.1-70b-fp8-tp1) hold 16384 tokens of prompt and answer together"},
		{"a plan's answers longer than a simulated worker's context", []string{"plan", "--max-tokens", "16384"}, "kvlens plan: --max-tokens 16384: the simulated workers"},
		{"serve's answers longer than a simulated worker's context", []string{"serve", "--max-tokens", "1000000"}, "kvlens serve: --max-tokens 1000000: the simulated workers"},
		// Each ran the plan's whole envelope search, then failed at the target.
		{"a plan target past the most conversations", []string{"plan", "--target", "10001"}, "--target 10001: want a concurrency up to 10000, or 0 to skip"},
		{"a plan SLO of nothing, which failed at the first probe with status 1", []string{"plan", "--slo-ttft", "0s"}, "kvlens plan: --slo-ttft 0s and --slo-tpot 60ms: both must be positive"},
		{"plan seeds of no value, which planned with the default seeds", []string{"plan", "--seeds", " "}, "--seeds: no value given"},
		{"a study measuring nothing, which printed a table of zeros", []string{"plan", "--study", "2", "--measure", "1ns"}, "--measure 1ns must be at least 1s"},
		{"a bench run measuring nothing, which failed after starting", []string{"bench", "routing", "--measure", "999ms"}, "--measure 999ms: want at least 1s"},
		{"a calibration measuring nothing", []string{"sim", "calibrate", "--measure", "1ns"}, "kvlens sim calibrate: --measure 1ns: want at least 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused(t, tt.args, tt.want)
		})
	}
}

func TestWorkloadsListsTheSuite(t *testing.T) {
	for _, args := range [][]string{{"workloads"}, {"serve", "--workload", "help"}, {"sweep", "--workload", "help"}} {
		out, err := kvlens(args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		for _, w := range loadgen.Workloads {
			if !strings.Contains(string(out), "\n"+w.Name+"\n") && !strings.HasPrefix(string(out), w.Name+"\n") {
				t.Fatalf("%v does not list %s:\n%s", args, w.Name, out)
			}
		}
	}
}

func TestTraceGenWritesWhatServeReplays(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gen.jsonl")
	out, err := kvlens("trace", "gen", "--sessions", "20", "--rate", "2", "--shared-prefix-blocks", "2", "--block-size", "64", "--out", path).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "of 20 sessions") {
		t.Fatalf("no summary: %s", out)
	}
	recs, err := loadgen.LoadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 20 {
		t.Fatalf("%d records, want at least one per session (20)", len(recs))
	}
	for _, r := range recs {
		if r.HashIDs[0] != 0 || r.HashIDs[1] != 1 || r.InputLength != 64*len(r.HashIDs) {
			t.Fatalf("record %d: %+v, want the 2 shared blocks first and 64 tokens per hash id", r.Line, r)
		}
	}
}

func TestBenchRoutingWritesItsReports(t *testing.T) {
	out := filepath.Join(t.TempDir(), "grid")
	res, err := kvlens("bench", "routing", "--policies", "rr,kv", "--workloads", "chat", "--levels", "8", "--workers", "2",
		"--warmup", "10s", "--measure", "30s", "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	for _, ext := range []string{".md", ".json", ".png"} {
		if fi, err := os.Stat(out + ext); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", out+ext, err)
		}
	}
	md, _ := os.ReadFile(out + ".md")
	if !strings.Contains(string(md), "| level | round_robin | kv |") {
		t.Fatalf("report:\n%s", md)
	}
}

// TestWorkloadsDocHasEveryParagraph holds docs/workloads.md to the suite:
// each workload's section is its Doc, word for word.
func TestWorkloadsDocHasEveryParagraph(t *testing.T) {
	page, err := os.ReadFile("../../docs/workloads.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(page)), " ")
	for _, w := range loadgen.Workloads {
		if !strings.Contains(text, "### `"+w.Name+"` "+strings.Join(strings.Fields(w.Doc), " ")) {
			t.Errorf("docs/workloads.md lacks the section of %s as its Doc says it", w.Name)
		}
	}
}
