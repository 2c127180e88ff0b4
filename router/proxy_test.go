package router

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// lockstepSSE answers with three SSE chunks naming itself, and sends the
// second only once the client has read the first (it closes read) or 5 s
// have passed, which it then reports in held: a proxy that buffers the
// stream makes it wait the 5 s.
func lockstepSSE(name string, read <-chan struct{}, held *atomic.Bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			io.WriteString(w, "data: "+name+"\n\n")
			w.(http.Flusher).Flush()
			if i == 0 {
				select {
				case <-read:
				case <-time.After(5 * time.Second):
					held.Store(true)
				}
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func TestProxyStreamsWithoutBufferingAndNamesWorker(t *testing.T) {
	readA, readB := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	a := httptest.NewServer(lockstepSSE("a", readA, &held))
	defer a.Close()
	b := httptest.NewServer(lockstepSSE("b", readB, &held))
	defer b.Close()
	ws, _ := ParseWorkers([]string{a.URL, b.URL})
	px := httptest.NewServer(New(ws, &RoundRobin{}))
	defer px.Close()

	for _, want := range []struct {
		header, body string
		read         chan struct{}
	}{{"w0", "a", readA}, {"w1", "b", readB}} {
		resp, err := http.Post(px.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get(HeaderWorker); got != want.header {
			t.Errorf("%s = %q, want %q", HeaderWorker, got, want.header)
		}
		body := bufio.NewReader(resp.Body)
		line, _ := body.ReadString('\n')
		close(want.read)
		if line != "data: "+want.body+"\n" {
			t.Errorf("first line = %q", line)
		}
		io.Copy(io.Discard, body)
		resp.Body.Close()
		if held.Load() {
			t.Fatalf("the first chunk reached the client only when the worker gave up waiting: the proxy buffered the stream")
		}
	}
}

func TestProxyErrors(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	ws, _ := ParseWorkers([]string{deadURL})
	px := httptest.NewServer(New(ws, &RoundRobin{}))
	defer px.Close()
	tests := []struct {
		name, method, path string
		want               int
		wantMsg            string
	}{
		{"an unreachable worker is a 502 naming it", "POST", "/v1/chat/completions", 502, "worker w0 unreachable"},
		{"an unknown path is a 404", "GET", "/v1/unknown", 404, "no route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, px.URL+tt.path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(string(raw), tt.wantMsg) {
				t.Fatalf("got %d %s", resp.StatusCode, raw)
			}
		})
	}
}
