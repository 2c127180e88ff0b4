package web

import (
	"testing"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/router"
)

func TestCurveNamesSayRouterFleetAndSource(t *testing.T) {
	seeds := builtinAverage(t)
	sim := &baselines.Set{Deployment: "Simulated: yes: virtual time (kvlens discrete-event simulation, seed 1); GPU: 3x simulated worker (kvlens sim)"}
	lab := &baselines.Set{Deployment: "4x H100 SXM, vLLM 0.11"}
	tests := []struct {
		name string
		set  *baselines.Set
		mode string
		want string
	}{
		{"the seeds' KV curve is Dynamo's router on hardware", seeds, "kv", "Dynamo 0.9 KV router · 3×H200 · measured"},
		{"the seeds' round-robin curve says it was measured", seeds, "round_robin", "round-robin · 3×H200 · measured"},
		{"a simulated set's kv curve is kvlens's own", sim, "kv", "kvlens kv · simulated"},
		{"a simulated set's round-robin curve is simulated", sim, "round_robin", "round-robin · simulated"},
		{"a measured set without Dynamo names no router it cannot know", lab, "kv", "KV router · 4×H100 · measured"},
		{"no set names the policy only", nil, "kv", "kvlens kv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CurveName(tt.set, tt.mode); got != tt.want {
				t.Fatalf("CurveName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEveryPolicyHasARouterName(t *testing.T) {
	seen := map[string]string{}
	for _, p := range router.Policies {
		n := RouterName(p)
		if n == p && p != "random" {
			t.Errorf("policy %s has no router name", p)
		}
		if q, dup := seen[n]; dup {
			t.Errorf("policies %s and %s are both named %q", q, p, n)
		}
		seen[n] = p
	}
}

func TestTheOverlayCarriesEveryPolicysSimulatedCurveUnderItsOwnName(t *testing.T) {
	sim := &baselines.Set{Deployment: "Simulated: yes: virtual time; GPU: 3x simulated worker (kvlens sim)", Levels: []baselines.Level{
		{Mode: "kv", Concurrency: 60, Metrics: baselines.Metrics{TTFTP95: 380}},
		{Mode: "llmd", Concurrency: 60, Metrics: baselines.Metrics{TTFTP95: 390}},
	}}
	tests := []struct {
		name     string
		curves   *baselines.Set
		key      string
		wantName string
		wantTTFT float64
	}{
		{"kv's simulated curve is kvlens's own, apart from the measured kv curve", sim, "sim:kv", "kvlens kv · simulated", 380},
		{"a policy no lane runs yet is there too, for a switch without a reload", sim, "sim:llmd", "kvlens copy of llm-d's scorers · simulated", 390},
		{"without stored policy curves there are none", nil, "sim:kv", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{opts: Options{PolicyCurves: tt.curves, Baseline: builtinAverage(t)}}
			s.baseline.Store(s.opts.Baseline)
			d := s.baselineData()
			if d.Names["kv"] != "Dynamo 0.9 KV router · 3×H200 · measured" {
				t.Errorf("the measured kv curve is named %q", d.Names["kv"])
			}
			if got := d.Names[tt.key]; got != tt.wantName {
				t.Errorf("%s is named %q, want %q", tt.key, got, tt.wantName)
			}
			var ttft float64
			if c := d.Curves[tt.key]; len(c) > 0 {
				ttft = c[0]["ttft_p95_ms"]
			}
			if ttft != tt.wantTTFT {
				t.Errorf("%s at 60: TTFT p95 %v, want %v", tt.key, ttft, tt.wantTTFT)
			}
		})
	}
}

func TestShortNameNamesTheRouterWithinASelectsWidth(t *testing.T) {
	tests := []struct {
		name, policy, want string
	}{
		{"a copy of another router says whose, and that it is a copy", "dynamo", "Dynamo 0.9 copy"},
		{"the newest Dynamo's copy is told from 0.9's", "dynamo_latest", "Dynamo latest copy"},
		{"SGLang's copy", "sglang", "SGLang copy"},
		{"llm-d's copy", "llmd", "llm-d copy"},
		{"kvlens's own policy keeps its name", "kv", "kvlens kv"},
		{"a plain policy keeps its name", "least_loaded", "least-loaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShortName(tt.policy); got != tt.want {
				t.Errorf("ShortName(%q) = %q, want %q", tt.policy, got, tt.want)
			}
		})
	}
	// 18 characters is what a 13em select shows in full at the page's font
	// (TestBrowserAB measures it).
	for _, p := range router.Policies {
		if n := len([]rune(ShortName(p))); n > 18 {
			t.Errorf("ShortName(%q) = %q: %d characters, more than a select shows", p, ShortName(p), n)
		}
	}
}
