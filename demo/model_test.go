package demo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// modelsServer answers GET /v1/models (and /models, as a frontend under
// --target's /v1) with the given models; none answers 404, as a server
// without the endpoint does.
func modelsServer(t *testing.T, models ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(models) == 0 || !strings.HasSuffix(r.URL.Path, "/models") {
			http.NotFound(w, r)
			return
		}
		var data []string
		for _, m := range models {
			data = append(data, `{"id":"`+m+`","object":"model"}`)
		}
		w.Write([]byte(`{"object":"list","data":[` + strings.Join(data, ",") + `]}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestChooseModel(t *testing.T) {
	const def = "meta-llama/Llama-3.1-70B-Instruct-FP8" // kvlens's default
	tests := []struct {
		name      string
		given     string     // --model; "" for the default
		workers   [][]string // each worker's models; nil answers 404
		target    []string   // with --target, its models
		want      string     // the model the load asks for
		wantLines []string   // each a part of one line, in order
	}{
		{"workers serving one model the default is not: the load takes theirs", "", [][]string{{"Qwen/Qwen3-8B"}, {"Qwen/Qwen3-8B"}}, nil,
			"Qwen/Qwen3-8B", []string{"model Qwen/Qwen3-8B, which a and b serve (GET /v1/models; --model chooses another)"}},
		{"workers serving the default keep it", "", [][]string{{def}}, nil,
			def, []string{"model " + def + " (the default model), which a serves"}},
		{"a base model and its adapters: the base, listed first, is taken", "", [][]string{{"base", "lora-1"}, {"base", "lora-1"}}, nil,
			"base", []string{"model base, which a and b serve"}},
		{"a model given that a worker does not serve is kept, and the worker named", "mine", [][]string{{"mine"}, {"Qwen/Qwen3-8B"}}, nil,
			"mine", []string{"b serves Qwen/Qwen3-8B, not --model mine: its requests will fail (give --model)"}},
		{"workers that share no model keep the default and are each named", "", [][]string{{"x"}, {"y"}}, nil,
			def, []string{"a serves x, not the default model " + def, "b serves y, not the default model " + def}},
		{"a worker without the endpoint is said, and the others decide", "", [][]string{nil, {"Qwen/Qwen3-8B"}}, nil,
			"Qwen/Qwen3-8B", []string{"a did not say which models it serves: GET http", "model Qwen/Qwen3-8B, which b serves"}},
		{"no worker answering keeps the default and says so", "", [][]string{nil}, nil,
			def, []string{"model " + def + " (the default model): no server answered GET /v1/models (a: GET http"}},
		{"workers found through DNS are each asked", "", [][]string{{"dns"}}, nil,
			"served-by-dns", []string{"which 127.0.0.1:"}},
		{"--target is asked under its /v1", "", nil, []string{"served-by-frontend"},
			"served-by-frontend", []string{"model served-by-frontend, which --target serves"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.given != "" {
				cfg.Model = tt.given
			}
			for i, models := range tt.workers {
				if len(models) == 1 && models[0] == "dns" {
					// dns://localhost:PORT, as a Kubernetes headless Service
					// is given; localhost may also resolve to ::1, where
					// nothing listens on the port.
					u := modelsServer(t, "served-by-dns")
					cfg.Workers = append(cfg.Workers, "dns://localhost:"+u[strings.LastIndex(u, ":")+1:])
					continue
				}
				cfg.Workers = append(cfg.Workers, string(rune('a'+i))+"="+modelsServer(t, models...))
			}
			if tt.target != nil {
				cfg.Target = modelsServer(t, tt.target...) + "/v1"
			}
			lines := ChooseModel(context.Background(), &cfg, tt.given != "")
			if cfg.Model != tt.want {
				t.Errorf("model %q, want %q", cfg.Model, tt.want)
			}
			at := 0
			for _, want := range tt.wantLines {
				i := slices.IndexFunc(lines[at:], func(l string) bool { return strings.Contains(l, want) })
				if i < 0 {
					t.Fatalf("no line (from %d) says %q:\n%s", at, want, strings.Join(lines, "\n"))
				}
				at += i + 1
			}
			for _, l := range lines {
				if strings.Contains(l, "\n") {
					t.Errorf("a line of two: %q", l)
				}
			}
		})
	}
}

// TestChooseModelAsksNothingOfTheSimulatedFleet: the simulated workers
// serve the model the load asks for, so nothing is asked or said.
func TestChooseModelAsksNothingOfTheSimulatedFleet(t *testing.T) {
	cfg := DefaultConfig()
	if lines := ChooseModel(context.Background(), &cfg, false); len(lines) != 0 || cfg.Model != DefaultConfig().Model {
		t.Fatalf("lines %q, model %q", lines, cfg.Model)
	}
}
