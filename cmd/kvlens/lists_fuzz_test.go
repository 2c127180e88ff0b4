package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
)

// FuzzParseModes reads any --modes, --policies or --ab list: what it accepts
// is a list of distinct policies kvlens's router knows, and what it refuses
// it says in one line.
func FuzzParseModes(f *testing.F) {
	for _, s := range []string{"rr,kv", "RR, KV-Aware", "kv,kv", "", ",", "dynamo,,sglang_events", "fastest", "round_robin\nkv", "kv ,rr"} {
		f.Add(s, false)
	}
	f.Add("vllm-router,dynamo", true)
	f.Add("a\nb,a\nb", true)
	f.Fuzz(func(t *testing.T, s string, external bool) {
		modes, err := parseModes(s, external)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("parseModes(%q): an error of more than one line: %q", s, err)
			}
			return
		}
		if len(modes) == 0 {
			t.Fatalf("parseModes(%q) accepted no mode", s)
		}
		for i, m := range modes {
			if m == "" || strings.Contains(m, ",") || slices.Contains(modes[:i], m) {
				t.Fatalf("parseModes(%q) = %q: an empty, joined or repeated mode", s, modes)
			}
			if _, err := router.NewPolicy(m); err != nil && !external {
				t.Fatalf("parseModes(%q) accepted %q, which the router refuses: %v", s, m, err)
			}
		}
	})
}

// FuzzParseLevels reads any --levels list: what it accepts are
// concurrencies the load generator can run, and what it refuses it says in
// one line.
func FuzzParseLevels(f *testing.F) {
	for _, s := range []string{"40,60,80", " 120 ", "0", "-5", "10001", "1e3", ",,", "", "60,\n80", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		levels, err := parseLevels(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("parseLevels(%q): an error of more than one line: %q", s, err)
			}
			return
		}
		if len(levels) == 0 {
			t.Fatalf("parseLevels(%q) accepted no level", s)
		}
		for _, n := range levels {
			if n < 1 || n > loadgen.MaxConcurrency {
				t.Fatalf("parseLevels(%q) accepted %d", s, n)
			}
		}
	})
}

// FuzzParsePorts reads any --ports of kvlens sim: what it accepts is one
// port from 0 to 65535 for each comma-separated part, none but 0 twice;
// what it refuses it says in one line.
func FuzzParsePorts(f *testing.F) {
	for _, s := range []string{"8001,8002,8003", "0,0", "9001,9001", " 80 ", "", "65536", "-1", "80,,81", "1e3", "+80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ports, err := parsePorts(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("parsePorts(%q): an error of more than one line: %q", s, err)
			}
			return
		}
		if len(ports) != strings.Count(s, ",")+1 {
			t.Fatalf("parsePorts(%q) = %v: not one port a part", s, ports)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p < 0 || p > 65535 || (p != 0 && seen[p]) {
				t.Fatalf("parsePorts(%q) = %v: %d is out of range or twice", s, ports, p)
			}
			seen[p] = true
		}
	})
}
