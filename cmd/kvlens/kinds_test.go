package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileKindNamesKvlensFiles(t *testing.T) {
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"a bench report", read("../../docs/routing-bench.json"), kindBench},
		{"an interrupted grid", []byte(`{"partial":true,"policies":["kv"],"workloads":["chat"],"runs":[]}`), kindPartial},
		{"a seed's reference file", []byte(dualJSON), kindBaselines},
		{"an engine profile", read("../../docs/h200-candidate.json"), kindProfile},
		{"a trace, by its first line", []byte(`{"timestamp":0,"input_length":10,"output_length":5,"hash_ids":[1]}` + "\n{}\n"), kindTrace},
		{"a recording export", []byte(`{"id":1,"name":"x","started":"2025-01-01T00:00:00Z","frames":[]}`), kindRecording},
		{"a broken bench report is still one, for its reader to pick apart", []byte(`{"policies":1,"workloads":2,"runs":3}`), kindBench},
		// Unknown: the caller's own reader says what is wrong.
		{"JSON of nothing kvlens writes", []byte(`{"hello":"world"}`), ""},
		{"not JSON", []byte("\x00\x01"), ""},
		{"a JSON array", []byte(`[1,2]`), ""},
		{"empty", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fileKind(tt.data); got != tt.want {
				t.Fatalf("fileKind = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBenchReadsNameAFileOfAnotherKind: --from and --resume given another of
// kvlens's files say what it is, where they said "unknown field" of its
// first field.
func TestBenchReadsNameAFileOfAnotherKind(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "set.json")
	if err := os.WriteFile(set, []byte(dualJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a baseline set to draw", []string{"--from", set}, "--from: " + set + " is a baseline set (kvlens baselines import reads it), not a report of kvlens bench routing"},
		{"a baseline set to finish", []string{"--resume", set}, "--resume: " + set + " is a baseline set (kvlens baselines import reads it), not an interrupted grid"},
		{"an engine profile to draw", []string{"--from", "../../docs/h200-candidate.json"}, "h200-candidate.json is an engine profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := exitCode(t, kvlens(append([]string{"bench", "routing", "--out", filepath.Join(dir, "out")}, tt.args...)...))
			if code != 1 || strings.Count(out, "\n") != 1 || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, output:\n%s\nwant exit 1 and one line with %q", code, out, tt.want)
			}
		})
	}
}
