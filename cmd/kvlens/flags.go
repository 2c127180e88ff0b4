package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kvlens %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return 2, false
	}
	if checkOnly {
		return 0, false
	}
	return 0, true
}
