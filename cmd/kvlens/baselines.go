package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/store"
)

const baselinesUsage = `Usage: kvlens baselines <command> [flags] [arguments]

Commands:
  list                 list the stored baseline sets
  show NAME            print a set's levels, mode by mode
  import FILE          store a set from a seed reference JSON (dual- or
                       single-mode) or a kvlens baseline file
  export NAME          write a set as JSON (--format kvlens, dual or single)
  delete NAME          remove a set

Every command takes --db PATH (default: %s).
`

// usageError is a mistake in how kvlens was called: exit status 2.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// parseInterleaved parses flags that may come before or after the positional
// arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlagSet(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// dbFlag adds --db to fs.
func dbFlag(fs *flag.FlagSet) *string {
	def, err := store.DefaultPath()
	if err != nil {
		def = ""
	}
	return fs.String("db", def, "path of kvlens's SQLite database")
}

// openDB opens the store at path, creating it in an existing directory as
// a first run does. Only import, and the default location, may create its
// directory too: a read or a delete under a directory that does not exist
// is a typo, and would otherwise leave directories and an empty store
// behind and answer from it.
func openDB(ctx context.Context, path string, mkdir bool) (*store.DB, error) {
	if path == "" {
		return nil, usagef("no default location for the database: give --db PATH")
	}
	if def, _ := store.DefaultPath(); !mkdir && path != def {
		if _, err := os.Stat(filepath.Dir(path)); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no store at %s: its directory does not exist (kvlens serve, sweep or baselines import creates it)", path)
		}
	}
	return store.Open(ctx, path)
}

func baselinesCmd(args []string) int {
	return storeCmd("baselines", baselinesUsage, map[string]storeSub{
		"list": baselinesList, "show": baselinesShow, "import": baselinesImport,
		"export": baselinesExport, "delete": baselinesDelete,
	}, args)
}

// storeSub is one subcommand of a command over the store: its flag set
// (with --db already on it), the database path, its arguments, and where
// its output goes.
type storeSub func(ctx context.Context, fs *flag.FlagSet, db *string, args []string, out io.Writer) error

// storeCmd runs `kvlens <name> <sub>`: usage on -h or no subcommand, --db on
// every subcommand, and the exit status from reportExit.
func storeCmd(name, usage string, subs map[string]storeSub, args []string) int {
	def, _ := store.DefaultPath()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(os.Stderr, usage, def)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, rest := args[0], args[1:]
	run, ok := subs[sub]
	if !ok {
		fmt.Fprintf(os.Stderr, "kvlens %s: unknown command %q\n"+usage, name, sub, def)
		return 2
	}
	fs := flag.NewFlagSet(name+" "+sub, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	if line := usageLine(usage, sub); line != "" {
		// -h names the arguments too, as the command's usage lists them:
		// "Usage of baselines show:" and the flags left out NAME.
		fs.Usage = func() {
			fmt.Fprintf(fs.Output(), "Usage: kvlens %s %s [flags]\n\nFlags:\n", name, line)
			fs.PrintDefaults()
		}
	}
	db := dbFlag(fs)
	return reportExit(name+" "+sub, fs, run(context.Background(), fs, db, rest, stdout))
}

// usageLine finds sub's line in a command's usage, such as "show NAME
// print a set's levels, mode by mode", and returns its first column,
// "show NAME"; "" if there is none.
func usageLine(usage, sub string) string {
	for _, l := range strings.Split(usage, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == sub && strings.HasPrefix(l, "  ") {
			col, _, _ := strings.Cut(strings.TrimSpace(l), "  ")
			return col
		}
	}
	return ""
}

// reportExit reports err of `kvlens <cmd>` on stderr and returns the exit
// status: 0 on success or -h, 2 for a usage mistake (with where the flags
// are listed), 1 for a failure.
func reportExit(cmd string, fs *flag.FlagSet, err error) int {
	var (
		ue usageError
		fe flagError
	)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp), errors.Is(err, errChecked):
		return 0
	case errors.As(err, &ue):
		refuse(fs, err)
		return 2
	case errors.As(err, &fe):
		return 2 // parseFlagSet has printed it
	case isStdoutError(err):
		return 1 // main reports it, as for every command
	}
	fmt.Fprintf(os.Stderr, "kvlens %s: %v\n", cmd, err)
	return 1
}

// flagError marks a flag's error that parseFlagSet has already printed.
type flagError struct{ error }

func (e flagError) Error() string { return "flag: " + e.error.Error() }

func parse(fs *flag.FlagSet, args []string, want int, what string) ([]string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, flagError{err}
	}
	if len(pos) < want {
		return nil, usagef("missing %s", what)
	}
	if len(pos) > want {
		return nil, usagef("unexpected argument %q", pos[want])
	}
	if checkOnly {
		return nil, errChecked
	}
	return pos, nil
}

func baselinesList(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	if _, err := parse(fs, args, 0, ""); err != nil {
		return err
	}
	db, err := openDB(ctx, *dbPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	sets, err := db.Sets(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODES\tLEVELS\tCONCURRENCY\tSOURCE")
	for _, s := range sets {
		src := s.Source
		if s.Builtin {
			src = "built in: " + src
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d–%d\t%s\n", s.Name, strings.Join(s.Modes, ","), s.Levels, s.MinConcurrency, s.MaxConcurrency, src)
	}
	return tw.Flush()
}

func baselinesShow(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	sloTTFT := fs.Duration("slo-ttft", baselines.DefaultSLO.TTFT, "TTFT p95 objective for the envelope line")
	sloTPOT := fs.Duration("slo-tpot", baselines.DefaultSLO.TPOT, "TPOT p95 objective for the envelope line")
	pos, err := parse(fs, args, 1, "the set's NAME")
	if err != nil {
		return err
	}
	slo := baselines.SLO{TTFT: *sloTTFT, TPOT: *sloTPOT}
	if err := slo.Check(); err != nil {
		return usageError{err}
	}
	db, err := openDB(ctx, *dbPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := db.Set(ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\n  source:     %s\n  deployment: %s\n", s.Name, s.Source, s.Deployment)
	if s.Method != "" {
		fmt.Fprintf(out, "  method:     %s\n", s.Method)
	}
	if s.Generated != "" {
		fmt.Fprintf(out, "  measured:   %s\n", s.Generated)
	}
	for _, mode := range s.Modes() {
		_, long := baselines.Label(mode)
		env := "misses the SLO at every level"
		if c, ok := s.Envelope(mode, slo); ok {
			env = fmt.Sprintf("within the SLO up to %d", c)
		}
		fmt.Fprintf(out, "\n%s (%s): %s\n", long, mode, env)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "CONC\tTTFT p50\tTTFT p95\tHIT %\tTOK/S\tTPOT p50\tTPOT p95\tE2E p50\tE2E p95\tERR %\tRPS\t")
		for _, l := range s.Curve(mode) {
			fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%s\t%s\t\n", l.Concurrency,
				l.TTFTP50, l.TTFTP95, opt(l.KVHitRate, "%.1f"), l.TOPS, l.TPOTP50, l.TPOTP95, l.LatencyP50, l.LatencyP95,
				opt(l.ErrorPct, "%.1f"), opt(l.ActualRPS, "%.2f"))
		}
		tw.Flush()
	}
	fmt.Fprintln(out, "\nTimes in ms; HIT % is the KV cache hit rate; TOK/S output tokens per second.")
	return nil
}

func baselinesImport(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	name := fs.String("name", "", "name of the stored set (default: the file's own name, or its base name)")
	deployment := fs.String("deployment", "", "description of the measured deployment (default: the file's own, or unknown)")
	replace := fs.Bool("replace", false, "replace a stored set of the same name")
	anyMode := fs.Bool("any-mode", false, "keep modes kvlens cannot route by, such as an external router's (measured with sweep --target)")
	pos, err := parse(fs, args, 1, "the FILE to import")
	if err != nil {
		return err
	}
	if err := baselines.CheckName(*name); err != nil {
		return usageError{fmt.Errorf("--%w", err)}
	}
	if err := checkText("--deployment", *deployment); err != nil {
		return usageError{err}
	}
	data, err := readInput(pos[0], baselines.MaxFileBytes)
	if err != nil {
		return err
	}
	s, format, err := baselines.Decode(data)
	if err != nil {
		if kind := wrongKind(pos[0], data, kindBaselines); kind != nil {
			return kind
		}
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	if !*anyMode {
		if err := s.CheckModes(router.Policies); err != nil {
			return fmt.Errorf("%s: %w; pass --any-mode to keep it", pos[0], err)
		}
	}
	base := strings.TrimSuffix(filepath.Base(pos[0]), filepath.Ext(pos[0]))
	if *name != "" {
		s.Name = *name
	} else if s.Name == "" {
		s.Name = base
	}
	if s.Source == "" {
		s.Source = "imported from " + filepath.Base(pos[0])
	}
	if *deployment != "" {
		s.Deployment = *deployment
	} else if s.Deployment == "" {
		s.Deployment = "unknown (not given on import)"
	}
	db, err := openDB(ctx, *dbPath, true)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.SaveSet(ctx, &s, *replace); err != nil {
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("a set called %q is already stored: choose another with --name, or pass --replace", s.Name)
		}
		return err
	}
	fmt.Fprintf(out, "imported %q: %d levels of %s, from %s format\n", s.Name, len(s.Levels), strings.Join(s.Modes(), " and "), format)
	return nil
}

func baselinesExport(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	formatName := fs.String("format", "kvlens", "kvlens (everything), dual (seed 000's reference JSON) or single (seed 001's, one mode)")
	file := fs.String("o", "", "write to this file instead of standard output")
	pos, err := parse(fs, args, 1, "the set's NAME")
	if err != nil {
		return err
	}
	format, err := baselines.ParseFormat(*formatName)
	if err != nil {
		return usageError{err}
	}
	if *file != "" {
		// Named, and before the store is read: it was "open /proc/x: no
		// such file or directory", with status 1.
		if err := writable(*file); err != nil {
			return usageError{fmt.Errorf("-o: %w", err)}
		}
	}
	db, err := openDB(ctx, *dbPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := db.Set(ctx, pos[0])
	if err != nil {
		return err
	}
	data, err := baselines.Encode(&s, format)
	if err != nil {
		return err
	}
	if *file == "" {
		_, err = out.Write(data)
		return err
	}
	// Renamed into place, so that a write that fails half-way (a full
	// disk) leaves the file it would replace whole.
	return writeAtomic(*file, func(w io.Writer) error { _, err := w.Write(data); return err })
}

func baselinesDelete(ctx context.Context, fs *flag.FlagSet, dbPath *string, args []string, out io.Writer) error {
	pos, err := parse(fs, args, 1, "the set's NAME")
	if err != nil {
		return err
	}
	db, err := openDB(ctx, *dbPath, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.DeleteSet(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted %q\n", pos[0])
	return nil
}

// opt formats an optional figure, "-" when it is absent.
func opt(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}
