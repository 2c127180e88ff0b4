package router

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/sim"
)

func TestParseCapacityReport(t *testing.T) {
	const vllm, sglang = "/inference/v1/config", "/get_server_info"
	tests := []struct {
		name    string
		path    string
		body    string
		want    int
		wantErr string // part of the error; "" when none
	}{
		{"vLLM's scheduler.max_num_seqs is the capacity", vllm,
			`{"model":{"max_model_len":16384},"scheduler":{"max_num_seqs":8,"max_num_batched_tokens":8192}}`, 8, ""},
		{"SGLang's max_running_requests is the capacity, among its other server arguments", sglang,
			`{"model_path":"m","max_running_requests":128,"max_total_num_tokens":20480,"internal_states":[{}]}`, 128, ""},
		{"the largest believable capacity is accepted", sglang, `{"max_running_requests":1048576}`, 1 << 20, ""},
		// sad path
		{"SGLang's null (it sized the batch itself) reports nothing", sglang, `{"max_running_requests":null}`, 0, "no batch capacity"},
		{"an answer without the field reports nothing", sglang, `{"model_path":"m"}`, 0, "max_running_requests is missing"},
		{"a vLLM answer without a scheduler reports nothing", vllm, `{"model":{}}`, 0, "scheduler.max_num_seqs is missing"},
		{"a vLLM answer with a null scheduler reports nothing", vllm, `{"scheduler":null}`, 0, "no batch capacity"},
		{"zero is refused", vllm, `{"scheduler":{"max_num_seqs":0}}`, 0, "not a whole number from 1"},
		{"a negative number is refused", sglang, `{"max_running_requests":-4}`, 0, "not a whole number from 1"},
		{"a fraction is refused", sglang, `{"max_running_requests":8.5}`, 0, "not a whole number"},
		{"an exponent is refused", sglang, `{"max_running_requests":1e3}`, 0, "not a whole number"},
		{"an absurdly large number is refused", sglang, `{"max_running_requests":99999999999999999999}`, 0, "not a whole number"},
		{"a quoted number is refused", vllm, `{"scheduler":{"max_num_seqs":"8"}}`, 0, "not a number"},
		{"a body that is not JSON is refused", sglang, `<html>502 Bad Gateway</html>`, 0, "not the JSON object expected"},
		{"a JSON array is refused", vllm, `[8]`, 0, "not the JSON object expected"},
		{"an empty body is refused", sglang, ``, 0, "not the JSON object expected"},
		{"an endpoint that reports no capacity is refused", "/metrics", `{}`, 0, "not an endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCapacityReport(tt.path, []byte(tt.body))
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("capacity = %d, want %d", got, tt.want)
			}
		})
	}
}

func FuzzParseCapacityReport(f *testing.F) {
	for _, seed := range []struct{ path, body string }{
		{"/inference/v1/config", `{"scheduler":{"max_num_seqs":8}}`},
		{"/inference/v1/config", `{"scheduler":{"max_num_seqs":-1e400}}`},
		{"/get_server_info", `{"max_running_requests":128,"x":[1,{"y":null}]}`},
		{"/get_server_info", `{"max_running_requests":"\u0000\n"}`},
		{"/get_server_info", `{"max_running_requests":12345678901234567890123}`},
		{"/metrics", "vllm:num_requests_running 3\n"},
	} {
		f.Add(seed.path, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		n, err := ParseCapacityReport(path, body)
		if err != nil {
			if n != 0 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("failure returned %d and error %q; want 0 and one line", n, err)
			}
			return
		}
		if n < 1 || n > maxReportedCapacity {
			t.Fatalf("accepted capacity %d from %q", n, body)
		}
	})
}

// simWorker serves a simulated worker whose batch capacity is capacity,
// hiding the capacity endpoints not in show (all shown when show is empty).
func simWorker(t *testing.T, capacity int, show ...string) *httptest.Server {
	t.Helper()
	prof := sim.MustProfile(sim.DefaultProfile)
	prof.MaxBatchSize = capacity
	s, err := sim.NewServer(sim.ServerOptions{Name: "sim", Profile: prof})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	hidden := map[string]bool{}
	for _, p := range capacityProbes {
		hidden[p.path] = len(show) > 0
	}
	for _, p := range show {
		hidden[p] = false
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hidden[r.URL.Path] {
			http.NotFound(w, r)
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCapacityLearnedFromSimulatedWorker(t *testing.T) {
	tests := []struct {
		name string
		show []string // capacity endpoints the worker answers
	}{
		{"read through vLLM's GET /inference/v1/config", []string{"/inference/v1/config"}},
		{"read through SGLang's GET /get_server_info", []string{"/get_server_info"}},
		{"read through either when the worker answers both", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := simWorker(t, 8, tt.show...)
			ws, _ := ParseWorkers([]string{"sim=" + srv.URL})
			pool := NewPool(ws)
			px := NewProxy(NewRouter(pool, &KV{Weight: 1}, Config{}))
			pool.CheckHealth(context.Background(), http.DefaultClient, 5*time.Second)
			if c, src := ws[0].BatchCapacity(); c != 8 || src != CapacityWorker {
				t.Fatalf("capacity = %d (%s), want 8 (worker)", c, src)
			}

			// The admin API shows it, and where it came from.
			admin := httptest.NewServer(px.Admin())
			defer admin.Close()
			resp, err := http.Get(admin.URL + AdminPrefix + "/workers")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Workers []struct {
					Capacity         int    `json:"capacity"`
					CapacitySource   string `json:"capacity_source"`
					CapacityReported int    `json:"capacity_reported"`
					Failures         int64  `json:"capacity_report_failures"`
				} `json:"workers"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if w := got.Workers[0]; w.Capacity != 8 || w.CapacitySource != "worker" || w.CapacityReported != 8 || w.Failures != 0 {
				t.Fatalf("admin shows %+v, want capacity 8 from the worker, no failures", w)
			}
		})
	}
}

// reporter is a worker whose health and capacity answer the test sets.
type reporter struct {
	mu     sync.Mutex
	status int    // /health status
	code   int    // /get_server_info status
	body   string // /get_server_info answer
	asked  atomic.Int64
}

func newReporter(t *testing.T, body string) (*reporter, *httptest.Server) {
	rep := &reporter{status: 200, code: 200, body: body}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep.mu.Lock()
		defer rep.mu.Unlock()
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(rep.status)
		case "/get_server_info":
			rep.asked.Add(1)
			w.WriteHeader(rep.code)
			fmt.Fprint(w, rep.body)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return rep, srv
}

func (r *reporter) set(code int, body string) {
	r.mu.Lock()
	r.code, r.body = code, body
	r.mu.Unlock()
}

func TestCapacityPrecedence(t *testing.T) {
	tests := []struct {
		name       string
		option     string // the worker's capacity= option, if any
		flag       int    // --max-batch-size; 0 when unset
		reported   string // the worker's /get_server_info answer
		want       int
		wantSource string
	}{
		{"a worker that reports nothing gets the default", "", 0, `{"max_running_requests":null}`, 64, "default"},
		{"what the worker reports wins over the default", "", 0, `{"max_running_requests":8}`, 8, "worker"},
		{"the router's flag wins over what the worker reports", "", 32, `{"max_running_requests":8}`, 32, "flag"},
		{"the worker's capacity= option wins over what it reports", ",capacity=16", 0, `{"max_running_requests":8}`, 16, "flag"},
		{"the worker's capacity= option wins over the router's flag", ",capacity=16", 32, `{"max_running_requests":8}`, 16, "flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newReporter(t, tt.reported)
			ws, err := ParseWorkers([]string{"w=" + srv.URL + tt.option})
			if err != nil {
				t.Fatal(err)
			}
			pool := NewPool(ws)
			pool.SetCapacity(tt.flag)
			pool.CheckHealth(context.Background(), http.DefaultClient, 5*time.Second)
			if c, src := ws[0].BatchCapacity(); c != tt.want || src != tt.wantSource {
				t.Fatalf("capacity = %d (%s), want %d (%s)", c, src, tt.want, tt.wantSource)
			}
		})
	}

	t.Run("unsetting the flag gives the capacity back to what the worker reports", func(t *testing.T) {
		_, srv := newReporter(t, `{"max_running_requests":8}`)
		ws, _ := ParseWorkers([]string{"w=" + srv.URL})
		pool := NewPool(ws)
		pool.SetCapacity(32)
		pool.CheckHealth(context.Background(), http.DefaultClient, 5*time.Second)
		pool.SetCapacity(0)
		if c, src := ws[0].BatchCapacity(); c != 8 || src != CapacityWorker {
			t.Fatalf("capacity = %d (%s), want 8 (worker)", c, src)
		}
	})

	t.Run("a DNS-discovered worker gets the flag and learns like a static one", func(t *testing.T) {
		srv := simWorker(t, 8)
		host, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
		pool := NewPool(nil)
		res := &fakeResolver{hosts: map[string][]string{"svc": {host}}}
		src := DNSSource{Service: "svc", Port: port}
		if err := pool.Resolve(context.Background(), res, src); err != nil {
			t.Fatal(err)
		}
		pool.CheckHealth(context.Background(), http.DefaultClient, 5*time.Second)
		w := pool.Workers()[0]
		if c, src := w.BatchCapacity(); c != 8 || src != CapacityWorker {
			t.Fatalf("discovered worker's capacity = %d (%s), want 8 (worker)", c, src)
		}
		pool.SetCapacity(20)
		if c, src := w.BatchCapacity(); c != 20 || src != CapacityFlag {
			t.Fatalf("after the flag: %d (%s), want 20 (flag)", c, src)
		}
	})
}

func TestCapacityBadReportsKeepThePriorValue(t *testing.T) {
	rep, srv := newReporter(t, `{"max_running_requests":8}`)
	ws, _ := ParseWorkers([]string{"w=" + srv.URL})
	pool := NewPool(ws)
	rt := NewRouter(pool, &KV{Weight: 1}, Config{})
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	clk := des.New(time.Unix(1_700_000_000, 0))
	poll := func() {
		clk.Run(CapacityRefresh) // every poll is due for an ask
		pool.checkHealth(context.Background(), clk, http.DefaultClient, time.Second, logf)
	}
	poll()
	if c, src := ws[0].BatchCapacity(); c != 8 || src != CapacityWorker {
		t.Fatalf("capacity = %d (%s), want 8 (worker)", c, src)
	}

	bad := []struct {
		name   string
		code   int
		body   string
		reason string // part of the logged reason
	}{
		{"an error status", 500, `oops`, "GET /get_server_info: 500 Internal Server Error"},
		{"a body that is not JSON", 200, `<html>`, "not the JSON object expected"},
		{"a null capacity", 200, `{"max_running_requests":null}`, "max_running_requests is missing or null"},
		{"a zero capacity", 200, `{"max_running_requests":0}`, "not a whole number from 1"},
	}
	for i, b := range bad {
		rep.set(b.code, b.body)
		poll()
		poll() // the same reason again is counted, not logged again
		if c, src := ws[0].BatchCapacity(); c != 8 || src != CapacityWorker {
			t.Fatalf("after %s: capacity = %d (%s), want the prior 8 (worker)", b.name, c, src)
		}
		if got := ws[0].learn.failures.Load(); got != int64(2*(i+1)) {
			t.Fatalf("after %s: %d failures counted, want %d", b.name, got, 2*(i+1))
		}
		last := logs[len(logs)-1]
		if !strings.Contains(last, b.reason) || !strings.Contains(last, "keeping 8 (worker)") || strings.Contains(last, "\n") {
			t.Fatalf("after %s: logged %q, want one line with %q that keeps 8", b.name, last, b.reason)
		}
		if st := rt.Workers()[0]; !strings.Contains(st.CapacityReportError, b.reason) {
			t.Fatalf("after %s: admin shows error %q", b.name, st.CapacityReportError)
		}
	}
	if len(logs) != 1+len(bad) {
		t.Fatalf("logged %d lines, want one when learned and one per new reason:\n%s", len(logs), strings.Join(logs, "\n"))
	}
	// The router kept serving throughout, and a good report heals.
	if b, err := rt.Decide(&Request{}, nil); err != nil || b.Worker != ws[0] {
		t.Fatalf("decide = %v, %v", b, err)
	}
	rep.set(200, `{"max_running_requests":12}`)
	poll()
	if c, src := ws[0].BatchCapacity(); c != 12 || src != CapacityWorker {
		t.Fatalf("after a good report: %d (%s), want 12 (worker)", c, src)
	}
	if st := rt.Workers()[0]; st.CapacityReportError != "" || st.CapacityReported != 12 {
		t.Fatalf("admin after a good report: %+v", st)
	}

	t.Run("a worker that never reports keeps the default and is logged once", func(t *testing.T) {
		_, srv := newReporter(t, `{}`)
		ws, _ := ParseWorkers([]string{"w=" + srv.URL})
		pool := NewPool(ws)
		var logs []string
		logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
		for range 3 {
			clk.Run(CapacityRefresh)
			pool.checkHealth(context.Background(), clk, http.DefaultClient, time.Second, logf)
		}
		if c, src := ws[0].BatchCapacity(); c != DefaultCapacity || src != CapacityDefault {
			t.Fatalf("capacity = %d (%s), want 64 (default)", c, src)
		}
		// Both endpoints were tried: vLLM's is missing, SGLang's has no field.
		want := "router: worker w reports no usable batch capacity (GET /inference/v1/config: 404 Not Found; " +
			"GET /get_server_info: no batch capacity in the answer (max_running_requests is missing or null)); keeping 64 (default)"
		if len(logs) != 1 || logs[0] != want {
			t.Fatalf("logged %q, want once %q", logs, want)
		}
		if got := ws[0].learn.failures.Load(); got != 3 {
			t.Fatalf("%d failures counted, want 3", got)
		}
	})
}

func TestCapacityIsAskedAtFirstPollOnRecoveryAndEveryRefresh(t *testing.T) {
	rep, srv := newReporter(t, `{"max_running_requests":8}`)
	ws, _ := ParseWorkers([]string{"w=" + srv.URL})
	pool := NewPool(ws)
	clk := des.New(time.Unix(1_700_000_000, 0))
	poll := func(after time.Duration) {
		clk.Run(after)
		pool.checkHealth(context.Background(), clk, http.DefaultClient, time.Second, nil)
	}
	steps := []struct {
		name      string
		after     time.Duration // since the previous poll
		health    int
		report    string
		wantAsked int64 // asks so far
		want      int   // capacity after the poll
	}{
		{"the first healthy poll asks", 0, 200, `{"max_running_requests":8}`, 1, 8},
		{"a poll 2 s later does not ask again", 2 * time.Second, 200, `{"max_running_requests":8}`, 1, 8},
		{"a restart with a new setting is picked up within CapacityRefresh", CapacityRefresh, 200, `{"max_running_requests":16}`, 2, 16},
		{"a failed health poll does not ask", 2 * time.Second, 503, `{"max_running_requests":4}`, 2, 16},
		{"coming back healthy asks at once", 2 * time.Second, 200, `{"max_running_requests":4}`, 3, 4},
		{"and then waits CapacityRefresh again", 2 * time.Second, 200, `{"max_running_requests":4}`, 3, 4},
	}
	for _, s := range steps {
		rep.mu.Lock()
		rep.status, rep.body = s.health, s.report
		rep.mu.Unlock()
		poll(s.after)
		c, _ := ws[0].BatchCapacity()
		if got := rep.asked.Load(); got != s.wantAsked || c != s.want {
			t.Fatalf("%s: asked %d times, capacity %d; want %d asks, capacity %d", s.name, got, c, s.wantAsked, s.want)
		}
	}
}

func TestKVPolicyRespectsLearnedCapacity(t *testing.T) {
	tests := []struct {
		name     string
		reported int // what the small worker reports
		want     string
	}{
		{"a worker reporting 8 gets no ninth request while another has room", 8,
			strings.Repeat("small ", 8) + strings.Repeat("big ", 4)},
		// The control: the same load with room on small stays on small, so
		// the split above is the learned capacity's doing.
		{"a worker reporting 64 takes all twelve", 64, strings.Repeat("small ", 12)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			small, big := simWorker(t, tt.reported), simWorker(t, 64)
			ws, _ := ParseWorkers([]string{"small=" + small.URL, "big=" + big.URL})
			pool := NewPool(ws)
			rt := NewRouter(pool, &KV{Weight: 1}, Config{BlockSize: testB})
			pool.CheckHealth(context.Background(), http.DefaultClient, 5*time.Second)
			if c, src := ws[0].BatchCapacity(); c != tt.reported || src != CapacityWorker {
				t.Fatalf("small worker's capacity = %d (%s), want the reported %d", c, src, tt.reported)
			}
			// Big is busy with 20 short requests; small holds the whole
			// prompt, and big has room to spare, so a full small is
			// skipped. Every request would rather go to small while it
			// has room.
			for i := range 20 {
				if _, err := rt.Decide(&Request{TokenIDs: toks(10_000+i*1000, 10)}, ws[:1]); err != nil {
					t.Fatal(err)
				}
			}
			prompt := toks(1, 16)
			rt.Index().Apply("small", stored(0, ids(1, 16), prompt))
			var got strings.Builder
			for range 12 {
				b, err := rt.Decide(&Request{TokenIDs: prompt}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString(b.Worker.Name + " ")
			}
			if got.String() != tt.want {
				t.Fatalf("routed %q, want %q", got.String(), tt.want)
			}
		})
	}
}

func TestCapacityAskThatHangsIsCutAtTheTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		<-r.Context().Done() // never answers a capacity ask
	}))
	defer srv.Close()
	ws, _ := ParseWorkers([]string{"w=" + srv.URL})
	pool := NewPool(ws)
	const timeout = 500 * time.Millisecond
	start := time.Now()
	pool.CheckHealth(context.Background(), http.DefaultClient, timeout)
	// Health answers at once; both capacity asks share one timeout, where
	// one each would take twice as long.
	if took := time.Since(start); took >= 2*timeout {
		t.Fatalf("the poll took %v; the asks must share one %v timeout", took, timeout)
	}
	if c, src := ws[0].BatchCapacity(); !ws[0].Healthy() || c != DefaultCapacity || src != CapacityDefault {
		t.Fatalf("healthy %v, capacity %d (%s); want a healthy worker at 64 (default)", ws[0].Healthy(), c, src)
	}
	if st := NewRouter(pool, &KV{}, Config{}).Workers()[0]; st.CapacityReportFailures != 1 || !strings.Contains(st.CapacityReportError, "deadline exceeded") {
		t.Fatalf("admin shows %d failures, error %q", st.CapacityReportFailures, st.CapacityReportError)
	}
}
