package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchKeepsItsRunsThroughCtrlCAndResumes: Ctrl-C in the middle of a
// grid keeps the runs finished in OUT.partial.json, --resume runs only the
// rest, and the reports it writes are those of a grid never interrupted.
func TestBenchKeepsItsRunsThroughCtrlCAndResumes(t *testing.T) {
	dir := t.TempDir()
	grid := []string{"bench", "routing", "--workloads", "chat", "--policies", "rr,kv", "--levels", "8", "--seeds", "1-3",
		"--workers", "2", "--warmup", "10s", "--measure", "2m", "--parallel", "1"}
	if out, err := kvlens(append(grid, "--out", filepath.Join(dir, "whole"))...).CombinedOutput(); err != nil {
		t.Fatalf("the whole grid: %v\n%s", err, out)
	}

	_, log, code := interrupt(t, "[1/6]", append(grid, "--out", filepath.Join(dir, "cut"))...)
	if code != 1 {
		t.Fatalf("exit %d after Ctrl-C, want status 1:\n%s", code, log)
	}
	partial := filepath.Join(dir, "cut.partial.json")
	if !strings.Contains(log, "interrupted after ") || !strings.Contains(log, "--resume "+partial) {
		t.Fatalf("Ctrl-C does not say where the runs are kept:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(dir, "cut.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an interrupted grid wrote its report: %v", err)
	}

	out, err := kvlens("bench", "routing", "--resume", partial).CombinedOutput()
	if err != nil {
		t.Fatalf("--resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "of them done before") {
		t.Fatalf("--resume does not say what was done before:\n%s", out)
	}
	for _, ext := range []string{".json", ".md"} {
		whole, _ := os.ReadFile(filepath.Join(dir, "whole"+ext))
		resumed, err := os.ReadFile(filepath.Join(dir, "cut"+ext))
		if err != nil || !bytes.Equal(whole, resumed) {
			t.Fatalf("the resumed grid's %s differs from the whole grid's (%v):\n%s", ext, err, resumed)
		}
	}
	if _, err := os.Stat(partial); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the partial file outlives the finished grid: %v", err)
	}
	// The finished report is not resumed, and a partial one not drawn.
	if out, err := kvlens("bench", "routing", "--resume", filepath.Join(dir, "cut.json")).CombinedOutput(); err == nil || !strings.Contains(string(out), "holds the whole grid: draw its reports with --from") {
		t.Fatalf("--resume of a finished grid: %v\n%s", err, out)
	}
}
