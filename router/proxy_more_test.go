package router

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// chatBody is a chat request of one user message.
const chatBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"Tell me about paged attention in one long paragraph please."}]}`

// usageSSE streams two content chunks and a usage chunk reporting cached
// cached tokens, waiting on gate (if not nil) before the first content.
func usageSSE(cached int, gate chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
		w.(http.Flusher).Flush()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Paged\"}}]}\n\n")
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"prompt_tokens_details\":{\"cached_tokens\":"+itoa(cached)+"}}}\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func newTestProxy(t *testing.T, p Policy, cfg Config, specs ...string) (*Proxy, *httptest.Server) {
	t.Helper()
	ws, err := ParseWorkers(specs)
	if err != nil {
		t.Fatal(err)
	}
	px := NewProxy(NewRouter(NewPool(ws), p, cfg))
	srv := httptest.NewServer(px)
	t.Cleanup(srv.Close)
	return px, srv
}

func TestProxyRetriesAConnectFailureOnAnotherWorker(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	live := httptest.NewServer(usageSSE(0, nil))
	defer live.Close()
	px, srv := newTestProxy(t, &RoundRobin{}, Config{}, "dead="+dead.URL, "live="+live.URL)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(HeaderWorker) != "live" {
		t.Fatalf("status %d from %q; want 200 from the live worker", resp.StatusCode, resp.Header.Get(HeaderWorker))
	}
	c := px.Router().Counts()
	if c.Retries != 1 || c.InFlight != 0 {
		t.Fatalf("counts %+v; want 1 retry and nothing left in flight", c)
	}
	if px.Workers()[0].Healthy() {
		t.Fatal("a worker that refused the connection still gets new requests")
	}
}

func TestProxyNeverRetriesOnceBytesStreamed(t *testing.T) {
	var hits atomic.Int32
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer cut.Close()
	px, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a="+cut.URL, "b="+cut.URL)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), `data: {"error":`) {
		t.Fatalf("the client read %q; a cut must reach it as an error event", got)
	}
	waitFor(t, func() bool { return px.Router().Counts().InFlight == 0 })
	if hits.Load() != 1 || px.Router().Counts().Retries != 0 {
		t.Fatalf("worker hit %d times, %d retries; a stream that started must never be retried", hits.Load(), px.Router().Counts().Retries)
	}
	if st := px.Router().Workers()[0]; st.Errors != 1 {
		t.Fatalf("errors = %d, want the cut counted once", st.Errors)
	}
}

func TestProxyTracksTheRequestLifecycle(t *testing.T) {
	gate := make(chan struct{})
	wk := httptest.NewServer(usageSSE(16, gate))
	defer wk.Close()
	px, srv := newTestProxy(t, &KV{Weight: 1}, Config{}, "a="+wk.URL)
	rt := px.Router()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(HeaderOverlap) != "0" {
		t.Fatalf("%s = %q, want 0 on a cold index", HeaderOverlap, resp.Header.Get(HeaderOverlap))
	}
	br := bufio.NewReader(resp.Body)
	br.ReadString('\n') // the role-only chunk: prefill is not over yet
	st := rt.Workers()[0]
	isl := len(PromptTokens("/v1/chat/completions", []byte(chatBody)))
	if st.InFlight != 1 || st.ActivePrefillTokens != isl {
		t.Fatalf("while prefilling: in-flight %d, prefill %d; want 1, %d", st.InFlight, st.ActivePrefillTokens, isl)
	}
	close(gate)
	io.ReadAll(br)
	resp.Body.Close()
	waitFor(t, func() bool { return rt.Counts().InFlight == 0 })
	st = rt.Workers()[0]
	if st.ActivePrefillTokens != 0 || st.ActualHitTokens != 16 || st.Routed != 1 {
		t.Fatalf("after the stream: %+v; want no prefill left, 16 actual hit tokens, 1 routed", st)
	}
}

func TestProxyClientDisconnectCancelsUpstream(t *testing.T) {
	upstreamGone := make(chan struct{})
	wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(upstreamGone)
	}))
	defer wk.Close()
	px, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a="+wk.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(resp.Body).ReadString('\n')
	cancel()
	select {
	case <-upstreamGone:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker kept streaming after the client left")
	}
	waitFor(t, func() bool { return px.Router().Counts().InFlight == 0 })
}

func TestProxyShedsWith503(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	wk := httptest.NewServer(usageSSE(0, gate))
	defer wk.Close()
	px, srv := newTestProxy(t, &RoundRobin{}, Config{Admission: AdmitShed}, "a="+wk.URL+",capacity=1")
	first, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(raw), "all workers are busy") {
		t.Fatalf("got %d %s; want 503 all workers are busy", resp.StatusCode, raw)
	}
	if c := px.Router().Counts(); c.Shed != 1 {
		t.Fatalf("shed = %d, want 1", c.Shed)
	}
}

func TestProxyModelsSkipsUnhealthyWorkers(t *testing.T) {
	models := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m"}]}`)
	}))
	defer models.Close()
	px, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a=http://127.0.0.1:1", "b="+models.URL)
	px.Workers()[0].SetHealthy(false)
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"id":"m"`) {
		t.Fatalf("got %d %s", resp.StatusCode, raw)
	}
}

func TestAdminAPI(t *testing.T) {
	var resets atomic.Int32
	wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reset_prefix_cache" && r.Method == "POST" {
			resets.Add(1)
			return
		}
		usageSSE(0, nil)(w, r)
	}))
	defer wk.Close()
	px, _ := newTestProxy(t, &RoundRobin{}, Config{BlockSize: testB}, "a="+wk.URL)
	admin := httptest.NewServer(px.Admin())
	defer admin.Close()
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, admin.URL+AdminPrefix+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(raw)
	}
	tests := []struct {
		name, method, path, body string
		wantCode                 int
		wantBody                 string
	}{
		{"GET policy shows the policy and its knobs", "GET", "/policy", "", 200, `"policy": "round_robin"`},
		{"PUT policy switches the policy and keeps other knobs", "PUT", "/policy", `{"policy":"dynamo","temperature":0.5}`, 200, `"temperature": 0.5`},
		{"PUT policy sets admission", "PUT", "/policy", `{"admission":"shed","busy_threshold":0.8}`, 200, `"busy_threshold": 0.8`},
		{"GET workers shows per-worker state", "GET", "/workers", "", 200, `"indexed_blocks": 3`},
		{"POST reset resets the workers and the index", "POST", "/reset", "", 200, `"a": "ok"`},
		// sad path
		{"an unknown policy is refused, naming the choices", "PUT", "/policy", `{"policy":"magic"}`, 400, "available: round_robin"},
		{"an unknown admission is refused", "PUT", "/policy", `{"admission":"drop"}`, 400, "want queue or shed"},
		{"an unknown field is refused", "PUT", "/policy", `{"polcy":"kv"}`, 400, "unknown field"},
		{"a negative temperature is refused", "PUT", "/policy", `{"temperature":-1}`, 400, "must not be negative"},
		{"a zero busy threshold is refused", "PUT", "/policy", `{"busy_threshold":0}`, 400, "positive"},
	}
	px.Router().Index().Apply("a", stored(0, ids(1, 3), toks(1, 3)))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(tt.method, tt.path, tt.body)
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Fatalf("got %d %s; want %d containing %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	if s := px.Router().Settings(); s.Policy != "dynamo" || s.Temperature != 0.5 || s.Admission != AdmitShed || px.PolicyName() != "dynamo" {
		t.Fatalf("settings after the PUTs: %+v (live policy %s)", s, px.PolicyName())
	}
	if resets.Load() != 1 || px.Router().Index().Blocks("a") != 0 {
		t.Fatalf("resets %d, indexed blocks %d; want 1 and 0", resets.Load(), px.Router().Index().Blocks("a"))
	}
}

func TestSwitchingPolicyKeepsRequestsInFlight(t *testing.T) {
	gate := make(chan struct{})
	wk := httptest.NewServer(usageSSE(0, gate))
	defer wk.Close()
	px, srv := newTestProxy(t, &RoundRobin{}, Config{}, "a="+wk.URL)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	kv, _ := NewPolicy("kv")
	px.SetPolicy(kv)
	close(gate)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(raw), "[DONE]") {
		t.Fatalf("the in-flight stream broke on a policy switch: %v %q", err, raw)
	}
	if px.PolicyName() != "kv" {
		t.Fatalf("policy = %s", px.PolicyName())
	}
}
