package main

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets tests run the real command in a subprocess: when
// KVLENS_RUN_MAIN is set, this test binary is kvlens.
func TestMain(m *testing.M) {
	if os.Getenv("KVLENS_RUN_MAIN") == "1" {
		os.Exit(finish(run(os.Args[1:]), stdout, os.Stderr))
	}
	// serve records sessions in the user's data directory by default: keep
	// the tests' kvlens processes out of the real one.
	data, err := os.MkdirTemp("", "kvlens-test-data")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", data)
	code := m.Run()
	os.RemoveAll(data)
	os.Exit(code)
}

// kvlens returns a command that runs kvlens with args.
func kvlens(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	// Under -race the race detector's runtime sleeps 1 s at exit
	// (atexit_sleep_ms), which is not kvlens's and would eat a fifth of
	// the 5 s TestSignalStopsWithinFiveSecondsAndExits0 allows.
	cmd.Env = append(os.Environ(), "KVLENS_RUN_MAIN=1", "GORACE=atexit_sleep_ms=0")
	return cmd
}

func TestHelpListsCommandsAndVersionNamesTheBuild(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // each must appear in the output
	}{
		// --help is kvlens's, not serve's: it lists the subcommands.
		{"--help lists every command", []string{"--help"}, []string{"serve ", "sim ", "sweep ", "baselines ", "recordings ", "plan ", "kvlens COMMAND -h"}},
		{"-h lists every command", []string{"-h"}, []string{"sweep ", "plan "}},
		{"help lists every command", []string{"help"}, []string{"recordings "}},
		// A mistake prints one line and points here.
		{"serve -h lists serve's flags", []string{"serve", "-h"}, []string{"Usage of serve:", "-concurrency"}},
		{"a subcommand's -h names its arguments and lists its flags", []string{"baselines", "show", "-h"}, []string{"Usage: kvlens baselines show NAME [flags]", "-db", "-slo-ttft"}},
		{"a recordings subcommand's -h names its ID", []string{"recordings", "export", "-h"}, []string{"Usage: kvlens recordings export ID [flags]", "-format"}},
		{"bench -h is bench routing's, flags and all", []string{"bench", "-h"}, []string{"Usage: kvlens bench routing", "-policies", "-seeds"}},
		{"trace -h is trace gen's, flags and all", []string{"trace", "-h"}, []string{"-sessions", "-turns"}},
		{"help sweep is sweep -h, not the general help", []string{"help", "sweep"}, []string{"Usage of sweep:", "-levels"}},
		{"help bench routing is bench routing -h", []string{"help", "bench", "routing"}, []string{"Usage: kvlens bench routing", "-resume"}},
		{"sim bench -h lists the benchmarks", []string{"sim", "bench", "-h"}, []string{"sim bench offline", "sim bench multiturn", "Run any of them with -h"}},
		// Both are listed among the commands: they were "unknown command".
		{"help help is the general help", []string{"help", "help"}, []string{"Commands:", "kvlens COMMAND -h"}},
		{"help version says what version prints", []string{"help", "version"}, []string{"Usage: kvlens version"}},
		// A test binary's build info carries the Go version at least.
		{"--version names the Go toolchain", []string{"--version"}, []string{"kvlens ", "go1."}},
		{"version is --version", []string{"version"}, []string{"kvlens ", "go1."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kvlens(tt.args...).CombinedOutput()
			if err != nil {
				t.Fatalf("exit = %v, want 0; output:\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestBadInvocationsExit2WithOneLineError(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		// then is what follows the error when it is not where serve's
		// flags are listed.
		then string
	}{
		{"an unknown flag", []string{"--nope"}, "flag provided but not defined: -nope", ""},
		{"a flag value of the wrong type", []string{"--concurrency", "many"}, `invalid value "many" for flag -concurrency`, ""},
		{"an unknown command lists the commands", []string{"frobnicate"}, `unknown command "frobnicate"`, "Commands:"},
		{"a stray argument", []string{"serve", "extra"}, `unexpected argument "extra"`, ""},
		{"a zero-size fleet", []string{"--sim-workers", "0"}, "--sim-workers must be from 1 to 1024, got 0", ""},
		{"a fleet of a hundred thousand workers", []string{"--sim-workers", "100000"}, "--sim-workers must be from 1 to 1024, got 100000", ""},
		{"a slider whose max is below its min", []string{"--slider-min", "100", "--slider-max", "50"}, "need 0 <= min <= max", ""},
		{"a slider past the most conversations one process drives", []string{"--slider-max", "100000000"}, "--slider-max must be at most 10000 conversations, got 100000000", ""},
		{"a tokenizer that is neither a name nor a path", []string{"--tokenizer", "sentencepiece"}, `invalid value "sentencepiece" for flag -tokenizer: tokenizer: sentencepiece: no such file or directory`, ""},
		{"a model directory without tokenizer.json", []string{"--tokenizer-dir", "."}, `invalid value "." for flag -tokenizer-dir: tokenizer: tokenizer.json: no such file or directory`, ""},
		{"a model directory that auto would not try", []string{"--tokenizer", "embedded", "--tokenizer-dir", "../../tokenizer/testdata/llama3"}, "--tokenizer-dir is tried by --tokenizer auto", ""},
		{"a block of a hundred million tokens, which no prompt fills", []string{"--workers", "http://127.0.0.1:1", "--block-size", "100000000"}, "--block-size must be from 1 to 4096 tokens, as the workers' KV blocks are, got 100000000", ""},
		{"a negative context length", []string{"--max-model-len", "-1"}, "--max-model-len must be 0 (what the workers report) or up to 16777216 tokens, got -1", ""},
		// Request bodies are capped from it: gigabytes each.
		{"a context of two billion tokens, past any model's", []string{"--max-model-len", "2000000000"}, "--max-model-len must be 0 (what the workers report) or up to 16777216 tokens, got 2000000000", ""},
		{"a slider step past its range, which left the slider one position", []string{"--slider-step", "100000"}, "--slider-step 100000: more than the slider's range, 60 to 180", ""},
		{"a batch capacity no engine has, with which no worker read as busy", []string{"--max-batch-size", "100000000"}, "--max-batch-size must be 0 (what each worker reports) or up to 65536, got 100000000", ""},
		{"a viewer cap with room for nobody", []string{"--max-viewers", "0"}, "--max-viewers must be at least 1, got 0", ""},
		{"a per-address viewer cap with room for nobody", []string{"--max-viewers-per-address", "0"}, "--max-viewers-per-address must be at least 1, got 0", ""},
		{"a concurrency off the slider", []string{"--concurrency", "0"}, "--concurrency: concurrency 0 is outside 60..180", ""},
		{"a negative think time", []string{"--think-time", "-5s"}, "--think-time must not be negative, got -5s", ""},
		{"a negative request timeout", []string{"--request-timeout", "-1s"}, "--request-timeout must be 0 (never) or more, got -1s", ""},
		{"answers of no tokens", []string{"--max-tokens", "0"}, "--max-tokens must be at least 1, got 0", ""},
		{"an infinite busy threshold, which the admin API refuses too", []string{"--busy-threshold", "Inf"}, "--busy-threshold must be a positive number, as the admin API's busy_threshold, got +Inf", ""},
		{"a public URL that would run script in the header's link", []string{"--public-url", "javascript:alert(1)"}, `--public-url "javascript:alert(1)": want an http:// or https:// address`, ""},
		{"a public URL without a host", []string{"--public-url", "http://"}, `--public-url "http://": want an http:// or https:// address`, ""},
		{"a target that is not a URL", []string{"--target", ":::"}, `--target ":::": want the OpenAI base URL of a router or worker`, ""},
		{"an empty worker list, as from an unset variable", []string{"--workers", " , "}, `invalid value " , " for flag -workers: no worker in it`, ""},
		{"a target without its scheme", []string{"--target", "frontend:8000/v1"}, `--target "frontend:8000/v1": want the OpenAI base URL`, ""},
		{"a start rate that is not a number", []string{"--target-rps", "NaN"}, "--target-rps must be 0 (start every conversation at once) or a positive rate, got NaN", ""},
		// Each was found as the listener started, with status 1, as if the
		// port were taken.
		{"a listen address of a port alone, without its colon", []string{"--addr", "8080"}, `--addr "8080": want HOST:PORT or :PORT`, ""},
		{"a listen port past 65535", []string{"--addr", ":99999"}, `--addr ":99999": want HOST:PORT or :PORT`, ""},
		{"an unknown policy names its flag, where the demo refused it as it started, with status 1", []string{"--policy", "fastest"}, `kvlens serve: --policy: unknown routing policy "fastest"`, ""},
		{"two policies for the single view", []string{"--policy", "rr,kv"}, "--policy: want one policy, got 2 (--ab compares two)", ""},
		{"an A/B turn too short to settle, which switched policies and compared nothing", []string{"--ab-turn", "10s"}, "--ab-turn must be 0 (the default, 1m30s) or at least 30s, the time a window takes to settle, got 10s", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := refused(t, tt.args, tt.wantErr)
			// The usage would scroll the mistake off the terminal; -h
			// prints it.
			_, rest, _ := strings.Cut(string(out), "\n")
			switch {
			case tt.then == "" && rest != "(kvlens serve -h lists its flags)\n":
				t.Fatalf("after the error, %q; want only where the flags are listed", rest)
			case tt.then != "" && !strings.Contains(rest, tt.then):
				t.Fatalf("after the error, %q; want %q", rest, tt.then)
			}
		})
	}
}

func TestPortInUseNamesThePortAndTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := kvlens("--addr", ln.Addr().String()).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1", err)
	}
	msg := strings.TrimSpace(string(out))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, ln.Addr().String()+" is already in use") || !strings.Contains(msg, "--addr") {
		t.Fatalf("message = %q, want one line naming the address and --addr", msg)
	}
}

// refused runs kvlens with args, checks that it exits with status
// 2 and says want on its first line, and returns what it printed.
func refused(t *testing.T, args []string, want string) []byte {
	t.Helper()
	out, err := kvlens(args...).CombinedOutput()
	exit, ok := err.(*exec.ExitError)
	if !ok || exit.ExitCode() != 2 {
		t.Fatalf("exit = %v, want status 2; output:\n%s", err, out)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if !strings.Contains(first, want) {
		t.Fatalf("first line %q does not say %q", first, want)
	}
	return out
}
