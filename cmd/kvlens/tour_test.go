package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/demo"
	"github.com/kvlens/kvlens/tour"
)

func TestTourFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.tour", "50s concurrency 120 \"watch TTFT p95\"\n")
	offScale := file("high.tour", "# booth\n50s concurrency 400 \"x\"\n")
	withFault := file("fault.tour", "50s fault 503:10 \"x\"\n")
	withPair := file("pair.tour", "50s pair rr,kv \"x\"\n")
	// The built-in tour's step at 180 conversations, above a slider of 160.
	top := 0
	for _, st := range tour.Builtin().Steps {
		if st.Action == tour.Concurrency && st.Arg == "180" {
			top = st.Line
		}
	}
	tests := []struct {
		name string
		args []string
		// want is the script played ("" for none), wantErr the refusal.
		want, wantErr string
	}{
		{"no tour by default", nil, "", ""},
		{"--tour plays the built-in tour", []string{"--tour"}, "built-in tour", ""},
		{"--tour=false plays none", []string{"--tour", "--tour=false"}, "", ""},
		{"--tour-file plays a file", []string{"--tour-file", good}, good, ""},
		{"--tour after --tour-file keeps the file", []string{"--tour-file", good, "--tour"}, good, ""},
		{"--tour-file after --tour replaces the built-in tour", []string{"--tour", "--tour-file", good}, good, ""},
		{"a faster tour", []string{"--tour", "--tour-speed", "10"}, "built-in tour", ""},
		{"a missing file is refused", []string{"--tour-file", filepath.Join(dir, "none.tour")}, "", "none.tour: no such file"},
		{"a concurrency off the slider names the line", []string{"--tour-file", offScale}, "", "high.tour line 2: concurrency 400 is outside 60..180"},
		{"the built-in tour needs the slider's scale", []string{"--tour", "--slider-max", "160"}, "", fmt.Sprintf("built-in tour line %d: concurrency 180 is outside 60..160", top)},
		{"faults need the simulated fleet", []string{"--tour-file", withFault, "--workers", "http://w:8000"}, "", "fault.tour line 1: faults can be injected only into the simulated fleet"},
		{"a pair needs the A/B view", []string{"--tour-file", withPair, "--ab", "off"}, "", "pair.tour line 1: a pair needs the A/B view"},
		{"a tour plays over running load", []string{"--tour", "--no-start"}, "", "drop --no-start"},
		{"a speed of zero", []string{"--tour", "--tour-speed", "0"}, "", "--tour-speed must be above 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServe(tt.args)
			if refusedInOneLine(t, err, tt.wantErr) {
				return
			}
			got := ""
			if cfg.Dashboard.Tour != nil {
				got = cfg.Dashboard.Tour.Name
			}
			if got != tt.want {
				t.Fatalf("tour %q, want %q", got, tt.want)
			}
		})
	}
}

func TestABadTourFileStopsKvlensAtStart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "booth.tour")
	if err := os.WriteFile(p, []byte("50s concurrency 120 \"ok\"\n50s restart \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, []string{"--tour-file", p, "--addr", "127.0.0.1:0"}, `booth.tour line 2: action "restart" is unknown`)
}

func TestWarmFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// want is the warm-up and its speed; wantErr the refusal.
		want      time.Duration
		wantSpeed float64
		wantErr   string
	}{
		{"the simulated demo warms up by default", nil, demo.DefaultWarm, demo.DefaultWarmSpeed, ""},
		{"--warm 0 plays none", []string{"--warm", "0"}, 0, demo.DefaultWarmSpeed, ""},
		{"a longer, faster warm-up", []string{"--warm", "3m", "--warm-speed", "6"}, 3 * time.Minute, 6, ""},
		{"real workers do not warm up by default", []string{"--workers", "http://w:8000"}, 0, demo.DefaultWarmSpeed, ""},
		{"--target does not warm up by default", []string{"--target", "http://frontend:8000/v1"}, 0, demo.DefaultWarmSpeed, ""},
		{"--no-start does not warm up by default", []string{"--no-start"}, 0, demo.DefaultWarmSpeed, ""},
		{"--warm with real workers is refused", []string{"--warm", "1m", "--workers", "http://w:8000"}, 0, 0, "real workers (--workers) cannot run ahead"},
		{"--warm with --target is refused", []string{"--warm", "1m", "--target", "http://frontend:8000/v1"}, 0, 0, "with --target kvlens runs no workers"},
		{"--warm with --no-start is refused", []string{"--warm", "1m", "--no-start"}, 0, 0, "with --no-start there is no load"},
		{"a negative warm-up", []string{"--warm", "-1s"}, 0, 0, "--warm must be between 0 (none) and 10m0s, got -1s"},
		{"a warm-up past 10 min", []string{"--warm", "11m"}, 0, 0, "--warm must be between 0 (none) and 10m0s"},
		{"a speed below real time", []string{"--warm-speed", "0.5"}, 0, 0, "--warm-speed must be between 1 and 16, got 0.5"},
		{"a speed past 16", []string{"--warm-speed", "40"}, 0, 0, "--warm-speed must be between 1 and 16"},
		{"a speed that is not a number", []string{"--warm-speed", "NaN"}, 0, 0, "--warm-speed must be between 1 and 16, got NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServe(tt.args)
			if refusedInOneLine(t, err, tt.wantErr) {
				return
			}
			if cfg.Warm != tt.want || cfg.WarmSpeed != tt.wantSpeed {
				t.Fatalf("warm-up %s at %g, want %s at %g", cfg.Warm, cfg.WarmSpeed, tt.want, tt.wantSpeed)
			}
		})
	}
}

// parseServe parses serve's arguments as serve does, without starting
// anything.
func parseServe(args []string) (demo.Config, error) {
	cfg, _, err := serveConfig(args, io.Discard, io.Discard)
	return cfg, err
}

// refusedInOneLine reports whether a case expects a refusal (want is not
// empty), and fails t unless err is then one line holding want, or else nil.
func refusedInOneLine(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("err = %v, want one line with %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

func TestServeDrawsThePolicyCurvesOnlyForTheLoadTheyDescribe(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"the default demo, as `kvlens` runs it", nil, true},
		{"another level lies on the same curves", []string{"--concurrency", "120"}, true},
		{"other turns are another load", []string{"--turns", "3-5"}, false},
		{"another engine profile is another fleet", []string{"--sim-profile", "../../docs/h200-eager44.json"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServe(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := demo.PolicyCurvesFit(cfg); got != tt.want {
				t.Fatalf("the stored policy curves fit: %v, want %v", got, tt.want)
			}
		})
	}
}

func TestServeRefusesBadRetentionAndFrontendURL(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"a retention of 0 keeps every recording", []string{"--recording-retention", "0"}, ""},
		{"a negative retention is refused", []string{"--recording-retention", "-1h"}, "--recording-retention must be 0 (keep them all) or more, got -1h0m0s"},
		{"a frontend URL is taken", []string{"--frontend-metrics", "http://frontend:8000/metrics"}, ""},
		{"a frontend that is not a URL is refused", []string{"--frontend-metrics", "not a url"}, `--frontend-metrics "not a url": want the http:// URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseServe(tt.args)
			refusedInOneLine(t, err, tt.wantErr)
		})
	}
}
