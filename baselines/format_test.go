package baselines

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func seedJSON(t *testing.T, seed string) []byte {
	t.Helper()
	text, err := os.ReadFile("testdata/" + seed)
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(text), "```json\n")
	block, _, _ := strings.Cut(after, "```")
	return []byte(block)
}

// numbersEqual decodes both documents and compares them as values, so that
// 100.0 and 100 count as the same number.
func numbersEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestSeedFilesRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		seed   string
		format Format
	}{
		{"seed 000's dual-mode JSON exports with identical numbers", "seed000.txt", FormatDual},
		{"seed 001's single-mode JSON exports with identical numbers", "seed001.txt", FormatSingle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := seedJSON(t, tt.seed)
			s, f, err := Decode(in)
			if err != nil {
				t.Fatal(err)
			}
			if f != tt.format {
				t.Fatalf("detected format %s, want %s", f, tt.format)
			}
			out, err := Encode(&s, f)
			if err != nil {
				t.Fatal(err)
			}
			if !numbersEqual(t, in, out) {
				t.Fatalf("export differs from the seed:\n%s", out)
			}
		})
	}
}

func TestKvlensFormatKeepsEverything(t *testing.T) {
	rps, errPct, spread := 10.0, 1.5, 12.25
	s := Set{
		Name: "lab", Source: "sweep 7", Deployment: "3 sim workers", Method: "20 s warmup",
		Generated: "2026-11-22T05:00:00Z", Metric: "kvlens window", TargetRPS: &rps,
		Levels: []Level{
			{Concurrency: 60, Mode: "round_robin", Repeats: 2, Spread: &Metrics{TTFTP95: spread},
				Metrics: Metrics{TTFTP50: 1, TTFTP95: 2, KVHitRate: new(3.0), TOPS: 4, TPOTP50: 5, TPOTP95: 6, LatencyP50: 7, LatencyP95: 8, ErrorPct: &errPct}},
		},
	}
	data, err := Encode(&s, FormatKvlens)
	if err != nil {
		t.Fatal(err)
	}
	got, f, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if f != FormatKvlens || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip lost something:\n got %+v\nwant %+v", got, s)
	}
}

// TestALevelWithoutAHitRateImportsAsUnknown reads a level whose workers
// reported no cached tokens, as a sweep of such workers writes it, in each
// format: its hit rate stays unknown through an export and a re-import.
func TestALevelWithoutAHitRateImportsAsUnknown(t *testing.T) {
	level := `"ttft_p50_ms":1,"ttft_p95_ms":2,"tops":4,"tpot_p50_ms":5,"tpot_p95_ms":6,"latency_p50_ms":7,"latency_p95_ms":8`
	tests := []struct {
		name string
		file string
	}{
		{"seed 000's form", `{"levels":[{"concurrency":40,"round_robin":{` + level + `},"kv_aware":{` + level + `}}]}`},
		{"seed 001's form", `{"mode":"kv","levels":[{"concurrency":40,` + level + `}]}`},
		{"kvlens's form", `{"format":"kvlens-baselines","version":1,"name":"n","levels":[{"concurrency":40,"mode":"kv",` + level + `}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, f, err := Decode([]byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			enc, err := Encode(&s, f)
			if err != nil {
				t.Fatal(err)
			}
			again, _, err := Decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range append(s.Levels, again.Levels...) {
				if l.KVHitRate != nil || l.TOPS != 4 {
					t.Fatalf("level %+v: want no hit rate and TOPS 4", l.Metrics)
				}
			}
			if strings.Contains(string(enc), "kv_hit_rate_pct") {
				t.Fatalf("the export writes a hit rate:\n%s", enc)
			}
		})
	}
}

func TestDecodeRejectsBadInputNamingTheField(t *testing.T) {
	level := `"ttft_p50_ms":1,"ttft_p95_ms":2,"kv_hit_rate_pct":3,"tops":4,"tpot_p50_ms":5,"tpot_p95_ms":6,"latency_p50_ms":7,"latency_p95_ms":8`
	dual := func(levels ...string) string {
		return `{"levels":[` + strings.Join(levels, ",") + `]}`
	}
	tests := []struct {
		name, in, want string
	}{
		{"text that is not JSON", `{"levels":`, "not JSON"},
		{"two JSON values", `{} {}`, "data after the top-level value"},
		{"a top level that is an array", `[]`, "top level: must be an object"},
		{"no levels at all", `{"generated":"x"}`, "levels: is missing"},
		{"an empty levels array", `{"levels":[]}`, "levels: is empty"},
		{"a negative p95", dual(`{"concurrency":40,"kv_aware":{` + strings.Replace(level, `"ttft_p95_ms":2`, `"ttft_p95_ms":-2`, 1) + `}}`), "levels[0].kv_aware.ttft_p95_ms: must be a number from 0 to 1,000,000,000"},
		{"a p95 given as text", dual(`{"concurrency":40,"round_robin":{`+level+`}}`, `{"concurrency":50,"round_robin":{`+level+`}}`, `{"concurrency":60,"round_robin":{`+level+`}}`, `{"concurrency":70,"kv_aware":{`+strings.Replace(level, `"ttft_p95_ms":2`, `"ttft_p95_ms":"2"`, 1)+`}}`), "levels[3].kv_aware.ttft_p95_ms: must be a number from 0 to 1,000,000,000"},
		{"a missing figure", dual(`{"concurrency":40,"round_robin":{` + strings.Replace(level, `"tops":4,`, ``, 1) + `}}`), "levels[0].round_robin.tops: is missing"},
		{"a hit rate above 100%", dual(`{"concurrency":40,"round_robin":{` + strings.Replace(level, `"kv_hit_rate_pct":3`, `"kv_hit_rate_pct":130`, 1) + `}}`), "levels[0].round_robin.kv_hit_rate_pct: must be a percentage"},
		{"a p50 above its p95", dual(`{"concurrency":40,"round_robin":{` + strings.Replace(level, `"ttft_p50_ms":1`, `"ttft_p50_ms":9`, 1) + `}}`), "levels[0].round_robin.ttft_p50_ms: 9 is above ttft_p95_ms 2"},
		{"a fractional concurrency", dual(`{"concurrency":40.5,"round_robin":{` + level + `}}`), "levels[0].concurrency: must be a whole number"},
		{"a zero concurrency", dual(`{"concurrency":0,"round_robin":{` + level + `}}`), "levels[0].concurrency: must be a whole number"},
		{"a concurrency given twice", dual(`{"concurrency":40,"round_robin":{`+level+`}}`, `{"concurrency":40,"round_robin":{`+level+`}}`), "levels[1].round_robin: repeats concurrency 40 of mode round_robin"},
		{"a level with no mode", dual(`{"concurrency":40}`), "levels[0]: has no mode"},
		{"a mode that is not an object", dual(`{"concurrency":40,"kv_aware":7}`), "levels[0].kv_aware: must be an object"},
		{"a misspelt figure", dual(`{"concurrency":40,"round_robin":{` + level + `,"ttft_p99":3}}`), "levels[0].round_robin.ttft_p99: unknown field"},
		{"an unknown top-level field", `{"levels":[],"extra":1}`, "extra: unknown field"},
		{"a single-mode file with a bad mode name", `{"mode":"K V","levels":[]}`, "mode: is not a mode name"},
		{"a single-mode level missing its concurrency", `{"mode":"kv","levels":[{` + level + `}]}`, "levels[0].concurrency: is missing"},
		{"a kvlens file of a future version", `{"format":"kvlens-baselines","version":2,"levels":[]}`, "version: 2 is not supported"},
		{"a kvlens file of another format", `{"format":"other","version":1,"levels":[]}`, `format: must be "kvlens-baselines"`},
		{"a kvlens level with a negative spread", `{"format":"kvlens-baselines","version":1,"levels":[{"concurrency":1,"mode":"kv",` + level + `,"spread":{"tops":-1}}]}`, "levels[0].spread.tops: must be a number from 0 to 1,000,000,000"},
		{"a p95 of 1e308 ms, which would flatten every chart", dual(`{"concurrency":40,"kv_aware":{` + strings.Replace(level, `"ttft_p95_ms":2`, `"ttft_p95_ms":1e308`, 1) + `}}`), "levels[0].kv_aware.ttft_p95_ms: must be a number from 0 to 1,000,000,000"},
		{"a name across two lines", `{"format":"kvlens-baselines","version":1,"name":"a\nb","levels":[{"concurrency":1,"mode":"kv",` + level + `}]}`, "name: holds the control character U+000A"},
		{"a name with a terminal escape", `{"format":"kvlens-baselines","version":1,"name":"a\u001b[31mred","levels":[{"concurrency":1,"mode":"kv",` + level + `}]}`, "name: holds the control character U+001B"},
		{"a name of 201 characters", `{"format":"kvlens-baselines","version":1,"name":"` + strings.Repeat("é", 201) + `","levels":[{"concurrency":1,"mode":"kv",` + level + `}]}`, "name: is 201 characters long, more than 200"},
		{"a huge target rps given as a string", `{"target_rps":"10","levels":[]}`, "target_rps: must be a number from 0 to 1,000,000,000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("accepted %s", tt.in)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line containing %q", err, tt.want)
			}
		})
	}
}

func TestValidateRefusesASetBuiltInCode(t *testing.T) {
	level := func() Level {
		return Level{Mode: "kv", Concurrency: 40, Metrics: Metrics{TTFTP50: 1, TTFTP95: 2, TOPS: 3, TPOTP50: 4, TPOTP95: 5, LatencyP50: 6, LatencyP95: 7}}
	}
	big, over := 2e9, 101.0
	tests := []struct {
		name string
		edit func(*Set)
		want string
	}{
		{"a set as a sweep stores it passes", func(*Set) {}, ""},
		{"a tab in the name", func(s *Set) { s.Name = "a\tb" }, "name: holds the control character U+0009"},
		{"a name that is not UTF-8", func(s *Set) { s.Name = "a\xffb" }, "name: is not UTF-8 text"},
		{"an infinite p95", func(s *Set) { s.Levels[0].TTFTP95 = math.Inf(1) }, "levels[0].ttft_p95_ms: must be a number from 0 to 1,000,000,000"},
		{"a rate of two billion requests a second", func(s *Set) { s.Levels[0].ActualRPS = &big }, "levels[0].actual_rps: must be a number from 0 to 1,000,000,000"},
		{"a hit rate over 100%, named as a percentage", func(s *Set) { s.Levels[0].KVHitRate = &over }, "levels[0].kv_hit_rate_pct: must be a percentage from 0 to 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Set{Name: "sweep 2026-11-29", Levels: []Level{level()}}
			tt.edit(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestEncodeSingleNeedsOneMode(t *testing.T) {
	s, _, err := Decode(seedJSON(t, "seed000.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Encode(&s, FormatSingle); err == nil || !strings.Contains(err.Error(), "holds one mode") {
		t.Fatalf("err = %v, want a refusal naming the modes", err)
	}
}

// FuzzImport feeds Decode arbitrary bytes: it must never panic, and whatever
// it accepts must survive an export and a re-import unchanged.
func FuzzImport(f *testing.F) {
	for _, seed := range []string{"seed000.txt", "seed001.txt"} {
		data, err := os.ReadFile("testdata/" + seed)
		if err != nil {
			f.Fatal(err)
		}
		_, after, _ := strings.Cut(string(data), "```json\n")
		block, _, _ := strings.Cut(after, "```")
		f.Add([]byte(block))
	}
	builtin, _ := builtinFiles.ReadFile("builtin/03-kv-160-200.json")
	f.Add(builtin)
	f.Add([]byte(`{"levels":[{"concurrency":1,"kv_aware":{"ttft_p50_ms":1e308,"ttft_p95_ms":1e309}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, format, err := Decode(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		for _, out := range []Format{format, FormatKvlens} {
			enc, err := Encode(&s, out)
			if err != nil {
				t.Fatalf("export %s of an accepted file: %v", out, err)
			}
			again, _, err := Decode(enc)
			if err != nil {
				t.Fatalf("re-import of %s export: %v\n%s", out, err, enc)
			}
			if out == FormatKvlens {
				if !reflect.DeepEqual(again, s) {
					t.Fatalf("kvlens round trip changed the set")
				}
			} else if !reflect.DeepEqual(again.Levels, s.Levels) {
				t.Fatalf("%s round trip changed the levels", out)
			}
		}
	})
}

func TestAtInterpolatesWithinTheCurveOnly(t *testing.T) {
	s := Set{Levels: []Level{
		{Concurrency: 40, Mode: "kv", Metrics: Metrics{TTFTP95: 400}},
		{Concurrency: 80, Mode: "kv", Metrics: Metrics{TTFTP95: 600}},
		{Concurrency: 60, Mode: "round_robin", Metrics: Metrics{TTFTP95: 700}},
	}}
	p95, _ := FieldByKey("ttft_p95_ms")
	rps, _ := FieldByKey("actual_rps")
	tests := []struct {
		name   string
		mode   string
		c      float64
		field  Field
		want   float64
		wantOK bool
	}{
		{"a measured level gives its own value", "kv", 40, p95, 400, true},
		{"halfway between two levels gives the mean", "kv", 60, p95, 500, true},
		{"a quarter of the way gives a quarter of the rise", "kv", 50, p95, 450, true},
		{"below the lowest level there is no value", "kv", 30, p95, 0, false},
		{"above the highest level there is no value", "kv", 90, p95, 0, false},
		{"a mode the set lacks has no value", "dynamo", 60, p95, 0, false},
		{"a figure the levels lack has no value", "kv", 60, rps, 0, false},
		{"a one-level curve answers at its level", "round_robin", 60, p95, 700, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := s.At(tt.mode, tt.c, tt.field)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("At(%s, %v) = %v, %v; want %v, %v", tt.mode, tt.c, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestEnvelope(t *testing.T) {
	sets, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	dip := Set{Levels: []Level{
		{Concurrency: 60, Mode: "kv", Metrics: Metrics{TTFTP95: 500}},
		{Concurrency: 80, Mode: "kv", Metrics: Metrics{TTFTP95: 650}},
		{Concurrency: 100, Mode: "kv", Metrics: Metrics{TTFTP95: 550}},
	}}
	ttftOnly := SLO{TTFT: 600 * time.Millisecond}
	pct := func(v float64) *float64 { return &v }
	failing := Set{Levels: []Level{
		{Concurrency: 60, Mode: "kv", Metrics: Metrics{TTFTP95: 500, ErrorPct: pct(5)}},
		{Concurrency: 80, Mode: "kv", Metrics: Metrics{TTFTP95: 0, ErrorPct: pct(100)}},
	}}
	tests := []struct {
		name   string
		set    Set
		mode   string
		slo    SLO
		want   int
		wantOK bool
	}{
		// seed 003: KV's p95 stays under 600 ms up to 120 (530 ms) and
		// crosses at 140 (650 ms)
		{"the averaged KV curve is within SLO up to 120", sets[0], "kv", DefaultSLO, 120, true},
		// seed 003: RR's p95 is 655 ms already at 60
		{"the averaged RR curve misses the SLO at its lowest level", sets[0], "round_robin", DefaultSLO, 0, false},
		// seed 000: KV's p95 peaks at 572.4 ms (80), under 600 throughout
		{"the 2026-02-27 KV curve is within SLO over its whole range", sets[1], "kv", DefaultSLO, 120, true},
		{"a level that recovers above a miss does not extend the envelope", dip, "kv", ttftOnly, 60, true},
		{"a looser objective admits more levels", dip, "kv", SLO{TTFT: 700 * time.Millisecond}, 100, true},
		{"a TPOT objective is checked too", sets[2], "kv", SLO{TTFT: time.Hour, TPOT: 48 * time.Millisecond}, 160, true},
		// a failed request never got its first token: past 5% failed, the
		// p95 is a failure, whatever the latencies of the rest
		{"a level where every request failed misses the SLO, and 5% failed does not", failing, "kv", DefaultSLO, 60, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.set.Envelope(tt.mode, tt.slo)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("Envelope = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
