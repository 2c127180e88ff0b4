package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/router"
)

// pieces reads its body size bytes at a time, as a slow network delivers
// a stream.
type pieces struct {
	body []byte
	size int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.body) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), p.size)], p.body)
	p.body = p.body[n:]
	return n, nil
}

// piecesTransport answers every request with body as an SSE stream, read
// size bytes at a time.
type piecesTransport struct {
	body string
	size int
}

func (t piecesTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(&pieces{[]byte(t.body), t.size}), Request: r,
	}, nil
}

// TestOpenAIClientReadsOddButLegalSSE feeds the client streams shaped as
// the SSE standard allows and workers rarely send, each read whole, a byte
// at a time and in 3-byte pieces.
func TestOpenAIClientReadsOddButLegalSSE(t *testing.T) {
	const (
		hi    = `{"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}`
		there = `{"choices":[{"delta":{"content":" there"},"finish_reason":"stop"}]}`
		usage = `{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}`
	)
	// split cuts a chunk's JSON in two data lines, ended by eol.
	split := func(chunk, eol string) string {
		a, b := splitJSON([]byte(chunk))
		return "data: " + string(a) + eol + "data: " + string(b) + eol + eol
	}
	tests := []struct {
		name   string
		stream string
	}{
		{"one data line per chunk, as most workers send",
			"data: " + hi + "\n\ndata: " + there + "\n\ndata: " + usage + "\n\ndata: [DONE]\n\n"},
		{"each chunk split over two data lines",
			split(hi, "\n") + split(there, "\n") + split(usage, "\n") + "data: [DONE]\n\n"},
		{"split chunks with CRLF line ends",
			split(hi, "\r\n") + split(there, "\r\n") + split(usage, "\r\n") + "data: [DONE]\r\n\r\n"},
		{"split chunks with bare CR line ends",
			split(hi, "\r") + split(there, "\r") + split(usage, "\r") + "data: [DONE]\r\r"},
		{"data: without a space",
			"data:" + hi + "\n\ndata:" + there + "\n\ndata:" + usage + "\n\ndata:[DONE]\n\n"},
		{"comments, event and id fields between and inside events",
			": ping\n\nevent: message\nid: 1\ndata: " + hi + "\n\n: still here\nid: 2\ndata: " + there[:11] + "\n: mid-event\ndata: " + there[11:] + "\n\ndata: " + usage + "\nretry: 10\n\ndata: [DONE]\n\n"},
		{"a last [DONE] without a blank line after it",
			"data: " + hi + "\n\ndata: " + there + "\n\ndata: " + usage + "\n\ndata: [DONE]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{len(tt.stream), 1, 3} {
				c := NewOpenAIClient("http://sse.invalid/v1", "m", "")
				c.http = &http.Client{Transport: piecesTransport{tt.stream, size}}
				r := c.Chat(context.Background(), oneTurn, nil)
				if r.Err != nil || r.Text != "Hi there" || r.OSL != 2 || r.CachedTokens != 4 || len(r.ChunkGaps) != 1 {
					t.Fatalf("in %d-byte reads: err %v, text %q, OSL %d, cached %d, %d gaps; want Hi there, 2, 4 and one gap",
						size, r.Err, r.Text, r.OSL, r.CachedTokens, len(r.ChunkGaps))
				}
			}
		})
	}
}

// splitJSON cuts a JSON object after its first key's colon, where the
// newline that joins two data lines is white space to JSON.
func splitJSON(raw []byte) (a, b []byte) {
	i := bytes.Index(raw, []byte(`":`)) + 2
	return raw[:i], raw[i:]
}

// splitWorker answers every chat request with a stream whose every JSON
// chunk is split over two data lines, with CRLF line ends, as the SSE
// standard allows: four content chunks, a finish, usage that reports 16
// cached tokens, and [DONE].
func splitWorker() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(v any) {
			raw, _ := json.Marshal(v)
			a, b := splitJSON(raw)
			fmt.Fprintf(w, "data: %s\r\ndata: %s\r\n\r\n", a, b)
			fl.Flush()
		}
		for _, word := range []string{"Paged", " attention", " pages", " KV."} {
			send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": word}}}})
		}
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
		send(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 40, "completion_tokens": 4, "prompt_tokens_details": map[string]any{"cached_tokens": 16}}})
		io.WriteString(w, "data: [DONE]\r\n\r\n")
	})
}

// TestSplitChunksThroughTheRouter proves a worker that splits every JSON
// chunk over two data lines serves the load generator through the router
// without a single failed request, and that the router reads the cached
// tokens its split usage chunks report.
func TestSplitChunksThroughTheRouter(t *testing.T) {
	wk := httptest.NewServer(splitWorker())
	defer wk.Close()
	ws, err := router.ParseWorkers([]string{"a=" + wk.URL})
	if err != nil {
		t.Fatal(err)
	}
	proxy := router.New(ws, &router.RoundRobin{})
	px := httptest.NewServer(proxy)
	defer px.Close()
	cfg := testConfig(4)
	g, err := New(NewOpenAIClient(px.URL+"/v1", "m", ""), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	waitFor(t, "20 requests", func() bool { s := g.Snapshot().Window; return s.Completed+s.Errors >= 20 })
	g.Stop()
	s := g.Snapshot().Window
	if s.Completed < 20 || s.Errors != 0 {
		t.Fatalf("%d completed, %d errors (%v); want 20 or more and none", s.Completed, s.Errors, s.ErrorsByClass)
	}
	st := proxy.Router().Workers()[0]
	if st.ActualHitTokens < 16*20 || !strings.HasPrefix(st.Name, "a") {
		t.Fatalf("the router read %d cached tokens from worker %s; want 16 from each of 20 or more answers", st.ActualHitTokens, st.Name)
	}
}
