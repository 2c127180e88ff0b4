package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/demo"
	"github.com/kvlens/kvlens/store"
)

// sweepOptionsFor parses sweep's flags from args and configures them.
func sweepOptionsFor(args ...string) (sweepOptions, error) {
	o := sweepOptions{serve: demo.DefaultConfig()}
	fs := sweepFlags(&o, io.Discard)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o, _, err := withWorkload(o, fs, args, io.Discard)
	if err != nil {
		return o, err
	}
	return o, o.configure()
}

func TestSweepWorkersTakeServesForms(t *testing.T) {
	tests := []struct {
		name    string
		workers string
		// want is the number of worker specs; wantErr is in the error.
		want    int
		wantErr string
	}{
		{"plain base URLs are one worker each", "http://127.0.0.1:8001,http://127.0.0.1:8002", 2, ""},
		{"named workers keep their events= and capacity= options", "a=http://127.0.0.1:8001,events=tcp://127.0.0.1:5557,b=http://127.0.0.1:8002,capacity=8", 2, ""},
		{"a dns:// source with an events port is one spec", "dns://vllm.default.svc:8000?events=5557", 1, ""},
		{"a dns:// source and a named worker mix", "dns://vllm:8000,x=http://10.0.0.9:8000,events=tcp://10.0.0.9:5557", 2, ""},

		// Sad path.
		{"a name used twice is refused", "a=http://127.0.0.1:1,a=http://127.0.0.1:2", 0, `--workers: worker 1: name "a" is used twice`},
		{"an events endpoint that is not tcp:// is refused", "a=http://127.0.0.1:1,events=ipc:///tmp/x", 0, `events "ipc:///tmp/x" is not a tcp://host:port endpoint`},
		{"a URL that is not http(s) is refused", "ftp://127.0.0.1:1", 0, "is not an http(s) base URL"},
		{"a dns:// source without a port is refused", "dns://vllm", 0, "want dns://service:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := sweepOptionsFor("--workers", tt.workers)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(o.serve.Workers) != tt.want {
				t.Fatalf("workers %q, want %d specs", o.serve.Workers, tt.want)
			}
		})
	}
}

// storedRun is a run as a sweep started with args stores it.
func storedRun(t *testing.T, id int64, args ...string) store.Run {
	t.Helper()
	o := sweepOptions{serve: demo.DefaultConfig()}
	if err := sweepFlags(&o, io.Discard).Parse(args); err != nil {
		t.Fatal(err)
	}
	o.configure() // a stale run's settings fail; it is stored all the same
	rec, err := json.Marshal(runRecord{Args: args, Sweep: o.sweep})
	if err != nil {
		t.Fatal(err)
	}
	return store.Run{ID: id, Config: rec, Status: store.RunRunning, Total: 2}
}

func TestResumeTakesTheStoredSettings(t *testing.T) {
	now := sweepOptions{db: "/now.db", out: "/now-out", serve: demo.Config{Addr: "127.0.0.1:7000"}}
	tests := []struct {
		name  string
		run   store.Run
		given []string // flags given with --resume
		// wantAddr and wantOut are the options used; wantTook is in the
		// line that says where they came from.
		wantAddr, wantOut, wantTook, wantErr string
	}{
		{"the stored --addr and --out are used when none is given now",
			storedRun(t, 1, "--levels", "2,3", "--modes", "rr", "--addr", "127.0.0.1:9999", "--out", "/then"), nil,
			"127.0.0.1:9999", "/then", "--addr 127.0.0.1:9999 (stored), --out /then (stored)", ""},
		{"a run stored without --addr keeps sweep's default address",
			storedRun(t, 2, "--levels", "2,3", "--modes", "rr"), nil,
			"127.0.0.1:0", ".", "--addr 127.0.0.1:0 (stored)", ""},
		{"an --addr given now wins over the stored one, and says so",
			storedRun(t, 3, "--levels", "2,3", "--modes", "rr", "--addr", "127.0.0.1:9999"), []string{"addr"},
			"127.0.0.1:7000", ".", "--addr 127.0.0.1:7000 (given now)", ""},
		{"an --out given now wins over the stored one",
			storedRun(t, 4, "--levels", "2,3", "--modes", "rr", "--out", "/then"), []string{"out"},
			"127.0.0.1:0", "/now-out", "--out /now-out (given now)", ""},
		{"stored workers in serve's named form are taken",
			storedRun(t, 5, "--levels", "2", "--modes", "rr", "--workers", "a=http://127.0.0.1:1,events=tcp://127.0.0.1:2"), nil,
			"127.0.0.1:0", ".", "(stored)", ""},
		{"the stored command line is shown as it would be typed",
			storedRun(t, 9, "--levels", "2", "--modes", "rr", "--name", "booth's sweep"), nil,
			"127.0.0.1:0", ".", `stored command line: kvlens sweep --levels 2 --modes rr --name 'booth'\''s sweep';`, ""},

		// Sad path.
		{"stored settings that fail today's checks are refused, naming the run",
			storedRun(t, 6, "--levels", "2", "--workers", "a=http://127.0.0.1:1,a=http://127.0.0.1:2"), nil,
			"", "", "", `run 6 (started , 0 of 2 levels done): its stored settings fail the checks: --workers: worker 1: name "a" is used twice`},
		{"settings that are not JSON are refused",
			store.Run{ID: 7, Config: []byte("{")}, nil,
			"", "", "", "run 7: its stored settings are unreadable"},
		{"a stored flag this kvlens does not know is refused",
			func() store.Run { r := storedRun(t, 8); r.Config = []byte(`{"args":["--frobnicate"]}`); return r }(), nil,
			"", "", "", `run 8: its stored command line "--frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			given := map[string]bool{"resume": true}
			for _, g := range tt.given {
				given[g] = true
			}
			o, took, err := resumed(tt.run, now, given)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.serve.Addr != tt.wantAddr || o.out != tt.wantOut || o.db != now.db {
				t.Errorf("addr %q, out %q, db %q; want %q, %q, %q", o.serve.Addr, o.out, o.db, tt.wantAddr, tt.wantOut, now.db)
			}
			if !strings.Contains(took, tt.wantTook) {
				t.Errorf("said %q, want %q", took, tt.wantTook)
			}
		})
	}
}

func TestResumeRefusesFlagsItWouldIgnore(t *testing.T) {
	tests := []struct {
		name    string
		given   []string
		wantErr string // empty means accepted
	}{
		{"the run, store, address and report directory go with --resume", []string{"resume", "run", "db", "addr", "out"}, ""},

		// Sad path.
		{"a setting of the run is refused, not silently ignored", []string{"resume", "levels"}, "drop --levels"},
		{"every such flag is named", []string{"resume", "modes", "warmup"}, "drop --modes, --warmup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			given := map[string]bool{}
			for _, g := range tt.given {
				given[g] = true
			}
			err := checkResumeFlags(given)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestARefusedSweepLeavesNoRunBehind runs sweeps that fail before measuring
// anything, then checks that the store holds no run for --resume to pick,
// and that --resume skips a stale run an older kvlens left, saying so.
func TestARefusedSweepLeavesNoRunBehind(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name     string
		args     []string
		wantExit int
		want     string // on the first line
	}{
		{"workers that fail the check", []string{"--workers", "a=http://127.0.0.1:1,a=http://127.0.0.1:2"}, 2, `name "a" is used twice`},
		{"an address already in use", []string{"--addr", busy.Addr().String()}, 1, "already in use"},
		{"a set name already stored", []string{"--name", "3×H200 · Llama 3.1 70B FP8 · TRT-LLM · Dynamo 0.9 (averaged, 6 sweeps)"}, 2, "is already stored"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "kvlens.db")
			// Short levels, in case a sweep that should be refused runs.
			args := append([]string{"sweep", "--db", db, "--levels", "2", "--modes", "rr", "--warmup", "0s", "--measure", "1s", "--snapshots", "1"}, tt.args...)
			out, code := exitCode(t, kvlens(args...))
			if code != tt.wantExit {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tt.wantExit, out)
			}
			if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, tt.want) {
				t.Fatalf("first line %q does not say %q", first, tt.want)
			}
			s, err := store.Open(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if runs, err := s.UnfinishedRuns(context.Background()); err != nil || len(runs) != 0 {
				t.Fatalf("the refused sweep left runs %+v (%v)", runs, err)
			}
		})
	}

	t.Run("a stale run is skipped by --resume, and named with --run", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "kvlens.db")
		s, err := store.Open(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		stale := storedRun(t, 0, "--levels", "2", "--workers", "a=http://127.0.0.1:1,a=http://127.0.0.1:2")
		if _, err := s.CreateRun(context.Background(), stale.Config, 1); err != nil {
			t.Fatal(err)
		}
		s.Close()
		out, code := exitCode(t, kvlens("sweep", "--db", db, "--resume"))
		if code != 1 || !strings.Contains(out, "skipping run 1 (started ") || !strings.Contains(out, "no unfinished sweep run can be continued (1 skipped)") {
			t.Fatalf("--resume: exit %d, output:\n%s", code, out)
		}
		out, code = exitCode(t, kvlens("sweep", "--db", db, "--resume", "--run", "1"))
		if code != 1 || !strings.Contains(out, "--resume: run 1 (started ") || !strings.Contains(out, "fail the checks") {
			t.Fatalf("--resume --run 1: exit %d, output:\n%s", code, out)
		}
	})
}
