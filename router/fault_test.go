package router

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkerKilledMidRun kills one of three workers while 12 clients keep
// requests going: streams it was serving are cut and counted, later
// requests fail over to the others, and no booking is left behind.
func TestWorkerKilledMidRun(t *testing.T) {
	stream := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 5 {
			if _, err := io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(10 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
	var servers []*httptest.Server
	var specs []string
	for _, name := range []string{"a", "b", "c"} {
		s := httptest.NewServer(http.HandlerFunc(stream))
		defer s.Close()
		servers = append(servers, s)
		specs = append(specs, name+"="+s.URL)
	}
	px, srv := newTestProxy(t, &RoundRobin{}, Config{}, specs...)

	var ok, failed, failedAfter atomic.Int32
	var killed atomic.Bool
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for range 8 {
				after := killed.Load() // sent once the worker was dead
				resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
				if err == nil {
					var raw []byte
					raw, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && (resp.StatusCode != 200 || !strings.Contains(string(raw), "[DONE]")) {
						err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
					}
				}
				switch {
				case err == nil:
					ok.Add(1)
				case after:
					failedAfter.Add(1)
				default:
					failed.Add(1)
				}
			}
		})
	}
	time.Sleep(60 * time.Millisecond)
	servers[0].CloseClientConnections() // the worker dies, mid-stream for some
	servers[0].Close()
	// Marked once the worker is gone: a request that read the mark before
	// the kill ended could still reach the dying worker and be cut (CI
	// counted one such as "sent after the kill").
	killed.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("requests were stuck after a worker died")
	}
	waitFor(t, func() bool { return px.Router().Counts().InFlight == 0 })
	st := px.Router().Workers()
	if st[0].Healthy {
		t.Error("the dead worker is still marked healthy")
	}
	// Only streams under way at the kill may fail, one a client at most;
	// every request sent after it fails over.
	if failedAfter.Load() != 0 || failed.Load() > 12 {
		t.Fatalf("%d requests sent after the kill failed, and %d sent before it; want none, and at most one per client", failedAfter.Load(), failed.Load())
	}
	// Every failure a client saw is counted against the dead worker.
	if st[0].Errors < int64(failed.Load()) || st[1].Errors+st[2].Errors != 0 {
		t.Fatalf("errors a=%d b=%d c=%d, clients saw %d failures", st[0].Errors, st[1].Errors, st[2].Errors, failed.Load())
	}
	t.Logf("%d requests completed, %d cut by the kill, %d retried elsewhere", ok.Load(), failed.Load(), px.Router().Counts().Retries)
}
