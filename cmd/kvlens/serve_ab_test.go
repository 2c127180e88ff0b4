package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/demo"
)

func TestABFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string // the pair, comma-separated; "" is the single view
		wantErr string
	}{
		{"no flags compare round-robin with kv", nil, "round_robin,kv", ""},
		{"a pair takes the policies' short names", []string{"--ab", "least-loaded,dynamo"}, "least_loaded,dynamo", ""},
		{"rr is round-robin", []string{"--ab", "kv,rr"}, "kv,round_robin", ""},
		{"off is the single view", []string{"--ab", "off"}, "", ""},
		{"real workers alone get the single view", []string{"--workers", "http://a:8000"}, "", ""},
		{"real workers with --ab take turns", []string{"--workers", "http://a:8000", "--ab", "rr,kv"}, "round_robin,kv", ""},
		{"--policy alone is the single view's policy", []string{"--policy", "kv"}, "", ""},
		{"a target alone gets the single view", []string{"--target", "http://f:8000/v1"}, "", ""},
		{"one policy is refused", []string{"--ab", "kv"}, "", "want two policies"},
		{"an unknown policy is refused", []string{"--ab", "rr,fastest"}, "", `unknown routing policy "fastest"`},
		{"the same policy twice is refused, naming the flag given", []string{"--ab", "kv,kv"}, "", "flag -ab: kv is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := demo.DefaultConfig()
			var acc accessFlags
			fs := serveFlags(&cfg, &acc, io.Discard)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			set := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			abDefault(&cfg, set)
			if got := strings.Join(cfg.AB, ","); got != tt.want {
				t.Fatalf("pair = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPolicyFlagTakesWhatABTakes: --policy reads its name as --ab reads
// its pair; "rr" was refused as the demo started, with status 1.
func TestPolicyFlagTakesWhatABTakes(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"the default is round-robin", nil, "round_robin", ""},
		{"rr is round-robin", []string{"--policy", "rr"}, "round_robin", ""},
		{"a dash for an underscore, in capitals", []string{"--policy", "Least-Loaded"}, "least_loaded", ""},
		{"an unknown policy names the flag", []string{"--policy", "fastest"}, "", `--policy: unknown routing policy "fastest"`},
		{"two policies are --ab's", []string{"--policy", "rr,kv"}, "", "--policy: want one policy, got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServe(tt.args)
			if refusedInOneLine(t, err, tt.wantErr) {
				return
			}
			if cfg.Policy != tt.want {
				t.Fatalf("policy %q, want %q", cfg.Policy, tt.want)
			}
		})
	}
}
