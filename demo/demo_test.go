package demo

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/store"
	"github.com/kvlens/kvlens/web"
)

func TestParseGauges(t *testing.T) {
	tests := []struct {
		name string
		text string
		want web.Gauge
	}{
		{"one engine's waiting requests and KV usage", `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 3
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
`, web.Gauge{Queued: 3, KVUsage: 0.25}},
		// Data-parallel engines: queues add up, usage is their mean.
		{"two engines are summed and averaged", `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 2
vllm:num_requests_waiting{engine="1"} 5
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0"} 0.2
vllm:kv_cache_usage_perc{engine="1"} 0.6
`, web.Gauge{Queued: 7, KVUsage: 0.4}},
		{"a worker without vLLM's gauges reports neither", "# TYPE up gauge\nup 1\n", web.Gauge{Queued: -1, KVUsage: -1}},
		{"vLLM before its V1 engine named KV usage gpu_cache_usage_perc", `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 1
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.5
`, web.Gauge{Queued: 1, KVUsage: 0.5}},
		{"SGLang's queue and token usage", `# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 4
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.52
`, web.Gauge{Queued: 4, KVUsage: 0.52}},
		{"vLLM's current name wins over the older one", `# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc 0.3
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc 0.9
`, web.Gauge{Queued: -1, KVUsage: 0.3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseGauges(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if got.Queued != tt.want.Queued || got.KVUsage < tt.want.KVUsage-1e-9 || got.KVUsage > tt.want.KVUsage+1e-9 {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	// Sad path: a body that is not the text format is an error, not zeros.
	if _, err := parseGauges(strings.NewReader("<html>not metrics</html>\n")); err == nil {
		t.Fatal("an HTML page parsed as metrics")
	}
}

func FuzzParseGauges(f *testing.F) {
	f.Add("vllm:num_requests_waiting 3\nvllm:kv_cache_usage_perc 0.5\n")
	f.Add("# TYPE x gauge\nx{a=\"b\"} NaN\n")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := parseGauges(strings.NewReader(s))
		if err != nil {
			return // refused; the panel shows dashes
		}
		// A figure the text never names must be reported as missing.
		names := func(names []string) bool {
			return slices.ContainsFunc(names, func(n string) bool { return strings.Contains(s, n) })
		}
		if !names(metricsWaiting) && g.Queued != -1 {
			t.Fatalf("queue %d from text without %v: %q", g.Queued, metricsWaiting, s)
		}
		if !names(metricsKVUsage) && g.KVUsage != -1 {
			t.Fatalf("KV usage %g from text without %v: %q", g.KVUsage, metricsKVUsage, s)
		}
	})
}

func TestChooseBaseline(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "kvlens.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tests := []struct {
		name     string
		db       *store.DB
		set      string
		wantName string
		wantErr  string
	}{
		{"no store and no name is the seeds' 6-sweep average", nil, "", "averaged, 6 sweeps", ""},
		{"a fresh store holds the built-in sets", db, "", "averaged, 6 sweeps", ""},
		{"an unknown name in the store is an error", db, "nope", "", `--baseline "nope": no such set in ` + db.Path()},
		{"an unknown built-in name is an error", nil, "nope", "", `--baseline "nope": no such built-in set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := chooseBaseline(tt.db, tt.set)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(set.Name, tt.wantName) || len(set.Curve("kv")) == 0 || len(set.Curve("round_robin")) == 0 {
				t.Fatalf("set %q with %d levels", set.Name, len(set.Levels))
			}
		})
	}
}

func TestStoreNoteSaysWhereFiguresLiveAndWhatWasImported(t *testing.T) {
	base := &baselines.Set{Name: "lab"}
	tests := []struct {
		name      string
		cfg       Config
		recording int64
		imported  []string
		want      string
	}{
		{"a first start names the file, the recording, the import and the set",
			Config{DB: "/d/k.db", Record: true}, 7, []string{"a", "b", "c"},
			`store /d/k.db, recording this session as #7; first start: imported 3 built-in baseline sets; comparing with "lab"`},
		{"a later start imports nothing and says nothing of it",
			Config{DB: "/d/k.db", Record: true}, 8, nil,
			`store /d/k.db, recording this session as #8; comparing with "lab"`},
		{"--record=false is named",
			Config{DB: "/d/k.db"}, 0, nil,
			`store /d/k.db, not recording (--record=false); comparing with "lab"`},
		{"a store that failed points at the warning",
			Config{DB: "/d/k.db", Record: true}, 0, nil,
			`store /d/k.db could not be used for recording (see the warning above); comparing with "lab"`},
		{"no store at all says so",
			Config{Record: true}, 0, nil,
			`no store (--db is empty): built-in baselines, nothing recorded; comparing with "lab"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := storeNote(tt.cfg, tt.recording, tt.imported, base); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
