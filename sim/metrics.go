package sim

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// workerMetrics are a worker's latency histograms, under vLLM's names so
// that dashboards read simulated and real workers alike.
type workerMetrics struct {
	ttft, itl, e2e prometheus.Observer
}

// newMetrics registers vLLM's metrics for one worker on reg: gauges and
// counters read from r's engine at scrape time, and the latency histograms
// the returned observer fills.
func newMetrics(reg *prometheus.Registry, model string, r *Runner) *workerMetrics {
	labels := prometheus.Labels{"model_name": model}
	stat := func(f func(Stats) float64) func() float64 {
		return func() float64 { return f(r.Stats()) }
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm:num_requests_running", Help: "Number of requests in model execution batches.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return float64(s.Running) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm:num_requests_waiting", Help: "Number of requests waiting to be processed.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return float64(s.Waiting) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm:kv_cache_usage_perc", Help: "KV-cache usage. 1 means 100 percent usage.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return s.KVUsage })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "vllm:prefix_cache_queries_total", Help: "Prefix cache queries, in terms of number of queried tokens.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return float64(s.PrefixQueries) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "vllm:prefix_cache_hits_total", Help: "Prefix cache hits, in terms of number of cached tokens.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return float64(s.PrefixHits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "vllm:num_preemptions_total", Help: "Cumulative number of preemptions from the engine.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return float64(s.Preemptions) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "vllm:prompt_tokens_total", Help: "Number of prefill tokens processed.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return float64(s.PromptTokens) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "vllm:generation_tokens_total", Help: "Number of generation tokens processed.", ConstLabels: labels,
		}, stat(func(s Stats) float64 { return float64(s.GenerationTokens) })),
	)
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	// Buckets are vLLM's.
	return &workerMetrics{
		ttft: hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
			[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}),
		itl: hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
			[]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
		e2e: hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
			[]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}),
	}
}

func (m *workerMetrics) token(index int, gap time.Duration) {
	if index == 0 {
		m.ttft.Observe(gap.Seconds())
		return
	}
	m.itl.Observe(gap.Seconds())
}

func (m *workerMetrics) done(e2e time.Duration) { m.e2e.Observe(e2e.Seconds()) }
