package baselines

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/loadgen"
)

func TestLevelOracle(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		snaps []loadgen.Stats
		want  *float64 // percent
	}{
		{"snapshots without an oracle give a level without one", []loadgen.Stats{{}, {}}, nil},
		{"the level averages the snapshots' oracles, in percent", []loadgen.Stats{{OracleHitRate: f(0.98)}, {OracleHitRate: f(0.96)}}, f(97)},
		{"a snapshot without an oracle is left out of the mean", []loadgen.Stats{{OracleHitRate: f(0.99)}, {}}, f(99)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LevelFromStats("kv", 60, tt.snaps).OracleHitRate
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("oracle = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReportShowsTheOracleBesideEveryMode(t *testing.T) {
	o := 99.2
	s := &Set{Name: "t"}
	for _, m := range []string{"round_robin", "kv", "sglang"} {
		s.Levels = append(s.Levels, Level{Mode: m, Concurrency: 60, Metrics: Metrics{TTFTP95: 400, KVHitRate: new(90.0), OracleHitRate: &o}})
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, Report{Set: s}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KV Oracle", "## Every Mode", "| 60 | SGLang | 400ms |", "99.2%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
