package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/des"
)

func TestParseWorkers(t *testing.T) {
	tests := []struct {
		name    string
		urls    []string
		want    string // name url events capacity source, per worker
		wantErr string
	}{
		{"http base URLs are accepted and named in order", []string{"http://127.0.0.1:8000", "https://gpu-1:8000/"},
			"w0 http://127.0.0.1:8000  64 default|w1 https://gpu-1:8000  64 default", ""},
		{"a named worker keeps its name, events endpoint and capacity", []string{"gpu0=http://10.0.0.1:8000,events=tcp://10.0.0.1:5557,capacity=128"},
			"gpu0 http://10.0.0.1:8000 tcp://10.0.0.1:5557 128 flag", ""},
		// sad path
		{"an empty list is refused", nil, "", "no workers"},
		{"a URL without scheme is refused", []string{"127.0.0.1:8000"}, "", "not an http(s) base URL"},
		{"a non-http scheme is refused", []string{"tcp://x:1"}, "", "not an http(s) base URL"},
		{"an OpenAI base URL, whose health checks would all fail, is refused", []string{"http://127.0.0.1:8000/v1"}, "", "give the worker's base URL, without /v1"},
		{"an events endpoint that is not tcp is refused", []string{"a=http://x:1,events=http://x:2"}, "", "not a tcp://host:port"},
		{"a zero capacity is refused", []string{"a=http://x:1,capacity=0"}, "", "not a whole number from 1 to 65536"},
		{"a capacity no engine batches is refused", []string{"a=http://x:1,capacity=100000000"}, "", `capacity "100000000" is not a whole number from 1 to 65536`},
		{"an unknown option is refused", []string{"a=http://x:1,color=red"}, "", "unknown worker option"},
		{"a name used twice is refused", []string{"a=http://x:1", "a=http://y:1"}, "", "used twice"},
		{"an empty name is refused", []string{"=http://x:1"}, "", "empty name"},
		{"a dns source needs a pool", []string{"dns://svc:8000"}, "", "need a router Pool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := ParseWorkers(tt.urls)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			var got []string
			for _, w := range ws {
				c, src := w.BatchCapacity()
				got = append(got, fmt.Sprintf("%s %s %s %d %s", w.Name, w.URL, w.Events, c, src))
			}
			if strings.Join(got, "|") != tt.want {
				t.Fatalf("workers = %q, want %q", strings.Join(got, "|"), tt.want)
			}
		})
	}
}

func TestParseFleetDNS(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		want    DNSSource
		wantErr string
	}{
		{"a headless service and port", "dns://vllm.default.svc:8000", DNSSource{Service: "vllm.default.svc", Port: "8000"}, ""},
		{"an events port rides in the query", "dns://vllm:8000?events=5557", DNSSource{Service: "vllm", Port: "8000", EventsPort: "5557"}, ""},
		{"a missing port is refused", "dns://vllm", DNSSource{}, "want dns://service:port"},
		{"a port out of range is refused", "dns://vllm:99999", DNSSource{}, "1 to 65535"},
		{"a bad events port is refused", "dns://vllm:80?events=x", DNSSource{}, "1 to 65535"},
		{"a misspelt option is refused, not left without events", "dns://vllm:80?evnts=5557", DNSSource{}, `unknown option "evnts": want events=PORT or replay=PORT`},
		{"an option of no port is refused", "dns://vllm:80?events=5557&replay=", DNSSource{}, "replay= wants one port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFleet([]string{tt.spec})
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if err == nil && (len(f.DNS) != 1 || f.DNS[0] != tt.want) {
				t.Fatalf("dns = %+v, want %+v", f.DNS, tt.want)
			}
		})
	}
}

func TestSplitWorkerList(t *testing.T) {
	got := SplitWorkerList("http://a:1, b=http://b:1,events=tcp://b:2,capacity=8,dns://svc:80?events=5557,")
	want := []string{"http://a:1", "b=http://b:1,events=tcp://b:2,capacity=8", "dns://svc:80?events=5557"}
	if !slices.Equal(got, want) {
		t.Fatalf("split = %q, want %q", got, want)
	}
}

// fakeResolver answers from a map that tests change.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]string
	err   error
}

func (r *fakeResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[host] = addrs
}

func (r *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return slices.Clone(r.hosts[host]), nil
}

func names(ws []*Worker) string {
	var s []string
	for _, w := range ws {
		s = append(s, w.Name)
	}
	return strings.Join(s, " ")
}

func TestPoolDNSDiscovery(t *testing.T) {
	res := &fakeResolver{hosts: map[string][]string{}}
	static, _ := ParseWorkers([]string{"s=http://static:1"})
	pool := NewPool(static)
	rt := NewRouter(pool, &RoundRobin{}, Config{BlockSize: testB})
	src := DNSSource{Service: "vllm", Port: "8000", EventsPort: "5557"}

	res.set("vllm", "10.0.0.2", "10.0.0.1")
	if err := pool.Resolve(context.Background(), res, src); err != nil {
		t.Fatal(err)
	}
	if got := names(pool.Workers()); got != "s 10.0.0.1:8000 10.0.0.2:8000" {
		t.Fatalf("after the first lookup: %s", got)
	}
	if w := pool.Workers()[1]; w.URL.String() != "http://10.0.0.1:8000" || w.Events != "tcp://10.0.0.1:5557" {
		t.Fatalf("discovered worker = %s events %s", w.URL, w.Events)
	}
	p := toks(1, 3)
	rt.Index().Apply("10.0.0.1:8000", stored(0, ids(1, 3), p))
	kept := pool.Workers()[2]

	// One pod goes, another comes.
	res.set("vllm", "10.0.0.3", "10.0.0.2")
	pool.Resolve(context.Background(), res, src)
	if got := names(pool.Workers()); got != "s 10.0.0.2:8000 10.0.0.3:8000" {
		t.Fatalf("after a pod left and one joined: %s", got)
	}
	if pool.Workers()[1] != kept {
		t.Fatal("a worker that stayed was replaced, losing its state")
	}
	if got := rt.Index().Overlap(blockhash.Chain(p, testB)); len(got) != 0 {
		t.Fatalf("the leaving worker's index entries stayed: %v", got)
	}

	// A failed lookup keeps the last workers.
	res.err = errors.New("no such host")
	if err := pool.Resolve(context.Background(), res, src); err == nil || !strings.Contains(err.Error(), "resolve vllm") {
		t.Fatalf("err = %v", err)
	}
	if got := names(pool.Workers()); got != "s 10.0.0.2:8000 10.0.0.3:8000" {
		t.Fatalf("after a failed lookup: %s", got)
	}
}

func TestPoolDiscoverReresolvesEveryTenSeconds(t *testing.T) {
	res := &fakeResolver{hosts: map[string][]string{"svc": {"10.0.0.1"}}}
	pool := NewPool(nil)
	clk := des.New(time.Unix(1_700_000_000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { pool.Discover(ctx, clk, res, DNSSource{Service: "svc", Port: "80"}, nil); close(done) }()
	waitFor(t, func() bool { return names(pool.Workers()) == "10.0.0.1:80" })
	res.set("svc", "10.0.0.1", "10.0.0.9")
	clk.Run(DNSRefresh)
	waitFor(t, func() bool { return names(pool.Workers()) == "10.0.0.1:80 10.0.0.9:80" })
	cancel()
	<-done
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition never became true")
}

func TestPoolHealthChecks(t *testing.T) {
	var status sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := status.Load(r.Host)
		w.WriteHeader(code.(int))
	}))
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	ws, _ := ParseWorkers([]string{"up=" + srv.URL, "down=" + dead.URL})
	status.Store(ws[0].URL.Host, 200)
	pool := NewPool(ws)
	rt := NewRouter(pool, &RoundRobin{}, Config{})
	pool.CheckHealth(context.Background(), http.DefaultClient, time.Second)
	if !ws[0].Healthy() || ws[1].Healthy() {
		t.Fatalf("healthy: up %v, down %v", ws[0].Healthy(), ws[1].Healthy())
	}
	for range 4 {
		b, err := rt.Decide(&Request{}, nil)
		if err != nil || b.Worker.Name != "up" {
			t.Fatalf("routed to %v, %v; an unreachable worker must get no requests", b, err)
		}
		b.Release()
	}
	// A 503 from /health takes the worker out; a 200 brings it back.
	status.Store(ws[0].URL.Host, 503)
	pool.CheckHealth(context.Background(), http.DefaultClient, time.Second)
	if _, err := rt.Decide(&Request{}, nil); !errors.Is(err, ErrNoWorker) {
		t.Fatalf("err = %v, want ErrNoWorker", err)
	}
	status.Store(ws[0].URL.Host, 200)
	pool.CheckHealth(context.Background(), http.DefaultClient, time.Second)
	if b, err := rt.Decide(&Request{}, nil); err != nil || b.Worker.Name != "up" {
		t.Fatalf("after recovery: %v, %v", b, err)
	}
}
