package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kvlens/kvlens/loadgen"
)

const traceUsage = `Usage: kvlens trace gen [flags]

Writes a synthetic Mooncake-format trace (JSONL: timestamp in ms,
input_length, output_length, hash_ids) of multi-turn sessions arriving as a
Poisson process. Every prompt starts with the same shared blocks, then its
session's own blocks, then the blocks each turn so far added, so a turn's
prompt extends the one before it. Replay it with
kvlens serve --trace FILE --trace-block-size N (N = --block-size).

Flags:
`

// traceCmd is `kvlens trace`: gen writes a synthetic trace.
func traceCmd(args []string) int {
	if len(args) > 0 && isHelp(args[0]) {
		// gen is trace's one command: its usage, flags and all.
		args = []string{"gen", "-h"}
	}
	if len(args) == 0 || args[0] != "gen" {
		fmt.Fprint(os.Stderr, "kvlens trace: say what to do: kvlens trace gen [flags]\n")
		return 2
	}
	s := loadgen.DefaultTraceSpec()
	var out string
	fs := flag.NewFlagSet("trace gen", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.IntVar(&s.Sessions, "sessions", s.Sessions, "number of sessions")
	fs.Float64Var(&s.Rate, "rate", s.Rate, "sessions arriving per second, on average (Poisson)")
	fs.Var(&s.Turns, "turns", "requests per session: a range like 3-5, a count, or weights like 3:1,4:2,5:1")
	fs.IntVar(&s.SharedBlocks, "shared-prefix-blocks", s.SharedBlocks, "blocks every prompt of every session starts with (a shared system prompt)")
	fs.IntVar(&s.SessionBlocks, "session-prefix-blocks", s.SessionBlocks, "blocks that follow, the same in every prompt of a session and unique to it (its document)")
	fs.IntVar(&s.TurnBlocks, "turn-blocks", s.TurnBlocks, "new blocks each turn adds (the last answer and the new question)")
	fs.IntVar(&s.OutputTokens, "output-tokens", s.OutputTokens, "output_length of every request")
	fs.DurationVar(&s.Gap, "gap", s.Gap, "least time between a session's turns")
	fs.DurationVar(&s.Think, "think", s.Think, "mean of the exponential time added to each gap")
	fs.IntVar(&s.BlockSize, "block-size", s.BlockSize, "tokens each hash id names (Mooncake's traces use 512)")
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "seed of the arrivals, turn counts and gaps")
	fs.StringVar(&out, "out", "-", "file to write, - for standard output")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), traceUsage)
		fs.PrintDefaults()
	}
	if status, ok := parseFlags(fs, args[1:]); !ok {
		return status
	}
	usage := func(err error) int {
		fmt.Fprintf(os.Stderr, "kvlens trace gen: %v\n", err)
		return 2
	}
	if strings.TrimSpace(out) == "" {
		return usage(errors.New("--out: no file given (- writes to standard output)"))
	}
	if out != "-" {
		// Checked before the trace is made, and named: it was found after,
		// as "open : no such file or directory".
		if err := writable(out); err != nil {
			return usage(fmt.Errorf("--out: %w", err))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	recs, err := s.Generate()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kvlens %v\n", err)
		return 2
	}
	write := func(w io.Writer) error { return loadgen.WriteTrace(ctxWriter{ctx, w}, recs) }
	if out == "-" {
		err = write(stdout)
	} else {
		// Through a file beside it, renamed into place: Ctrl-C in the
		// middle of a million sessions left a truncated trace where the
		// old one was, and a trace cut at a line's end replays as a
		// shorter one without a word.
		err = writeAtomic(out, write)
	}
	if isStdoutError(err) {
		return 1 // main reports it, as for every command
	}
	if err != nil {
		if ctx.Err() != nil {
			kept := ""
			if out != "-" {
				kept = ": " + out + " is left as it was"
			}
			fmt.Fprintf(os.Stderr, "kvlens trace gen: interrupted%s\n", kept)
			return 1
		}
		fmt.Fprintf(os.Stderr, "kvlens trace gen: %v\n", err)
		return 1
	}
	span := float64(recs[len(recs)-1].Timestamp-recs[0].Timestamp) / 1000
	fmt.Fprintf(os.Stderr, "kvlens trace gen: %d requests of %d sessions over %.0f s; sessions last about %s, so the trace keeps about %.0f in flight (Little's law)\n",
		len(recs), s.Sessions, span, s.SessionLength(), s.Rate*s.SessionLength().Seconds())
	return 0
}

// ctxWriter is w until ctx ends, then fails every write with ctx's error,
// so that a long write stops at Ctrl-C.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
