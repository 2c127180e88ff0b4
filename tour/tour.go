// Package tour reads and plays a booth's tour: a looping script of steps,
// each a change to the demo (concurrency, a cache reset, a fault, the A/B
// pair) held for a while, with a caption telling visitors what to watch.
//
// A script is a text file, one step a line:
//
//	# comments and blank lines are ignored
//	50s concurrency 120 "Both sides at 120 conversations: watch TTFT p95."
//	50s reset "Every cache was emptied: watch the KV hit tile climb back."
//	40s fault 503:10 "One request in ten fails: watch the Errors tile."
//	40s fault none "Faults off."
//	50s pair rr,kv "Round-robin (A) against KV-aware (B)."
//	30s watch "Nothing changes: watch the headline settle."
//
// The duration is Go's (30s, 1m30s); the caption is a double-quoted string
// with Go's escapes.
package tour

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kvlens/kvlens/router"
)

// The actions a step may take.
const (
	// Concurrency sets every lane's simultaneous conversations to Arg.
	Concurrency = "concurrency"
	// Reset drops every worker's prefix cache, the routers' indexes and the
	// metrics windows.
	Reset = "reset"
	// Fault injects Arg ("503:10", "slow:2", "none") into every simulated
	// worker.
	Fault = "fault"
	// Pair sets lane A's and lane B's policies to Arg ("round_robin,kv").
	Pair = "pair"
	// Watch changes nothing: the caption points at what is already there.
	Watch = "watch"
)

// Limits on a script, so that a typo cannot make a step last a day or a
// caption push the dashboard's charts off the screen.
const (
	MinStep    = time.Second
	MaxStep    = time.Hour
	MaxSteps   = 100
	MaxCaption = 120 // characters: one line of the dashboard at 1920 px
	maxFile    = 64 << 10
)

// Step is one line of a script.
type Step struct {
	// Line is the step's line number in its file, for messages.
	Line int
	// For is how long the step lasts before the next begins.
	For time.Duration
	// Action is one of Concurrency, Reset, Fault, Pair and Watch.
	Action string
	// Arg is the action's value: a concurrency ("120"), a fault ("503:10"),
	// a pair of policies ("round_robin,kv"); empty for Reset and Watch.
	Arg string
	// Caption tells visitors what to watch during the step.
	Caption string
}

// Script is a parsed tour.
type Script struct {
	// Name is where the script came from: its path, or "built-in tour".
	Name  string
	Steps []Step
}

// Length is one loop's duration.
func (s *Script) Length() time.Duration {
	var d time.Duration
	for _, st := range s.Steps {
		d += st.For
	}
	return d
}

//go:embed builtin.tour
var builtin string

// Builtin is the tour `kvlens --tour` plays: the A/B pair at 60, 120 and
// 180 conversations, a cache reset and a fault.
func Builtin() *Script {
	s, err := Parse("built-in tour", strings.NewReader(builtin))
	if err != nil {
		panic(err) // TestBuiltinParses keeps this from happening
	}
	return s
}

// Load reads a script from a file.
func Load(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tour: %w", err)
	}
	defer f.Close()
	return Parse(path, f)
}

// Parse reads a script; name names it in errors, which are one line and
// give the line number: "tour.txt line 3: …".
func Parse(name string, r io.Reader) (*Script, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("tour %s: %w", name, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("tour %s: longer than %d KiB; a tour is a few lines", name, maxFile>>10)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("tour %s: not UTF-8 text", name)
	}
	s := &Script{Name: name}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		st, err := parseStep(line)
		if err != nil {
			return nil, fmt.Errorf("tour %s line %d: %w", name, i+1, err)
		}
		if len(s.Steps) == MaxSteps {
			return nil, fmt.Errorf("tour %s line %d: more than %d steps", name, i+1, MaxSteps)
		}
		st.Line = i + 1
		s.Steps = append(s.Steps, st)
	}
	if len(s.Steps) == 0 {
		return nil, fmt.Errorf("tour %s: no steps; a step is a line such as 50s concurrency 120 \"watch TTFT p95\"", name)
	}
	return s, nil
}

// parseStep reads one line: DURATION ACTION [VALUE] "CAPTION".
func parseStep(line string) (Step, error) {
	head, quoted, ok := strings.Cut(line, `"`)
	if !ok {
		return Step{}, errors.New(`no caption: end the line with one in double quotes, such as "watch TTFT p95"`)
	}
	caption, err := strconv.Unquote(`"` + quoted)
	if err != nil {
		return Step{}, errors.New(`the caption must be one double-quoted string ending the line (write \" for a quote inside it)`)
	}
	caption = strings.TrimSpace(caption)
	switch {
	case caption == "":
		return Step{}, errors.New("the caption is empty: say what visitors should watch")
	case utf8.RuneCountInString(caption) > MaxCaption:
		return Step{}, fmt.Errorf("the caption has %d characters; at most %d fit the dashboard", utf8.RuneCountInString(caption), MaxCaption)
	case strings.IndexFunc(caption, unicode.IsControl) >= 0:
		return Step{}, errors.New("the caption holds a control character (a line break or tab); keep it to one line")
	}
	f := strings.Fields(head)
	if len(f) < 2 {
		return Step{}, errors.New("want DURATION ACTION [VALUE] \"CAPTION\", such as 50s concurrency 120 \"watch TTFT p95\"")
	}
	d, err := time.ParseDuration(f[0])
	switch {
	case err != nil:
		return Step{}, fmt.Errorf("duration %q: want one such as 45s or 1m30s", f[0])
	case d < MinStep || d > MaxStep:
		return Step{}, fmt.Errorf("duration %s: a step lasts from %s to %s", f[0], MinStep, time.Duration(MaxStep))
	}
	st := Step{For: d, Action: f[1], Caption: caption}
	args := f[2:]
	want := 1
	switch st.Action {
	case Reset, Watch:
		want = 0
	case Concurrency, Fault, Pair:
	default:
		return Step{}, fmt.Errorf("action %q is unknown (want concurrency, reset, fault, pair or watch)", f[1])
	}
	if len(args) != want {
		if want == 0 {
			return Step{}, fmt.Errorf("%s takes no value, got %q", st.Action, strings.Join(args, " "))
		}
		return Step{}, fmt.Errorf("%s takes one value (%s), got %d", st.Action, example(st.Action), len(args))
	}
	if want == 0 {
		return st, nil
	}
	st.Arg = args[0]
	switch st.Action {
	case Concurrency:
		if n, err := strconv.Atoi(st.Arg); err != nil || n < 1 {
			return Step{}, fmt.Errorf("concurrency %q is not a positive whole number", st.Arg)
		}
	case Pair:
		p, err := parsePair(st.Arg)
		if err != nil {
			return Step{}, err
		}
		st.Arg = p[0] + "," + p[1]
	}
	// A fault's value is checked against the fleet's faults by the
	// dashboard (web.CheckTour), which knows them.
	return st, nil
}

func example(action string) string {
	switch action {
	case Concurrency:
		return "such as 120"
	case Fault:
		return "such as 503:10, slow:2 or none"
	}
	return "such as rr,kv"
}

// parsePair reads "rr,kv": two routing policies, lane A's then lane B's,
// written as --ab takes them.
func parsePair(v string) ([2]string, error) {
	parts := strings.Split(v, ",")
	if len(parts) != 2 {
		return [2]string{}, fmt.Errorf("pair %q: want two policies, lane A's and lane B's, such as rr,kv", v)
	}
	var p [2]string
	for i, name := range parts {
		name = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")
		if name == "rr" {
			name = "round_robin"
		}
		if !slices.Contains(router.Policies, name) {
			return [2]string{}, fmt.Errorf("pair %q: policy %q is unknown (available: rr, %s)", v, parts[i], strings.Join(router.Policies, ", "))
		}
		p[i] = name
	}
	return p, nil
}

// PairOf splits a Pair step's value into lane A's policy and lane B's.
func PairOf(st Step) [2]string {
	a, b, _ := strings.Cut(st.Arg, ",")
	return [2]string{a, b}
}
