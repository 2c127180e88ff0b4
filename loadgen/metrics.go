package loadgen

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the load generator's Prometheus series, named as the original
// demo named them so its Grafana dashboards keep working.
type Metrics struct {
	ttftAll  prometheus.Summary
	tpotAll  prometheus.Summary
	ttft     *prometheus.SummaryVec
	itl      *prometheus.SummaryVec
	tpot     *prometheus.SummaryVec
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
}

var objectives = map[float64]float64{0.5: 0.01, 0.95: 0.005}

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
	m := &Metrics{
		ttftAll: all("loadgen_ttft_all_seconds", "Time to first token of every request, in seconds, over the last 60 s."),
		tpotAll: all("loadgen_tpot_all_seconds", "Time per output token, (E2E-TTFT)/(OSL-1), in seconds, over the last 60 s."),
		ttft:    byTurn("loadgen_ttft_seconds", "Time to first token by turn type, in seconds, over the last 300 s."),
		itl:     byTurn("loadgen_itl_seconds", "Inter-token latency by turn type (same quantity as TPOT), in seconds, over the last 300 s."),
		tpot:    byTurn("loadgen_tpot_seconds", "Time per output token by turn type, in seconds, over the last 300 s."),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadgen_requests_total", Help: "Requests finished, by turn type and status (success or error).",
		}, []string{"turn_type", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadgen_errors_total", Help: "Failed requests by error class.",
		}, []string{"class"}),
	}
	reg.MustRegister(m.ttftAll, m.tpotAll, m.ttft, m.itl, m.tpot, m.requests, m.errors)
	return m
}

func turnType(turn int) string {
	if turn == 0 {
		return "initial"
	}
	return "followup"
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
	if tpot, ok := r.TPOT(); ok {
		m.tpotAll.Observe(tpot.Seconds())
		m.tpot.WithLabelValues(tt).Observe(tpot.Seconds())
		m.itl.WithLabelValues(tt).Observe(tpot.Seconds())
	}
}
