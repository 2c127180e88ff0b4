package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlens/kvlens/kvevents"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ws := fleet(2)
	rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB, Registerer: reg})
	rt.Index().Apply("a", stored(0, ids(1, 3), toks(1, 3)))
	rt.Index().Apply("a", stored(99, ids(4, 2), toks(4, 2))) // unknown parent
	rt.Index().Apply("a", &kvevents.BlockRemoved{BlockHashes: []uint64{1, 50}})
	rt.SequenceGap("b")
	b, _ := rt.Decide(&Request{TokenIDs: toks(1, 3)}, nil)
	b.Release()
	tests := []struct {
		name, metric string
		want         string
	}{
		{"stored blocks are counted by outcome", "kvlens_router_kv_events_total", `kvlens_router_kv_events_total{outcome="applied",type="BlockStored"} 3`},
		{"a dropped store is counted", "kvlens_router_kv_events_total", `kvlens_router_kv_events_total{outcome="unknown_parent",type="BlockStored"} 2`},
		{"an unknown removed block is counted", "kvlens_router_kv_events_total", `kvlens_router_kv_events_total{outcome="unknown_block",type="BlockRemoved"} 1`},
		{"sequence gaps are counted per worker", "kvlens_router_kv_event_sequence_gaps_total", `kvlens_router_kv_event_sequence_gaps_total{worker="b"} 1`},
		{"decisions are counted by worker and policy", "kvlens_router_decisions_total", `kvlens_router_decisions_total{policy="round_robin",worker="a"} 1`},
		{"overhead is observed per stage", "kvlens_router_overhead_seconds", `kvlens_router_overhead_seconds_count{stage="lookup"} 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := gatherText(reg)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tt.want) {
				t.Fatalf("exposition lacks %q:\n%s", tt.want, got)
			}
		})
	}
}

func gatherText(reg *prometheus.Registry) (string, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			lab := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				sb.WriteString(mf.GetName() + lab + " " + strconv.FormatFloat(m.GetCounter().GetValue(), 'g', -1, 64) + "\n")
			case m.Histogram != nil:
				sb.WriteString(mf.GetName() + "_count" + lab + " " + strconv.FormatUint(m.GetHistogram().GetSampleCount(), 10) + "\n")
			}
		}
	}
	return sb.String(), nil
}

func TestProxyReportsTheMatchedPrefix(t *testing.T) {
	a := newSSEServer(t)
	b := newSSEServer(t)
	px, srv := newTestProxy(t, &KV{Weight: 1}, Config{}, "a="+a, "b="+b)
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("Tell me about paged attention and prefix caching. ", 20) + `"}]}`
	tokens := PromptTokens("/v1/chat/completions", []byte(body))
	chain := px.Router().Hash(tokens)
	bs := px.Router().BlockSize()
	// Worker b published that it stores the prompt's full blocks.
	px.Router().Index().Apply("b", &kvevents.BlockStored{BlockHashes: chain, TokenIDs: tokens[:len(chain)*bs], BlockSize: bs})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Header.Get(HeaderWorker) != "b" || resp.Header.Get(HeaderOverlap) != strconv.Itoa(len(chain)) || len(chain) == 0 {
		t.Fatalf("routed to %q with %s = %q; want b with %d", resp.Header.Get(HeaderWorker), HeaderOverlap, resp.Header.Get(HeaderOverlap), len(chain))
	}
	if st := px.Router().Workers()[1]; st.PredictedHitTokens != int64(len(chain)*bs) {
		t.Fatalf("predicted hit tokens = %d, want %d", st.PredictedHitTokens, len(chain)*bs)
	}
}

func newSSEServer(t *testing.T) string {
	s := httptest.NewServer(usageSSE(0, nil))
	t.Cleanup(s.Close)
	return s.URL
}
