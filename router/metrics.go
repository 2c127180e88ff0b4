package router

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the router's Prometheus metrics.
type Metrics struct {
	// Decisions counts routing decisions, by worker and policy.
	Decisions *prometheus.CounterVec
	// OverlapBlocks is the distribution of matched prefix length on the
	// chosen worker, in blocks.
	OverlapBlocks prometheus.Histogram
	// Overhead is the time a routing decision takes, by stage (hashing,
	// lookup, scoring, total), in seconds.
	Overhead *prometheus.HistogramVec
	// SequenceGaps counts gaps in a worker's KV-event sequence numbers, by
	// worker; each one clears that worker's index.
	SequenceGaps *prometheus.CounterVec
	// InferredDropped counts blocks inferred by adoption that an answer's
	// cached_tokens showed the worker no longer held, by worker.
	InferredDropped *prometheus.CounterVec
	// Retries counts requests sent to another worker after a connect failure.
	Retries prometheus.Counter
	// Shed counts requests refused with 503 because every worker was busy.
	Shed prometheus.Counter
	// UpstreamErrors counts requests that failed at the worker, by worker.
	UpstreamErrors *prometheus.CounterVec
	// TokenizeErrors counts requests routed without their tokens, and so
	// without cache affinity, because the tokenizer failed.
	TokenizeErrors prometheus.Counter
	// Refused counts requests the router refused before routing, by reason:
	// too_long (400, a prompt past the maximum context length) or too_large
	// (413, a body past the cap derived from it).
	Refused *prometheus.CounterVec
	// Blind counts the times a worker's KV routing turned blind (the index
	// predicted under a fifth of the cached tokens it reported), by worker
	// and likely cause: tokenizer_mismatch, no_events, unknown_parent.
	Blind *prometheus.CounterVec

	hashing, lookup, scoring, total prometheus.Observer
}

// NewMetrics makes the router's metrics and registers them, and a collector
// of idx's event counts, with reg; a nil reg registers nothing.
func NewMetrics(reg prometheus.Registerer, idx *Index) *Metrics {
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlens_router_decisions_total", Help: "Routing decisions, by worker and policy.",
		}, []string{"worker", "policy"}),
		OverlapBlocks: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kvlens_router_overlap_blocks", Help: "Matched prefix on the chosen worker, in blocks.",
			Buckets: []float64{0, 1, 4, 16, 64, 128, 256, 512, 1024},
		}),
		Overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvlens_router_overhead_seconds", Help: "Time spent deciding a route, by stage (hashing, lookup, scoring, total).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 16),
		}, []string{"stage"}),
		SequenceGaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlens_router_kv_event_sequence_gaps_total", Help: "Gaps in a worker's KV-event sequence numbers.",
		}, []string{"worker"}),
		InferredDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlens_router_inferred_blocks_dropped_total", Help: "Blocks inferred from a warm worker's stores that an answer's cached_tokens showed it no longer held.",
		}, []string{"worker"}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvlens_router_retries_total", Help: "Requests retried on another worker after a connect failure.",
		}),
		Shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvlens_router_shed_total", Help: "Requests refused with 503 because every worker was busy.",
		}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlens_router_upstream_errors_total", Help: "Requests that failed at the worker.",
		}, []string{"worker"}),
		TokenizeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvlens_router_tokenize_errors_total", Help: "Requests routed without their tokens (no cache affinity) because tokenizing failed.",
		}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlens_router_refused_total", Help: "Requests refused before routing: too_long (400, prompt past max_model_len) or too_large (413, body past its cap).",
		}, []string{"reason"}),
		Blind: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlens_router_blind_total", Help: "Times a worker's KV routing turned blind (index predicted under a fifth of the cached tokens the worker reported), by likely cause.",
		}, []string{"worker", "cause"}),
	}
	m.hashing = m.Overhead.WithLabelValues("hashing")
	m.lookup = m.Overhead.WithLabelValues("lookup")
	m.scoring = m.Overhead.WithLabelValues("scoring")
	m.total = m.Overhead.WithLabelValues("total")
	if reg != nil {
		reg.MustRegister(m.Decisions, m.OverlapBlocks, m.Overhead, m.SequenceGaps, m.InferredDropped, m.Retries, m.Shed, m.UpstreamErrors, m.TokenizeErrors, m.Refused, m.Blind)
		if idx != nil {
			reg.MustRegister(eventCollector{idx})
		}
	}
	return m
}

var eventsDesc = prometheus.NewDesc("kvlens_router_kv_events_total",
	"KV-event blocks applied to the index, by event type and outcome (AllBlocksCleared counts events).",
	[]string{"type", "outcome"}, nil)

// eventCollector reads the index's own counters at scrape time, which keeps
// Prometheus off the event-apply path.
type eventCollector struct{ idx *Index }

func (c eventCollector) Describe(ch chan<- *prometheus.Desc) { ch <- eventsDesc }

func (c eventCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, outcomes := range c.idx.Stats() {
		for outcome, n := range outcomes {
			ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(n), kind, outcome)
		}
	}
}

// workerGauges are read from the router's per-worker state at scrape time,
// so they cost nothing between scrapes.
var workerGauges = []struct {
	desc *prometheus.Desc
	get  func(WorkerState) float64
}{
	{prometheus.NewDesc("kvlens_router_worker_in_flight", "Requests booked on the worker and not finished.", []string{"worker"}, nil),
		func(w WorkerState) float64 { return float64(w.InFlight) }},
	{prometheus.NewDesc("kvlens_router_worker_capacity", "The worker's batch capacity (max_batch_size), in requests.", []string{"worker"}, nil),
		func(w WorkerState) float64 { return float64(w.Capacity) }},
	{prometheus.NewDesc("kvlens_router_worker_active_prefill_tokens", "Uncached prompt tokens of requests on the worker that have no first token yet.", []string{"worker"}, nil),
		func(w WorkerState) float64 { return float64(w.ActivePrefillTokens) }},
	{prometheus.NewDesc("kvlens_router_worker_indexed_blocks", "KV blocks the event index holds for the worker.", []string{"worker"}, nil),
		func(w WorkerState) float64 { return float64(w.IndexedBlocks) }},
	{prometheus.NewDesc("kvlens_router_worker_healthy", "1 when the worker answers /health, else 0.", []string{"worker"}, nil),
		func(w WorkerState) float64 {
			if w.Healthy {
				return 1
			}
			return 0
		}},
}

// streamGauges are read from each worker's KV-event stream at scrape time;
// a worker whose events are not read has none.
var streamGauges = []struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	get  func(*StreamState) float64
}{
	{prometheus.NewDesc("kvlens_router_kv_event_stream_connected", "1 when the worker's event publisher is connected, else 0.", []string{"worker"}, nil),
		prometheus.GaugeValue, func(s *StreamState) float64 { return boolValue(s.State == "connected") }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_warming", "1 while the worker holds blocks the index never saw (joined without replay, or after a gap), else 0.", []string{"worker"}, nil),
		prometheus.GaugeValue, func(s *StreamState) float64 { return boolValue(s.Warming) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_last_event_age_seconds", "Time since the worker's last KV-event message, in seconds; -1 before the first.", []string{"worker"}, nil),
		prometheus.GaugeValue, func(s *StreamState) float64 { return s.LastEventAgeSeconds }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_messages_total", "KV-event batches from the worker handed to the index, replayed ones included.", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.Messages) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_applied_blocks_total", "Blocks of the worker's events stored or removed as they said.", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.AppliedBlocks) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_decode_errors_total", "The worker's KV-event messages dropped as malformed.", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.DecodeErrors) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_replays_total", "Replay requests sent to the worker (gap fills and catch-ups).", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.Replays) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_reconnects_total", "Connections of the worker's publisher after the first after which its sequence numbers went on (a network failure, not a restart).", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.Reconnects) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_restarts_total", "Restarts of the worker's publisher: its sequence numbers started again.", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.Restarts) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_clears_total", "Times the worker's index was cleared because its event stream was stale.", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.Clears) }},
	{prometheus.NewDesc("kvlens_router_kv_event_stream_adopted_parents_total", "Parents of the worker's stores placed from a prompt in flight on it (blocks it held before kvlens joined, or lost in a gap).", []string{"worker"}, nil),
		prometheus.CounterValue, func(s *StreamState) float64 { return float64(s.AdoptedParents) }},
}

var streamDroppedDesc = prometheus.NewDesc("kvlens_router_kv_event_stream_dropped_blocks_total",
	"Blocks of the worker's events not applied, by reason.", []string{"worker", "reason"}, nil)

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var capacityFailuresDesc = prometheus.NewDesc("kvlens_router_worker_capacity_report_failures_total",
	"Times the worker was asked its batch capacity and reported nothing usable.", []string{"worker"}, nil)

// workerCollector exports every worker's live state.
type workerCollector struct{ r *Router }

func (c workerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range workerGauges {
		ch <- g.desc
	}
	ch <- capacityFailuresDesc
	for _, g := range streamGauges {
		ch <- g.desc
	}
	ch <- streamDroppedDesc
}

func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.r.Workers() {
		for _, g := range workerGauges {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.get(w), w.Name)
		}
		ch <- prometheus.MustNewConstMetric(capacityFailuresDesc, prometheus.CounterValue, float64(w.CapacityReportFailures), w.Name)
		if s := w.EventStream; s != nil {
			for _, g := range streamGauges {
				ch <- prometheus.MustNewConstMetric(g.desc, g.kind, g.get(s), w.Name)
			}
			for reason, n := range s.DroppedBlocks {
				ch <- prometheus.MustNewConstMetric(streamDroppedDesc, prometheus.CounterValue, float64(n), w.Name, reason)
			}
		}
	}
}
