package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interrupt runs kvlens with args, sends it Ctrl-C (SIGINT) once its stderr
// says after, and returns what it printed and its exit status.
func interrupt(t *testing.T, after string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := kvlens(args...)
	var out strings.Builder
	cmd.Stdout = &out
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(pipe)
	sent := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !sent && strings.Contains(sc.Text(), after) {
			cmd.Process.Signal(syscall.SIGINT)
			sent = true
		}
	}
	err = cmd.Wait()
	if !sent {
		t.Fatalf("%v ended (%v) before saying %q:\n%s", args, err, after, log.String())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), log.String(), code
}

// TestCtrlCKeepsWhatWasDone: Ctrl-C in the middle of a long command keeps
// the work finished, or says plainly that nothing is kept and why, and
// exits 1.
func TestCtrlCKeepsWhatWasDone(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "plan.png")
	tests := []struct {
		name  string
		args  []string
		after string // the stderr line that Ctrl-C follows
		// stdout and stderr must hold these.
		stdout, stderr []string
		// file, when set, must exist afterwards.
		file string
	}{
		{"plan prints and charts the envelopes found, where it said only 'context canceled'",
			[]string{"plan", "--modes", "rr,kv", "--workers", "1,2,3,4,6,8", "--warmup", "10s", "--measure", "20s", "--out", chart},
			"round_robin, 2 workers",
			[]string{"round_robin        1"}, []string{"interrupted after ", " of 12 envelopes: these are the ones found"}, chart},
		{"plan --study prints the rows finished, where Ctrl-C lost the whole table",
			[]string{"plan", "--study", "1,2,3,4,5,6", "--study-load", "10", "--warmup", "10s", "--measure", "20s"},
			"--study: 1 workers done",
			[]string{"| 1 | round_robin (queue) | 10 |"}, []string{"interrupted after ", " of 18 rows: these are the ones finished"}, ""},
		{"sim calibrate says that no table is written, where it named a seed's 'context canceled'",
			[]string{"sim", "calibrate", "--levels", "60-180/20", "--seeds", "1-3", "--parallel", "1", "--warmup", "10s", "--measure", "20s"},
			"[1/42]",
			nil, []string{"interrupted after ", " of 42 levels: the table averages every level over all the seeds, so none is written"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := interrupt(t, tt.after, tt.args...)
			if code != 1 {
				t.Fatalf("exit %d after Ctrl-C, want 1; stderr:\n%s", code, stderr)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.file != "" {
				if _, err := os.Stat(tt.file); err != nil {
					t.Errorf("%v", err)
				}
			}
		})
	}
}

// TestTraceGenCtrlCLeavesTheOldFile: Ctrl-C while trace gen writes a large
// trace leaves the file it would replace as it was, and nothing beside it;
// it left a truncated trace, which replays as a shorter one when cut at a
// line's end.
func TestTraceGenCtrlCLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "trace.jsonl")
	old := []byte(`{"timestamp":0,"input_length":10,"output_length":5,"hash_ids":[1]}` + "\n")
	if err := os.WriteFile(out, old, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := kvlens("trace", "gen", "--sessions", "1000000", "--out", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A million sessions take seconds to make and write; a half is in it.
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if err == nil {
		t.Skip("trace gen finished before Ctrl-C reached it")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit %v after Ctrl-C, want status 1; stderr:\n%s", err, stderr.String())
	}
	if want := "interrupted: " + out + " is left as it was"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, stderr.String())
	}
	if got, _ := os.ReadFile(out); string(got) != string(old) {
		t.Fatalf("the old trace was replaced by %d bytes", len(got))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("left beside it: %v", entries)
	}
}
