package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

// checkOnly makes every command return right after its flags and
// arguments parse, so that a test can hold each command line written in
// the docs against kvlens's own flag parser without running it.
var checkOnly bool

// errChecked is what a store subcommand returns under checkOnly.
var errChecked = errors.New("command line checked")

// parseFlags parses args into fs and refuses positional arguments. It
// returns ok when the command should go on; otherwise the exit status: 0
// after -h (or under checkOnly), 2 after a bad flag, which flag has
// printed with the usage.
func parseFlags(fs *flag.FlagSet, args []string) (status int, ok bool) {
	err := parseArgs(fs, args)
	if s, stop := errors.AsType[exitStatus](err); stop {
		return int(s), false
	}
	if err != nil {
		return 2, false
	}
	return 0, true
}

// parseArgs is parseFlags for a command that goes on checking: its error
// is the bad flag's or argument's, already printed, or an exitStatus of 0
// after -h or under checkOnly.
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := parseFlagSet(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitStatus(0)
		}
		return err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		refuse(fs, err)
		return err
	}
	if checkOnly {
		return exitStatus(0)
	}
	return nil
}

// parseFlagSet parses args into fs. -h prints the usage; a flag that is
// not defined or a value that does not parse prints one line naming the
// command, and where the flags are listed. The flag package alone would
// follow the line with the whole usage, over a hundred lines for serve,
// which scroll the mistake off the terminal.
func parseFlagSet(fs *flag.FlagSet, args []string) error {
	err := parseQuiet(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(fs)
	case err != nil:
		refuse(fs, err)
	}
	return err
}

// parseQuiet parses args into fs and prints nothing, leaving what to say
// to the caller.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	return err
}

// printUsage prints fs's usage: its own, or the flag package's default.
func printUsage(fs *flag.FlagSet) {
	if fs.Usage != nil {
		fs.Usage()
		return
	}
	fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
	fs.PrintDefaults()
}

// refuse prints a mistake in how `kvlens <command>` was called: the
// mistake on one line, then where the flags are listed.
func refuse(fs *flag.FlagSet, err error) {
	fmt.Fprintf(fs.Output(), "kvlens %s: %v\n", fs.Name(), err)
	fmt.Fprintf(fs.Output(), "(kvlens %s -h lists its flags)\n", fs.Name())
}

// exitStatus stops a command before it runs, with this exit status.
type exitStatus int

func (s exitStatus) Error() string { return "exit status " + strconv.Itoa(int(s)) }

// checkLoad catches the load flags serve, sweep and plan share when they
// parse but make no sense, naming the flag; the load generator's own check
// names its fields instead.
func checkLoad(l loadgen.Config) error {
	switch {
	case l.MaxTokens < 1:
		return fmt.Errorf("--max-tokens must be at least 1, got %d", l.MaxTokens)
	case !(l.StartRate >= 0) || math.IsInf(l.StartRate, 0):
		return fmt.Errorf("--target-rps must be 0 (start every conversation at once) or a positive rate, got %g", l.StartRate)
	case l.ThinkTime < 0:
		return fmt.Errorf("--think-time must not be negative, got %s", l.ThinkTime)
	case l.RequestTimeout < 0:
		return fmt.Errorf("--request-timeout must be 0 (never) or more, got %s", l.RequestTimeout)
	case l.Window < time.Second:
		// The dashboard draws a frame a second: a shorter window would
		// hold under one frame's answers.
		return fmt.Errorf("--window must be at least 1s, got %s", l.Window)
	}
	return nil
}

// isHelp says that arg asks for help, as the flag package reads -h.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// givenFlags names the flags the command line set, as flag.Visit sees them.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// checkText refuses a flag's free text that a stored baseline set could
// not carry: longer than a set's file allows, the set would export to a
// file that baselines import then refuses.
func checkText(flag, s string) error {
	if len(s) > baselines.MaxTextBytes {
		return fmt.Errorf("%s is %d bytes long: at most %d", flag, len(s), baselines.MaxTextBytes)
	}
	return nil
}

// checkLine is checkText for text that stands on one line of a report,
// such as a row of its Markdown table, which a line break or a control
// character would break.
func checkLine(flag, s string) error {
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s holds the control character %U: give one line of text", flag, r)
		}
	}
	return checkText(flag, s)
}

// checkModel refuses a model name that is not one line of text. The name
// goes into every request's JSON body, the logs, the dashboard's text and
// the reports: a line break split a log line, an escape sequence drove the
// operator's terminal, and invalid UTF-8 went out as U+FFFD, a name no
// worker serves.
func checkModel(flag, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", flag, s)
	}
	return checkLine(flag, s)
}

// checkRequestModel checks the --model every request names: an empty one
// is refused, since every OpenAI server refuses a request naming none, and
// leaving the flag out takes the workers' own.
func checkRequestModel(s string) error {
	if s == "" {
		return errors.New("--model is empty: give a model's name, or leave --model out to take the one the workers serve (GET /v1/models)")
	}
	return checkModel("--model", s)
}

// checkMeasure refuses a measurement under a second, the load generator's
// shortest window: no request finishes in it, and the run failed on that
// only after its warmup.
func checkMeasure(d time.Duration) error {
	if d < time.Second {
		return fmt.Errorf("--measure %s: want at least 1s (a turn can take 20 s or more)", d)
	}
	return nil
}

// checkSimTokens refuses a --max-tokens that leaves a simulated worker of
// profile p no room for a prompt: each refuses every request with 400, and
// a sweep or a plan found it out only after its first level's warmup and
// measurement.
func checkSimTokens(maxTokens int, p sim.Profile) error {
	if p.MaxModelLen > 0 && maxTokens >= p.MaxModelLen {
		return fmt.Errorf("--max-tokens %d: the simulated workers (%s) hold %d tokens of prompt and answer together, so every request would be refused", maxTokens, p.Name, p.MaxModelLen)
	}
	return nil
}

// checkAddr refuses a listen address that is not host:port, naming flag: it
// was found when the listener started, as "listen tcp: address 99999:
// invalid port", with status 1 as if the port were taken.
func checkAddr(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT or :PORT, such as 127.0.0.1:8080 (port 0 picks a free one)", flag, addr)
	}
	return nil
}
