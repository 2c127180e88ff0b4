package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvlens/kvlens/router"
)

// modelAskTimeout bounds each server's answer to GET /v1/models at start.
const modelAskTimeout = 5 * time.Second

// ChooseModel settles the model the load asks for against what the servers
// serve: each real worker's GET /v1/models, or --target's. An OpenAI server
// refuses a model it does not serve (vLLM with 404), so a load under
// kvlens's default name, sent to workers serving another model, failed
// every request. With given false, cfg.Model becomes a model every
// answering server serves (the first they share, a base model before its
// adapters), unless they serve the default; with given true, cfg.Model
// stays and a server that does not serve it is named. It returns the lines
// to print. The simulated fleet serves cfg.Model: nothing is asked.
func ChooseModel(ctx context.Context, cfg *Config, given bool) []string {
	servers, lines := modelServers(cfg)
	if len(servers) == 0 {
		return lines
	}
	served := askModels(ctx, servers)
	var heard []string // servers that answered, in order
	for _, s := range servers {
		if served[s.name].err == nil {
			heard = append(heard, s.name)
		}
	}
	source := "--model"
	if !given {
		source = "the default model"
	}
	if len(heard) == 0 {
		first := servers[0].name
		return append(lines, fmt.Sprintf("model %s (%s): no server answered GET /v1/models (%s: %s)", cfg.Model, source, first, oneLine(served[first].err)))
	}
	for _, s := range servers {
		if err := served[s.name].err; err != nil {
			lines = append(lines, fmt.Sprintf("%s did not say which models it serves: %s", s.name, oneLine(err)))
		}
	}
	common := served[heard[0]].ids
	for _, name := range heard[1:] {
		common = slices.DeleteFunc(slices.Clone(common), func(id string) bool { return !slices.Contains(served[name].ids, id) })
	}
	switch {
	case slices.Contains(common, cfg.Model):
		return append(lines, fmt.Sprintf("model %s (%s), which %s serve%s (GET /v1/models)", cfg.Model, source, names(heard), verbEnd(heard)))
	case !given && len(common) > 0:
		cfg.Model = common[0]
		return append(lines, fmt.Sprintf("model %s, which %s serve%s (GET /v1/models; --model chooses another)", cfg.Model, names(heard), verbEnd(heard)))
	}
	for _, name := range heard {
		if !slices.Contains(served[name].ids, cfg.Model) {
			lines = append(lines, fmt.Sprintf("%s serves %s, not %s %s: its requests will fail (give --model)", name, strings.Join(served[name].ids, ", "), source, cfg.Model))
		}
	}
	return lines
}

// modelServer is a server to ask: a worker or --target.
type modelServer struct{ name, url string }

// modelServers lists the servers whose models the load must match, and a
// line for those that cannot be asked at start.
func modelServers(cfg *Config) ([]modelServer, []string) {
	if cfg.Target != "" {
		return []modelServer{{"--target", strings.TrimSuffix(cfg.Target, "/") + "/models"}}, nil
	}
	if len(cfg.Workers) == 0 {
		return nil, nil
	}
	f, err := router.ParseFleet(cfg.Workers)
	if err != nil {
		return nil, nil // Start says what is wrong with them
	}
	var out []modelServer
	for _, w := range f.Static {
		out = append(out, modelServer{w.Name, w.URL.JoinPath("/v1/models").String()})
	}
	var lines []string
	for _, src := range f.DNS {
		// The router resolves its DNS sources once it runs; here they are
		// looked up once, and each address asked as the router names it.
		ctx, cancel := context.WithTimeout(context.Background(), modelAskTimeout)
		addrs, err := net.DefaultResolver.LookupHost(ctx, src.Service)
		cancel()
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s did not resolve, so its workers were not asked which models they serve: %s", src.Service, oneLine(err)))
			continue
		}
		slices.Sort(addrs)
		for _, a := range slices.Compact(addrs) {
			host := net.JoinHostPort(a, src.Port)
			out = append(out, modelServer{host, "http://" + host + "/v1/models"})
		}
	}
	return out, lines
}

type modelAnswer struct {
	ids []string
	err error
}

// askModels asks every server at once.
func askModels(ctx context.Context, servers []modelServer) map[string]modelAnswer {
	client := &http.Client{Timeout: modelAskTimeout}
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]modelAnswer{}
	for _, s := range servers {
		wg.Go(func() {
			ids, err := router.ServedModels(ctx, client, s.url)
			mu.Lock()
			out[s.name] = modelAnswer{ids, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// names joins server names as "a, b and c".
func names(ns []string) string {
	if len(ns) == 1 {
		return ns[0]
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " and " + ns[len(ns)-1]
}

// verbEnd is the verb's ending for a subject of ns: "serves" for one.
func verbEnd(ns []string) string {
	if len(ns) == 1 {
		return "s"
	}
	return ""
}

// oneLine keeps an error's first line.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
