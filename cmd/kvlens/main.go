// Command kvlens shows, live, what KV-cache-aware routing does for LLM
// inference. With no arguments it serves the dashboard over a simulated fleet.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/kvlens/kvlens/loadgen"
)

func main() {
	// kvlens measures latencies to the millisecond; see loadgen.TuneGC.
	loadgen.TuneGC()
	os.Exit(finish(run(os.Args[1:]), stdout, os.Stderr))
}

// run dispatches a subcommand and returns the exit status: 0 on success, 1 on
// failure, 2 on a usage error.
func run(args []string) int {
	cmd, rest := "serve", args
	if len(args) > 0 && args[0] != "" && (args[0][0] != '-' || topLevel[args[0]]) {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "kvlens "+version())
		return 0
	case "serve":
		return serve(rest)
	case "sim":
		return simCmd(rest)
	case "sweep":
		return sweepCmd(rest)
	case "baselines":
		return baselinesCmd(rest)
	case "recordings":
		return recordingsCmd(rest)
	case "plan":
		return planCmd(rest)
	case "bench":
		return benchCmd(rest)
	case "workloads":
		return workloadsCmd(rest)
	case "trace":
		return traceCmd(rest)
	case "help":
		// `kvlens help sweep` is `kvlens sweep -h`, and `kvlens help
		// bench routing` is `kvlens bench routing -h`.
		if len(rest) > 0 && commands[rest[0]] {
			return run(append(rest, "-h"))
		}
		// help and version are listed among the commands too, and have no
		// flags of their own.
		if len(rest) > 0 && rest[0] == "version" {
			fmt.Fprint(stdout, "Usage: kvlens version (or --version)\n\nPrints the build: the module version, the commit it was built from, and the Go toolchain.\n")
			return 0
		}
		if len(rest) > 0 && rest[0] == "help" {
			rest = nil
		}
		if len(rest) > 0 {
			fmt.Fprintf(os.Stderr, "kvlens help: unknown command %q\n%s", rest[0], usage)
			return 2
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "kvlens: unknown command %q\n%s", cmd, usage)
	return 2
}

// commands are the subcommands `kvlens help` gives the help of.
var commands = map[string]bool{"serve": true, "sim": true, "sweep": true, "baselines": true, "recordings": true,
	"plan": true, "bench": true, "workloads": true, "trace": true}

// topLevel are the flags kvlens answers itself; any other flag first means
// serve's, since serve is the default command.
var topLevel = map[string]bool{"-h": true, "-help": true, "--help": true, "-version": true, "--version": true}

// version names the build: the module version and, for a build from a git
// checkout, the commit (with "+dirty" for uncommitted changes).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown build)"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " (" + rev + dirty + ")"
	}
	return v + " " + bi.GoVersion
}

const usage = `Usage: kvlens [command] [flags]

Commands:
  serve       serve the dashboard, router and load generator (the default)
  sim         run simulated workers on their own, benchmark the simulator, or calibrate it against the seeds
  sweep       measure concurrency levels × routing modes into a baseline set and reports
  baselines   list, show, import, export or delete stored baseline sets
  recordings  list, export (CSV or JSON) or delete recorded live sessions
  plan        plan capacity in virtual time: concurrency per policy and worker count within SLOs
  bench       benchmark in virtual time: bench routing runs policies × workloads × levels × seeds
  workloads   list the workload suite (--workload NAME of serve and sweep), one paragraph each
  trace       trace gen writes a synthetic Mooncake trace with a given prefix-sharing structure
  help        show this text
  version     show the version (also --version)

With no command, kvlens serves: 'kvlens --addr :9090' is 'kvlens serve --addr :9090'.
Run 'kvlens COMMAND -h' for a command's flags.
`
