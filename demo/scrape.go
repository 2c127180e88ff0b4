package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/web"
)

// The gauges the workers panel shows, as engines expose them on /metrics,
// the first a worker exports of each list: vLLM's, then the name vLLM used
// for KV usage before its V1 engine, then SGLang's.
var (
	metricsWaiting = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs"}
	metricsKVUsage = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"}
)

// parseGauges reads a worker's Prometheus text exposition: requests waiting
// (summed over its engines) and KV-cache usage (their mean, 0 to 1). A
// metric the worker does not export comes back as -1.
func parseGauges(r io.Reader) (web.Gauge, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, 4<<20))
	if err != nil {
		return web.Gauge{}, err
	}
	// first returns the values of the first of names the worker exports.
	first := func(names []string) []float64 {
		for _, name := range names {
			if f, ok := fams[name]; ok && len(f.GetMetric()) > 0 {
				vs := make([]float64, 0, len(f.GetMetric()))
				for _, m := range f.GetMetric() {
					vs = append(vs, m.GetGauge().GetValue())
				}
				return vs
			}
		}
		return nil
	}
	g := web.Gauge{Queued: -1, KVUsage: -1}
	if vs := first(metricsWaiting); vs != nil {
		var n float64
		for _, v := range vs {
			n += v
		}
		g.Queued = int(n)
	}
	if vs := first(metricsKVUsage); vs != nil {
		var sum float64
		for _, v := range vs {
			sum += v
		}
		g.KVUsage = sum / float64(len(vs))
	}
	return g, nil
}

// scraper polls real workers' /metrics for the workers panel. A worker that
// fails to answer drops out of the map, and the panel shows dashes for it.
type scraper struct {
	mu   sync.Mutex
	last map[string]web.Gauge
}

func (s *scraper) gauges() map[string]web.Gauge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// run scrapes every worker each interval until ctx ends.
func (s *scraper) run(ctx context.Context, px *router.Proxy, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		next := map[string]web.Gauge{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, w := range px.Workers() {
			wg.Go(func() {
				g, err := scrape(ctx, px.Client(), w.URL.JoinPath("/metrics").String())
				if err != nil {
					return
				}
				mu.Lock()
				next[w.Name] = g
				mu.Unlock()
			})
		}
		wg.Wait()
		s.mu.Lock()
		s.last = next
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func scrape(ctx context.Context, c *http.Client, url string) (web.Gauge, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return web.Gauge{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return web.Gauge{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return web.Gauge{}, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	g, err := parseGauges(resp.Body)
	if err != nil {
		return web.Gauge{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return g, nil
}
