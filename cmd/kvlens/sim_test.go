package main

import (
	"bufio"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestBadSimInvocationsExit2WithOneLineError(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"an unknown profile", []string{"sim", "--profile", "h300"}, "neither a built-in"},
		{"a port that is not a number", []string{"sim", "--ports", "80,eighty"}, `"eighty" is not a port`},
		{"a port given twice", []string{"sim", "--ports", "9001,9001"}, "port 9001 is given twice"},
		{"a stall of a million hours, which left every engine silent for good", []string{"sim", "--stall", "1000000h"}, `invalid value "1000000h" for flag -stall: want at most 24h0m0s`},
		// Each was found as the workers started, with status 1 and no
		// flag named.
		{"an events endpoint without its transport", []string{"sim", "--events-bind", ":5557"}, `kvlens sim: --events-bind ":5557": want tcp://HOST:PORT, such as tcp://*:5557`},
		{"an events port past 65535", []string{"sim", "--events-bind", "tcp://*:99999"}, `--events-bind "tcp://*:99999": want tcp://HOST:PORT`},
		{"events ports that run past 65535, one a worker", []string{"sim", "--events-bind", "tcp://*:65534"}, `--events-bind "tcp://*:65534": worker i takes port 65534 plus i, and 3 workers run past 65535`},
		{"a router to dial that is no endpoint", []string{"sim", "--events-connect", "router"}, `kvlens sim: --events-connect "router": want tcp://HOST:PORT, such as tcp://router:5557`},
		{"a replay port alone", []string{"sim", "--events-bind", "tcp://*:5557", "--events-replay", "5600"}, `kvlens sim: --events-replay "5600": want tcp://HOST:PORT`},
		{"a stray argument", []string{"sim", "extra"}, `unexpected argument "extra"`},
		{"an unknown benchmark", []string{"sim", "bench", "speed"}, `unknown benchmark "speed"`},
		{"a malformed ISL/OSL case", []string{"sim", "bench", "offline", "--cases", "1000x1000"}, "is not ISL/OSL"},
		// Each was found after the cases before it had run, their rows
		// thrown away; the second with status 1, in the profile's words.
		{"a malformed case after a good one", []string{"sim", "bench", "offline", "--cases", "1000/1000,10x"}, `kvlens sim bench offline: --cases: "10x" is not ISL/OSL`},
		{"a case longer than the KV cache holds", []string{"sim", "bench", "offline", "--cases", "1000/1000,1000000/1"}, "--cases: 1000000/1: prompt and answer together must fit the KV cache of profile h200-llama3.1-70b-fp8-tp1, 393600 tokens"},
		{"a case whose sum overflows", []string{"sim", "bench", "offline", "--cases", "9223372036854775807/9223372036854775807"}, "--cases: 9223372036854775807/9223372036854775807: prompt and answer together must fit"},
		{"an empty case list", []string{"sim", "bench", "offline", "--cases", ""}, `--cases: "" is not ISL/OSL`},
		{"a concurrency that is not a number", []string{"sim", "bench", "multiturn", "--concurrency", "forty"}, `--concurrency: "forty" is not a number`},
		// Each ran: 3000 requests, a KV-sized batch, or for hours.
		{"offline requests of none", []string{"sim", "bench", "offline", "--requests", "0"}, "--requests 0: want 1 to 1000000"},
		{"a negative offline concurrency", []string{"sim", "bench", "offline", "--concurrency", "-1"}, "--concurrency -1: want 0 (sized to the KV cache) to 65536"},
		{"a billion offline requests", []string{"sim", "bench", "offline", "--requests", "1000000000"}, "--requests 1000000000: want 1 to 1000000"},
		// Each failed with status 1, in words that named no flag, or after
		// the levels before it had run.
		{"multi-turn chats on no workers", []string{"sim", "bench", "multiturn", "--workers", "0"}, "kvlens sim bench multiturn: --workers 0: want 1 to 1024"},
		{"turns from 5 to 3", []string{"sim", "bench", "multiturn", "--min-turns", "5", "--max-turns", "3"}, "--min-turns 5 and --max-turns 3: want 1 <= min <= max <= 100"},
		{"a level given twice", []string{"sim", "bench", "multiturn", "--concurrency", "40,40"}, "--concurrency: 40 is given twice"},
		{"a bad level after a good one", []string{"sim", "bench", "multiturn", "--concurrency", "40,x"}, `--concurrency: "x" is not a number`},
		{"multi-turn answers longer than the context, which failed at the first request with status 1", []string{"sim", "bench", "multiturn", "--max-tokens", "100000000"}, "kvlens sim bench multiturn: --max-tokens 100000000: the simulated workers (h200-llama3.1-70b-fp8-tp1) hold 16384 tokens"},
		{"a multi-turn measurement of nothing", []string{"sim", "bench", "multiturn", "--measure", "0s"}, "--measure 0s: want at least 1s"},
		// A goroutine and a connection each ran the process out of memory.
		// The clients' side, which sim bench cpu starts itself.
		{"a hundred million client streams, which ran out of memory", []string{"sim", "bench", "cpu-load", "--urls", "http://127.0.0.1:1", "--streams", "100000000"}, "kvlens sim bench cpu-load: --streams 100000000: want 1 to 10000 streams a worker"},
		{"clients of no worker", []string{"sim", "bench", "cpu-load", "--urls", ""}, "kvlens sim bench cpu-load: --urls: no worker URL given"},
		{"clients for no time", []string{"sim", "bench", "cpu-load", "--urls", "http://127.0.0.1:1", "--duration", "0s"}, "--duration 0s: want a positive time"},
		{"a hundred million CPU benchmark streams", []string{"sim", "bench", "cpu", "--streams", "100000000"}, "--streams 100000000: want 1 to 10000 streams a worker"},
		{"a calibration level the seeds never measured", []string{"sim", "calibrate", "--levels", "50"}, "has no round_robin level at 50"},
		{"a calibration policy with no measured counterpart", []string{"sim", "calibrate", "--modes", "random"}, "no measured counterpart"},
		// Found by the first seed's sweep, with status 1.
		{"a calibration of a hundred thousand workers", []string{"sim", "calibrate", "--workers", "100000"}, "kvlens sim calibrate: 100000 workers: at most 1024"},
		{"a calibration running nothing at once", []string{"sim", "calibrate", "--parallel", "0"}, "parallel 0"},
		{"a calibration with no turns", []string{"sim", "calibrate", "--turns", "0"}, `turns "0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused(t, tt.args, tt.wantErr)
		})
	}
}

func TestSimServesAFleetUntilSignalled(t *testing.T) {
	cmd := kvlens("sim", "--count", "2", "--base-port", "0")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var urls []string
	for len(urls) < 2 && sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), " on "); ok {
			u, _, _ := strings.Cut(rest, " ")
			urls = append(urls, u)
		}
	}
	for _, u := range urls {
		resp, err := http.Get(u + "/health")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s/health: %v", u, err)
		}
		resp.Body.Close()
	}
	if len(urls) != 2 {
		t.Fatalf("workers announced: %v, want 2", urls)
	}
	cmd.Process.Signal(syscall.SIGINT)
	go func() {
		for sc.Scan() {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit = %v, want 0", err)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 5 s after SIGINT")
	}
}

// TestBenchReportsMatchGolden pins the benchmark reports (the runs are
// seeded and in virtual time, so their output is exact), the built-in
// baseline sets as list and show print them, and the workload suite.
// Refresh with go test ./cmd/kvlens -run Golden -update.
func TestBenchReportsMatchGolden(t *testing.T) {
	db := filepath.Join(t.TempDir(), "kvlens.db") // holds the built-in sets
	tests := []struct {
		name string
		args []string
	}{
		{"bench_offline", []string{"sim", "bench", "offline", "--cases", "1000/1000,5000/500", "--requests", "200"}},
		{"bench_multiturn", []string{"sim", "bench", "multiturn", "--concurrency", "30", "--warmup", "10s", "--measure", "30s"}},
		{"bench_multiturn_greedy", []string{"sim", "bench", "multiturn", "--concurrency", "30", "--warmup", "10s", "--measure", "30s",
			"--greedy", "--follow-up", "Can you elaborate further on that?"}},
		{"baselines_list", []string{"baselines", "list", "--db", db}},
		{"baselines_show", []string{"baselines", "show", "3×H200 · Llama 3.1 70B FP8 · TRT-LLM · Dynamo 0.9 (averaged, 6 sweeps)", "--db", db}},
		{"workloads", []string{"workloads"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kvlens(tt.args...).Output()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			golden(t, tt.name, string(out))
		})
	}
}

// golden compares a report with testdata/name.golden, or rewrites the file
// with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("report differs from %s:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestSimRefusesAContextLengthItsCacheCannotHold(t *testing.T) {
	tests := []struct {
		name string
		arg  string
	}{
		{"a context longer than the KV cache is refused", "999999999"},
		{"a negative context is refused", "-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kvlens("sim", "--max-model-len", tt.arg).CombinedOutput()
			exit, ok := err.(*exec.ExitError)
			if !ok || exit.ExitCode() != 2 {
				t.Fatalf("exit = %v, want status 2; output:\n%s", err, out)
			}
			if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "--max-model-len "+tt.arg) {
				t.Fatalf("output %q: want one line naming --max-model-len %s", out, tt.arg)
			}
		})
	}
}

func TestSimRefusesAnUnknownTokenizer(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a tokenizer that is neither a name nor a path is refused", []string{"--tokenizer", "sentencepiece"}, "tokenizer: sentencepiece: no such file or directory"},
		{"an unknown chat template is refused", []string{"--chat-template", "chatml"}, `unknown chat template "chatml"`},
		{"a model directory without tokenizer.json is refused, naming the file", []string{"--tokenizer", "."}, "tokenizer: tokenizer.json: no such file or directory"},
		{"a model's files with a built-in template are refused", []string{"--tokenizer", "../../tokenizer/testdata/llama3", "--chat-template", "llama3"}, "brings its own chat template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kvlens(append([]string{"sim"}, tt.args...)...).CombinedOutput()
			exit, ok := err.(*exec.ExitError)
			if !ok || exit.ExitCode() != 2 {
				t.Fatalf("exit = %v, want status 2; output:\n%s", err, out)
			}
			if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("output %q: want one line saying %s", out, tt.want)
			}
		})
	}
}

func TestEventsEndpointsThatPass(t *testing.T) {
	tests := []struct {
		name, flag, endpoint string
		perWorker            bool
	}{
		{"none", "--events-bind", "", true},
		{"vLLM's bind, every interface", "--events-bind", "tcp://*:5557", true},
		{"a port of 0, any free one", "--events-replay", "tcp://127.0.0.1:0", true},
		{"the last ports, one a worker", "--events-bind", "tcp://*:65533", true},
		{"one router port for every worker", "--events-connect", "tcp://router:65535", false},
		{"another transport, the publisher's to check", "--events-connect", "ipc:///tmp/kv.sock", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkEventsEndpoint(tt.flag, tt.endpoint, tt.perWorker, 3); err != nil {
				t.Fatal(err)
			}
		})
	}
}
