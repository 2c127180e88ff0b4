package router

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// slowSSE answers with three SSE chunks 50 ms apart, naming itself in each.
func slowSSE(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			io.WriteString(w, "data: "+name+"\n\n")
			w.(http.Flusher).Flush()
			if i < 2 {
				time.Sleep(50 * time.Millisecond)
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func TestProxyStreamsWithoutBufferingAndNamesWorker(t *testing.T) {
	a := httptest.NewServer(slowSSE("a"))
	defer a.Close()
	b := httptest.NewServer(slowSSE("b"))
	defer b.Close()
	ws, _ := ParseWorkers([]string{a.URL, b.URL})
	px := httptest.NewServer(New(ws, &RoundRobin{}))
	defer px.Close()

	for _, want := range []struct{ header, body string }{{"w0", "a"}, {"w1", "b"}} {
		start := time.Now()
		resp, err := http.Post(px.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get(HeaderWorker); got != want.header {
			t.Errorf("%s = %q, want %q", HeaderWorker, got, want.header)
		}
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		// The worker takes 100 ms in all; the first chunk must not wait for it.
		if first := time.Since(start); first > 80*time.Millisecond {
			t.Errorf("first chunk after %v: the proxy buffered the stream", first)
		}
		if line != "data: "+want.body+"\n" {
			t.Errorf("first line = %q", line)
		}
		resp.Body.Close()
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
