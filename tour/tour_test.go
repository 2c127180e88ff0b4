package tour

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/internal/clocktest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []Step
	}{
		{
			// Every action, with comments and blank lines skipped and the
			// line numbers those leave.
			name: "every action parses, skipping comments and blank lines",
			file: "# a tour\n\n50s concurrency 120 \"watch TTFT p95\"\n  1m reset \"watch the hit rate\"  \n40s fault 503:10 \"watch errors\"\n2s fault none \"faults off\"\n1m30s pair rr,kv \"A against B\"\n10s watch \"look\"\n",
			want: []Step{
				{Line: 3, For: 50 * time.Second, Action: Concurrency, Arg: "120", Caption: "watch TTFT p95"},
				{Line: 4, For: time.Minute, Action: Reset, Caption: "watch the hit rate"},
				{Line: 5, For: 40 * time.Second, Action: Fault, Arg: "503:10", Caption: "watch errors"},
				{Line: 6, For: 2 * time.Second, Action: Fault, Arg: "none", Caption: "faults off"},
				{Line: 7, For: 90 * time.Second, Action: Pair, Arg: "round_robin,kv", Caption: "A against B"},
				{Line: 8, For: 10 * time.Second, Action: Watch, Caption: "look"},
			},
		},
		{
			// A caption keeps Go's escapes and loses surrounding spaces;
			// a pair is written as --ab takes it, and stored by full name.
			name: "a caption keeps its escapes and a pair is stored by full name",
			file: "5s pair Least-Loaded,KV \" say \\\"hi\\\" \"",
			want: []Step{{Line: 1, For: 5 * time.Second, Action: Pair, Arg: "least_loaded,kv", Caption: `say "hi"`}},
		},
		{
			// Windows line endings parse as Unix ones.
			name: "Windows line endings parse as Unix ones",
			file: "5s reset \"a\"\r\n6s watch \"b\"\r\n",
			want: []Step{{Line: 1, For: 5 * time.Second, Action: Reset, Caption: "a"}, {Line: 2, For: 6 * time.Second, Action: Watch, Caption: "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.tour", strings.NewReader(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Steps, tt.want) {
				t.Errorf("steps\n got %+v\nwant %+v", s.Steps, tt.want)
			}
		})
	}
}

func TestParseRefusesBadFilesInOneLineNamingTheLine(t *testing.T) {
	long := strings.Repeat("x", MaxCaption+1)
	many := strings.Repeat("1s watch \"x\"\n", MaxSteps+1)
	tests := []struct {
		name, file string
		// want is in the error; every error also names the file.
		want string
	}{
		{"nothing but comments", "# only\n\n", "no steps"},
		{"no caption", "50s concurrency 120", `line 1: no caption`},
		{"unterminated caption", "# c\n50s reset \"watch", `line 2: the caption must be one double-quoted string`},
		{"text after the caption", "50s reset \"watch\" more", `line 1: the caption must be one double-quoted string`},
		{"empty caption", "50s reset \"  \"", "line 1: the caption is empty"},
		{"caption too long", "50s reset \"" + long + "\"", "line 1: the caption has 121 characters; at most 120"},
		{"line break in the caption", `50s reset "a\nb"`, "line 1: the caption holds a control character"},
		{"duration missing", "reset \"x\"", "line 1: want DURATION ACTION"},
		{"duration without unit", "50 reset \"x\"", `line 1: duration "50"`},
		{"duration too short", "500ms reset \"x\"", "line 1: duration 500ms: a step lasts from 1s to 1h0m0s"},
		{"duration too long", "2h reset \"x\"", "line 1: duration 2h"},
		{"negative duration", "-5s reset \"x\"", "line 1: duration -5s"},
		{"unknown action", "5s restart \"x\"", `line 1: action "restart" is unknown`},
		{"concurrency without value", "5s concurrency \"x\"", "line 1: concurrency takes one value (such as 120), got 0"},
		{"concurrency not a number", "5s concurrency lots \"x\"", `line 1: concurrency "lots" is not a positive whole number`},
		{"concurrency zero", "5s concurrency 0 \"x\"", `line 1: concurrency "0"`},
		{"reset with a value", "5s reset all \"x\"", `line 1: reset takes no value, got "all"`},
		{"fault with two values", "5s fault 503 10 \"x\"", "line 1: fault takes one value (such as 503:10, slow:2 or none), got 2"},
		{"pair of one", "5s pair kv \"x\"", `line 1: pair "kv": want two policies`},
		{"pair with an unknown policy", "5s pair rr,smart \"x\"", `line 1: pair "rr,smart": policy "smart" is unknown`},
		{"too many steps", many, "line 101: more than 100 steps"},
		{"not text", "5s reset \"\xff\"", "not UTF-8"},
		{"too big", strings.Repeat("#", maxFile+1), "longer than 64 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("my.tour", strings.NewReader(tt.file))
			if err == nil {
				t.Fatalf("parsed; want an error with %q", tt.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || !strings.HasPrefix(msg, "tour my.tour") || strings.Contains(msg, "\n") {
				t.Errorf("error %q; want one line naming my.tour, with %q", msg, tt.want)
			}
		})
	}
}

func TestBuiltinParses(t *testing.T) {
	s := Builtin()
	if len(s.Steps) < 5 {
		t.Fatalf("the built-in tour has %d steps", len(s.Steps))
	}
	// Every change begins a window whose TTFT settles in 30 s
	// (web.SettleTime), whose figures read at an answer's end settle about
	// a request's length later and whose rates later still, 55-100 s after
	// a change at 60-180 conversations (docs/dashboard.md, measured with
	// the tour itself): each step must outlast them, so visitors see
	// settled figures. This holds the floor; the table there, each step.
	for _, st := range s.Steps {
		if st.For < time.Minute {
			t.Errorf("line %d lasts %s; want at least 60 s, for its window to settle", st.Line, st.For)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "booth.tour")
	if err := os.WriteFile(path, []byte("5s reset \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil || s.Name != path || len(s.Steps) != 1 {
		t.Fatalf("Load = %+v, %v", s, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.tour")); err == nil || !strings.Contains(err.Error(), "missing.tour") {
		t.Fatalf("a missing file: %v; want an error naming it", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(builtin)
	f.Add("5s pair rr,kv \"x\"\n# c\n1m fault slow:2 \"\\u00e9\"")
	f.Add("5s reset \"unterminated")
	f.Fuzz(func(t *testing.T, file string) {
		s, err := Parse("fuzz", strings.NewReader(file))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		if len(s.Steps) == 0 || len(s.Steps) > MaxSteps {
			t.Fatalf("%d steps parsed", len(s.Steps))
		}
		for _, st := range s.Steps {
			if st.For < MinStep || st.For > MaxStep || st.Caption == "" || strings.ContainsAny(st.Caption, "\n\r") {
				t.Fatalf("step %+v is out of bounds", st)
			}
		}
	})
}

func TestPlayerPlaysStepsInOrderLoopsAndPausesOnAnOperatorAction(t *testing.T) {
	s, err := Parse("t", strings.NewReader("10s concurrency 60 \"one\"\n20s reset \"two\"\n30s fault 503:10 \"three\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.NewInline(time.Unix(1000, 0))
	var mu sync.Mutex
	var done []string
	do := func(st Step) error {
		mu.Lock()
		defer mu.Unlock()
		done = append(done, st.Caption)
		if st.Action == Reset {
			return errors.New("worker sim-1 did not answer")
		}
		return nil
	}
	// At speed 2 the 10 s, 20 s and 30 s steps last 5, 10 and 15 s.
	p := NewPlayer(s, clk, 2, do)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	waitFor(t, func() bool { return p.Status().Left > 0 })

	steps := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(done, ",")
	}
	check := func(what string, want Status, wantDone string) {
		t.Helper()
		got := p.Status()
		if got != want || steps() != wantDone {
			t.Errorf("%s: status %+v, steps %s\nwant %+v, steps %s", what, got, steps(), want, wantDone)
		}
	}
	check("at the start", Status{Step: 1, Steps: 3, Caption: "one", Left: 5 * time.Second, Length: 5 * time.Second}, "one")
	clk.Advance(2 * time.Second)
	check("2 s in", Status{Step: 1, Steps: 3, Caption: "one", Left: 3 * time.Second, Length: 5 * time.Second}, "one")
	clk.Advance(3 * time.Second)
	// A step whose change failed says why, and the tour goes on.
	check("step 2", Status{Step: 2, Steps: 3, Caption: "two", Left: 10 * time.Second, Length: 10 * time.Second, Err: "worker sim-1 did not answer"}, "one,two")
	clk.Advance(10 * time.Second)
	check("step 3", Status{Step: 3, Steps: 3, Caption: "three", Left: 15 * time.Second, Length: 15 * time.Second}, "one,two,three")
	clk.Advance(15 * time.Second)
	check("the second loop", Status{Step: 1, Steps: 3, Caption: "one", Left: 5 * time.Second, Length: 5 * time.Second, Loop: 1}, "one,two,three,one")

	// The operator takes over: nothing more plays, however long it waits.
	clk.Advance(time.Second)
	if !p.Pause() {
		t.Fatal("Pause says the tour was not playing")
	}
	if p.Pause() {
		t.Error("a second Pause says the tour was playing")
	}
	clk.Advance(time.Hour)
	check("paused", Status{Step: 1, Steps: 3, Caption: "one", Length: 5 * time.Second, Paused: true, Loop: 1}, "one,two,three,one")

	// Resume plays the next step, with its full length.
	if !p.Resume() {
		t.Fatal("Resume says the tour was not paused")
	}
	if p.Resume() {
		t.Error("a second Resume says the tour was paused")
	}
	check("resumed", Status{Step: 2, Steps: 3, Caption: "two", Left: 10 * time.Second, Length: 10 * time.Second, Loop: 1, Err: "worker sim-1 did not answer"}, "one,two,three,one,two")
	clk.Advance(10 * time.Second)
	check("after resuming", Status{Step: 3, Steps: 3, Caption: "three", Left: 15 * time.Second, Length: 15 * time.Second, Loop: 1}, "one,two,three,one,two,three")

	// Paused in the last step, Resume goes on to the first.
	p.Pause()
	p.Resume()
	check("resumed from the last step", Status{Step: 1, Steps: 3, Caption: "one", Left: 5 * time.Second, Length: 5 * time.Second, Loop: 2}, "one,two,three,one,two,three,one")
}

func TestPlayerIgnoresPauseAndResumeBeforeItStarts(t *testing.T) {
	s, _ := Parse("t", strings.NewReader("10s watch \"one\"\n"))
	p := NewPlayer(s, clocktest.NewInline(time.Time{}), 1, func(Step) error { return nil })
	if p.Pause() || p.Resume() {
		t.Fatal("a player that has not started paused or resumed")
	}
	if st := p.Status(); st.Step != 1 || st.Left != 0 || st.Paused {
		t.Fatalf("status before the start: %+v", st)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestTheDocsExampleParses keeps docs/dashboard.md's example tour file in
// step with the parser.
func TestTheDocsExampleParses(t *testing.T) {
	b, err := os.ReadFile("../docs/dashboard.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "### A tour file")
	_, block, ok2 := strings.Cut(after, "```text\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/dashboard.md has no example tour file under \"### A tour file\"")
	}
	s, err := Parse("docs/dashboard.md", strings.NewReader(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) < 5 {
		t.Fatalf("the example has %d steps", len(s.Steps))
	}
}
