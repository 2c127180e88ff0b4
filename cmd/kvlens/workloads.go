package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

// workloadsCmd is `kvlens workloads`: the suite, one paragraph each.
func workloadsCmd(args []string) int {
	fs := flag.NewFlagSet("workloads", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: kvlens workloads\n\nLists the workloads serve, sweep and bench routing take (--workload NAME), one paragraph each.\n")
	}
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	printWorkloads(stdout)
	return 0
}

// printWorkloads writes each workload's name and paragraph, wrapped.
func printWorkloads(w io.Writer) {
	for i, wl := range loadgen.Workloads {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, wl.Name)
		fmt.Fprint(w, wrap(wl.Doc, "  ", 78))
	}
}

// wrap breaks text into lines of at most width characters, each indented.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}

const workloadFlagHelp = "workload of the suite, which sets turns, think time, max tokens, system prompt and whether the loop is open; flags given with it override its values (kvlens workloads, or --workload help, lists them)"

// chosenWorkload reads fs's --workload: the workload, or ok false when none
// was given. "help" lists the suite on w and is reported as errHelp.
func chosenWorkload(fs *flag.FlagSet, w io.Writer) (loadgen.Workload, bool, error) {
	name := fs.Lookup("workload").Value.String()
	switch name {
	case "":
		return loadgen.Workload{}, false, nil
	case "help":
		printWorkloads(w)
		return loadgen.Workload{}, false, errWorkloadHelp
	}
	wl, err := loadgen.LookupWorkload(name)
	if err != nil {
		return wl, false, fmt.Errorf("--workload: %w", err)
	}
	return wl, true, nil
}

// errWorkloadHelp says --workload help listed the suite: exit 0.
var errWorkloadHelp = fmt.Errorf("workloads listed")

// syntheticTraceLength is how long a synthetic trace keeps sessions
// arriving when nothing bounds the run: an hour.
const syntheticTraceLength = time.Hour

// setTrace gives the trace workload its records: the --trace file's, each
// naming blockSize tokens per hash id, or else a synthetic trace at level
// for length. It refuses a file with any other workload.
func setTrace(wl loadgen.Workload, chosen bool, load *loadgen.Config, blockSize, level int, length time.Duration) error {
	if blockSize < 1 || blockSize > 1<<20 {
		return fmt.Errorf("--trace-block-size %d: need 1..%d tokens", blockSize, 1<<20)
	}
	if len(load.Trace) > 0 {
		if chosen && wl.Trace == nil {
			return fmt.Errorf("--trace replays a trace, which is the trace workload, not %s: drop one of them", wl.Name)
		}
		for i := range load.Trace {
			load.Trace[i].BlockTokens = blockSize
		}
		return nil
	}
	if !chosen || wl.Trace == nil {
		return nil
	}
	recs, err := wl.TraceFor(level, load.Seed, length)
	if err != nil {
		return err
	}
	load.Trace = recs
	return nil
}

// describeLoad says what a sweep's conversations were, for its report.
func describeLoad(wl loadgen.Workload, chosen bool, cfg loadgen.Config) string {
	if len(cfg.Trace) > 0 {
		return fmt.Sprintf("Mooncake-format trace replay of %d records", len(cfg.Trace))
	}
	name := "Multi-turn chat"
	if chosen {
		name = "Workload " + wl.Name + ":"
	}
	s := fmt.Sprintf("%s (%s turns per conversation, max_tokens %d", name, cfg.Turns.String(), cfg.MaxTokens)
	switch cfg.ThinkDist {
	case loadgen.ThinkExponential:
		s += fmt.Sprintf(", exponential think time of mean %s", cfg.ThinkTime)
	case loadgen.ThinkReading:
		s += fmt.Sprintf(", think time of reading the answer at %g words per minute", cfg.ReadingWPM)
	default:
		if cfg.ThinkTime > 0 {
			s += fmt.Sprintf(", think time %s", cfg.ThinkTime)
		}
	}
	if cfg.SystemPrompt != "" {
		s += ", a long shared system prompt"
	}
	if cfg.ToolTokens.Max > 0 {
		s += fmt.Sprintf(", tool results of %d–%d tokens", cfg.ToolTokens.Min, cfg.ToolTokens.Max)
	}
	if cfg.SessionLength > 0 {
		s += fmt.Sprintf(", open loop: level L is L / %s sessions per second", cfg.SessionLength)
	}
	return s + ")"
}
