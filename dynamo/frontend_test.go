package dynamo

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// exposition writes a frontend's /metrics with the given running totals, as
// histograms split over two models, the way Dynamo labels them.
func exposition(cached, input, inflight, queued float64) string {
	var b strings.Builder
	for _, h := range []struct {
		name string
		sum  float64
	}{{cachedTokens, cached}, {inputTokens, input}} {
		fmt.Fprintf(&b, "# TYPE %s histogram\n", h.name)
		for _, model := range []string{"a", "b"} {
			fmt.Fprintf(&b, "%s_bucket{model=%q,le=\"+Inf\"} 1\n%s_sum{model=%q} %g\n%s_count{model=%q} 1\n", h.name, model, h.name, model, h.sum/2, h.name, model)
		}
	}
	fmt.Fprintf(&b, "# TYPE %s gauge\n%s{model=\"a\"} %g\n", inflightReqs, inflightReqs, inflight)
	fmt.Fprintf(&b, "# TYPE %s gauge\n%s{model=\"a\"} %g\n", queuedReqs, queuedReqs, queued)
	return b.String()
}

func TestFrontendHitRateAndQueueing(t *testing.T) {
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, body.Load().(string))
	}))
	defer srv.Close()
	f := NewFrontend(srv.URL, 60*time.Second)
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		name     string
		at       time.Duration
		body     string
		wantOK   bool
		wantRate float64
		wantQ    float64
	}{
		// one scrape: levels known, no rate yet
		{"one scrape gives levels but no rate", 0, exposition(9000, 10000, 30, 0), false, 0, 0},
		// +900 cached of +1000 input => 90%
		{"the hit rate is the ratio of the increments", 10 * time.Second, exposition(9900, 11000, 40, 2), true, 0.9, 2},
		// totals fell: a restart; start over
		{"a frontend restart starts the window over", 20 * time.Second, exposition(100, 200, 10, 5), false, 0, 5},
		// +250 of +1000 since the restart => 25%
		{"after a restart the rate counts from it", 30 * time.Second, exposition(350, 1200, 10, 1), true, 0.25, 1},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			body.Store(st.body)
			f.Scrape(context.Background(), t0.Add(st.at))
			got := f.Stats()
			if got.OK != st.wantOK || math.Abs(got.KVHitRate-st.wantRate) > 1e-9 || got.Queued != st.wantQ {
				t.Fatalf("stats = %+v; want ok %v, rate %v, queued %v", got, st.wantOK, st.wantRate, st.wantQ)
			}
		})
	}
}

func TestFrontendScrapeErrorsAreReported(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"an HTTP error is named", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 503) }, "HTTP 503"},
		{"a non-Dynamo /metrics says so", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "# TYPE x counter\nx 1\n")
		}, "is this a Dynamo frontend"},
		{"garbage is a parse error", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "{{{ not metrics") }, "parse metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			f := NewFrontend(srv.URL, time.Minute)
			f.Scrape(context.Background(), time.Now())
			if got := f.Stats(); got.OK || !strings.Contains(got.LastError, tt.want) || strings.Contains(got.LastError, "\n") {
				t.Fatalf("stats = %+v, want a one-line error containing %q", got, tt.want)
			}
		})
	}
}

// FuzzParse feeds the frontend's /metrics parser anything: a one-line
// error (the page shows it), and no NaN it was not sent.
func FuzzParse(f *testing.F) {
	f.Add(exposition(1, 2, 3, 4))
	f.Add("# TYPE dynamo_frontend_cached_tokens counter\ndynamo_frontend_cached_tokens 5\n")
	f.Add("")
	f.Add("# TYPE x gauge\nx{a=\"\n\"} 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := parse(strings.NewReader(text))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		if math.IsNaN(s.cached) && !strings.Contains(text, "NaN") {
			t.Fatalf("NaN from %q", text)
		}
	})
}

// FuzzParseReadsBackWhatTheFrontendReports writes the four series Dynamo's
// frontend reports and reads them back: each the sum over its labels.
func FuzzParseReadsBackWhatTheFrontendReports(f *testing.F) {
	f.Add(1000.0, 4000.0, 12.0, 3.0)
	f.Add(0.0, 0.0, 0.0, 0.0)
	f.Fuzz(func(t *testing.T, cached, input, inflight, queued float64) {
		for _, v := range []float64{cached, input, inflight, queued} {
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e300 {
				return
			}
		}
		s, err := parse(strings.NewReader(exposition(cached, input, inflight, queued)))
		if err != nil {
			t.Fatal(err)
		}
		// exposition writes each histogram's sum as two halves.
		near := func(a, b float64) bool { return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
		if !near(s.cached, cached) || !near(s.input, input) || s.inflight != inflight || s.queued != queued {
			t.Fatalf("read %+v, want cached %g, input %g, in flight %g, queued %g", s, cached, input, inflight, queued)
		}
	})
}
