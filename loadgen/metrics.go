package loadgen

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the load generator's Prometheus series: the original demo's
// summaries, named as it named them so its Grafana dashboards keep working,
// plus per-worker histograms for heatmaps.
type Metrics struct {
	ttftAll   prometheus.Summary
	tpotAll   prometheus.Summary
	ttft      *prometheus.SummaryVec
	itl       *prometheus.SummaryVec
	tpot      *prometheus.SummaryVec
	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	ttftHist  *prometheus.HistogramVec
	tpotHist  *prometheus.HistogramVec
	e2eHist   *prometheus.HistogramVec
	tokens    *prometheus.CounterVec
	fallbacks prometheus.Counter
}

var objectives = map[float64]float64{0.5: 0.01, 0.95: 0.005}

// Histogram buckets, in seconds. TTFT spans a cache hit (tens of ms) to a
// queue several seconds deep; TPOT centres on the 60 ms SLO; E2E reaches a
// 1,024-token answer at slow decode.
var (
	ttftBuckets = []float64{.025, .05, .1, .15, .2, .3, .4, .5, .6, .75, 1, 1.5, 2, 3, 5, 10, 20}
	tpotBuckets = []float64{.005, .01, .015, .02, .025, .03, .04, .05, .06, .075, .1, .15, .2, .3, .5}
	e2eBuckets  = []float64{.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300}
)

// NewMetrics registers the load generator's series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	all := func(name, help string) prometheus.Summary {
		return prometheus.NewSummary(prometheus.SummaryOpts{
			Name: name, Help: help, Objectives: objectives,
			MaxAge: 60 * time.Second, AgeBuckets: 5,
		})
	}
	byTurn := func(name, help string) *prometheus.SummaryVec {
		return prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name: name, Help: help, Objectives: objectives,
			MaxAge: 300 * time.Second, AgeBuckets: 5,
		}, []string{"turn_type"})
	}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"worker"})
	}
	m := &Metrics{
		ttftAll: all("loadgen_ttft_all_seconds", "Time to first token of every request, in seconds, over the last 60 s."),
		tpotAll: all("loadgen_tpot_all_seconds", "Time per output token, (E2E-TTFT)/(OSL-k), in seconds, over the last 60 s."),
		ttft:    byTurn("loadgen_ttft_seconds", "Time to first token by turn type, in seconds, over the last 300 s."),
		itl:     byTurn("loadgen_itl_seconds", "Inter-token latency by turn type (same quantity as TPOT), in seconds, over the last 300 s."),
		tpot:    byTurn("loadgen_tpot_seconds", "Time per output token by turn type, in seconds, over the last 300 s."),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadgen_requests_total", Help: "Requests finished, by turn type and status (success or error).",
		}, []string{"turn_type", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadgen_errors_total", Help: "Failed requests by error class.",
		}, []string{"class"}),
		ttftHist: hist("loadgen_ttft_histogram_seconds", "Time to first token of successful requests, in seconds, by worker.", ttftBuckets),
		tpotHist: hist("loadgen_tpot_histogram_seconds", "Time per output token of successful requests, in seconds, by worker.", tpotBuckets),
		e2eHist:  hist("loadgen_e2e_histogram_seconds", "End-to-end latency of successful requests, in seconds, by worker.", e2eBuckets),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadgen_tokens_total",
			Help: "Tokens of successful requests, by worker and kind: output (usage.completion_tokens), prompt (usage.prompt_tokens) or cached (prompt_tokens_details.cached_tokens).",
		}, []string{"worker", "kind"}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loadgen_user_model_fallbacks_total", Help: "Follow-up questions written by the built-in generator because the user model failed.",
		}),
	}
	// The counters a dashboard divides by start at 0, so that an error
	// rate reads 0 before the first error, not "no data".
	for _, c := range ErrorClasses {
		m.errors.WithLabelValues(string(c))
	}
	for _, tt := range []string{turnType(0), turnType(1)} {
		m.requests.WithLabelValues(tt, "success")
		m.requests.WithLabelValues(tt, "error")
	}
	reg.MustRegister(m.ttftAll, m.tpotAll, m.ttft, m.itl, m.tpot, m.requests, m.errors, m.ttftHist, m.tpotHist, m.e2eHist, m.tokens, m.fallbacks)
	return m
}

func turnType(turn int) string {
	if turn == 0 {
		return "initial"
	}
	return "followup"
}

func (m *Metrics) fallback() {
	if m != nil {
		m.fallbacks.Inc()
	}
}

func (m *Metrics) observe(turn int, r Result) {
	if m == nil {
		return
	}
	tt := turnType(turn)
	if r.Err != nil {
		m.requests.WithLabelValues(tt, "error").Inc()
		m.errors.WithLabelValues(string(r.Class)).Inc()
		return
	}
	m.requests.WithLabelValues(tt, "success").Inc()
	m.ttftAll.Observe(r.TTFT.Seconds())
	m.ttft.WithLabelValues(tt).Observe(r.TTFT.Seconds())
	m.ttftHist.WithLabelValues(r.Worker).Observe(r.TTFT.Seconds())
	m.e2eHist.WithLabelValues(r.Worker).Observe(r.E2E.Seconds())
	m.tokens.WithLabelValues(r.Worker, "output").Add(float64(r.OSL))
	m.tokens.WithLabelValues(r.Worker, "prompt").Add(float64(r.ISL))
	m.tokens.WithLabelValues(r.Worker, "cached").Add(float64(r.CachedTokens))
	if tpot, ok := r.TPOT(); ok {
		m.tpotAll.Observe(tpot.Seconds())
		m.tpot.WithLabelValues(tt).Observe(tpot.Seconds())
		m.itl.WithLabelValues(tt).Observe(tpot.Seconds())
		m.tpotHist.WithLabelValues(r.Worker).Observe(tpot.Seconds())
	}
}
