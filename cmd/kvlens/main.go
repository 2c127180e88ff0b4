// Command kvlens shows, live, what KV-cache-aware routing does for LLM
// inference. With no arguments it serves the dashboard over a simulated fleet.
package main

import (
	"fmt"
	"os"

	"github.com/kvlens/kvlens/loadgen"
)

func main() {
	// kvlens measures latencies to the millisecond; see loadgen.TuneGC.
	loadgen.TuneGC()
	os.Exit(run(os.Args[1:]))
}

// run dispatches a subcommand and returns the exit status: 0 on success, 1 on
// failure, 2 on a usage error.
func run(args []string) int {
	cmd, rest := "serve", args
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
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
	case "help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "kvlens: unknown command %q\n%s", cmd, usage)
	return 2
}

const usage = `Usage: kvlens [command] [flags]

Commands:
  serve       serve the dashboard, router and load generator (the default)
  sim         run simulated workers on their own, or benchmark the simulator
  sweep       measure concurrency levels × routing modes into a baseline set and reports
  baselines   list, show, import, export or delete stored baseline sets
  recordings  list, export (CSV or JSON) or delete recorded live sessions
  plan        plan capacity in virtual time: concurrency per policy and worker count within SLOs
  help        show this text

Run 'kvlens serve -h' for the flags of serve.
`
