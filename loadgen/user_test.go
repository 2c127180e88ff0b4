package loadgen

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBuiltinQuestionsAreVariedAndTopicAware(t *testing.T) {
	s := BuiltinStarters()[0]
	hs := cues(s.Text)
	if len(hs) < 5 {
		t.Fatalf("%d section headings found in %s, want its ## headings", len(hs), s.ID)
	}
	reply := "The block table maps each logical block to a physical block, so fragmentation stays below one block per sequence."
	rng := rand.New(rand.NewPCG(1, 1))
	distinct := map[string]bool{}
	var fromHeading, fromReply, withTopic int
	for range 200 {
		q := followUp(s, hs, reply, rng)
		distinct[q] = true
		for _, h := range hs {
			if strings.Contains(q, h) {
				fromHeading++
				break
			}
		}
		if strings.Contains(q, "block") || strings.Contains(q, "fragmentation") || strings.Contains(q, "sequence") {
			fromReply++
		}
		if strings.Contains(q, s.Topic) {
			withTopic++
		}
	}
	if len(distinct) < 50 || fromHeading < 20 || fromReply < 40 || withTopic < 40 {
		t.Fatalf("200 questions: %d distinct, %d name a heading, %d quote the reply, %d name the topic", len(distinct), fromHeading, fromReply, withTopic)
	}
}

func TestKeyPhraseAvoidsStopWordEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for range 100 {
		p, ok := keyPhrase("the cache of the model is a table of the blocks and the pages in the pool", rng)
		if !ok {
			continue
		}
		w := strings.Fields(p)
		if stopWords[w[0]] || stopWords[w[len(w)-1]] {
			t.Fatalf("phrase %q starts or ends on a stop word", p)
		}
	}
	if _, ok := keyPhrase("too short", rng); ok {
		t.Fatal("found a phrase in a two-word reply")
	}
}

func TestMetricsKeepTheOriginalNamesAndAddHistograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.observe(0, Result{TTFT: 100e6, E2E: 2e9, OSL: 50, Worker: "w1"})
	m.observe(1, Result{Err: errString("x"), Class: ErrHTTP503})
	m.fallback()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{
		"loadgen_ttft_all_seconds", "loadgen_tpot_all_seconds", "loadgen_ttft_seconds", "loadgen_itl_seconds",
		"loadgen_tpot_seconds", "loadgen_requests_total", "loadgen_errors_total",
		"loadgen_ttft_histogram_seconds", "loadgen_tpot_histogram_seconds", "loadgen_e2e_histogram_seconds",
		"loadgen_user_model_fallbacks_total",
	} {
		if !got[name] {
			t.Errorf("missing series %s", name)
		}
	}
}

// TestErrorCountersStartAtZero: before the first failure a scrape already
// holds every error class and both statuses at 0, so that a dashboard's
// error rate reads 0% from the start, not "no data".
func TestErrorCountersStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("%s %v = %v before any request", mf.GetName(), m.GetLabel(), m.GetCounter().GetValue())
			}
			series[mf.GetName()]++
		}
	}
	if series["loadgen_errors_total"] != len(ErrorClasses) || series["loadgen_requests_total"] != 4 {
		t.Fatalf("series before any request: %v; want every error class and initial/followup × success/error", series)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
