// Package dynamo reads NVIDIA Dynamo's frontend metrics, for the deployment
// shape where Dynamo routes and kvlens only generates load and shows what
// happens: the KV hit rate the frontend reports, and its queueing.
package dynamo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kvlens/kvlens/clock"
)

// Series names of the Dynamo frontend (shared/reference/dynamo-router.md).
const (
	cachedTokens  = "dynamo_frontend_cached_tokens"
	inputTokens   = "dynamo_frontend_input_sequence_tokens"
	inflightReqs  = "dynamo_frontend_inflight_requests"
	queuedReqs    = "dynamo_frontend_queued_requests"
	maxScrapeBody = 8 << 20 // bytes; a frontend's /metrics is far smaller
)

// Stats is what the frontend reported, over the scraper's window.
type Stats struct {
	// OK says at least two scrapes succeeded, so the rates mean something.
	OK bool `json:"ok"`
	// KVHitRate is Δcached_tokens_sum / Δinput_sequence_tokens_sum over the
	// window, from 0 to 1, as the original demo computed it.
	KVHitRate float64 `json:"kv_hit_rate"`
	// InFlight is the frontend's in-flight requests at the last scrape.
	InFlight float64 `json:"in_flight"`
	// Queued is the frontend's queued requests at the last scrape.
	Queued float64 `json:"queued"`
	// LastError is the last scrape's failure; empty when it succeeded.
	LastError string `json:"last_error,omitempty"`
}

// sample is one scrape's running totals, in tokens.
type sample struct {
	at               time.Time
	cached, input    float64
	inflight, queued float64
}

// Frontend scrapes a Dynamo frontend's /metrics.
type Frontend struct {
	url    string
	client *http.Client
	window time.Duration

	mu      sync.Mutex
	samples []sample
	lastErr error
}

// NewFrontend returns a scraper of url (such as http://frontend:8000/metrics)
// whose rates span window.
func NewFrontend(url string, window time.Duration) *Frontend {
	return &Frontend{url: url, client: &http.Client{Timeout: 5 * time.Second}, window: window}
}

// Run scrapes every interval until ctx ends.
func (f *Frontend) Run(ctx context.Context, clk clock.Clock, interval time.Duration) {
	for {
		f.Scrape(ctx, clk.Now())
		tick := make(chan struct{})
		t := clk.AfterFunc(interval, func() { close(tick) })
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
		}
	}
}

// Scrape reads the frontend once; now stamps the sample.
func (f *Frontend) Scrape(ctx context.Context, now time.Time) {
	s, err := f.read(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastErr = err
	if err != nil {
		return
	}
	s.at = now
	if n := len(f.samples); n > 0 && (s.cached < f.samples[n-1].cached || s.input < f.samples[n-1].input) {
		f.samples = f.samples[:0] // counters went back: the frontend restarted
	}
	f.samples = append(f.samples, s)
	for len(f.samples) > 2 && now.Sub(f.samples[1].at) >= f.window {
		f.samples = f.samples[1:]
	}
}

func (f *Frontend) read(ctx context.Context) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return sample{}, fmt.Errorf("dynamo: %w", err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return sample{}, fmt.Errorf("dynamo: scrape %s: %w", f.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("dynamo: scrape %s: HTTP %d", f.url, resp.StatusCode)
	}
	return parse(io.LimitReader(resp.Body, maxScrapeBody))
}

// parse reads the Prometheus text format and sums each series Dynamo
// reports across its labels (model, and so on).
func parse(r io.Reader) (sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return sample{}, fmt.Errorf("dynamo: parse metrics: %w", err)
	}
	var s sample
	var ok bool
	s.cached, ok = sum(fams[cachedTokens])
	if !ok {
		return sample{}, fmt.Errorf("dynamo: the frontend reports no %s: is this a Dynamo frontend's /metrics?", cachedTokens)
	}
	s.input, _ = sum(fams[inputTokens])
	s.inflight, _ = sum(fams[inflightReqs])
	s.queued, _ = sum(fams[queuedReqs])
	return s, nil
}

// sum adds a family's values: the sum of a histogram or summary, else the
// value of a counter or gauge.
func sum(f *dto.MetricFamily) (float64, bool) {
	if f == nil {
		return 0, false
	}
	var total float64
	for _, m := range f.Metric {
		switch {
		case m.Histogram != nil:
			total += m.Histogram.GetSampleSum()
		case m.Summary != nil:
			total += m.Summary.GetSampleSum()
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total, true
}

// Stats returns the frontend's figures over the window.
func (f *Frontend) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st Stats
	if f.lastErr != nil {
		st.LastError = f.lastErr.Error()
	}
	if len(f.samples) == 0 {
		return st
	}
	last := f.samples[len(f.samples)-1]
	st.InFlight, st.Queued = last.inflight, last.queued
	if len(f.samples) < 2 {
		return st
	}
	first := f.samples[0]
	st.OK = true
	if d := last.input - first.input; d > 0 {
		st.KVHitRate = (last.cached - first.cached) / d
	}
	return st
}
