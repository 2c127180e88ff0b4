package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/tokenizer"
)

// TestAStreamCutBehindTheRouterIsAnError proves the load generator counts
// a worker's stream cut mid-answer as a failed request when the router
// ends it with an SSE error event, as it does when the worker dies.
func TestAStreamCutBehindTheRouterIsAnError(t *testing.T) {
	tests := []struct {
		name string
		// sent is what the worker writes before it dies.
		sent string
	}{
		{"a cut after some content is a broken stream", `data: {"choices":[{"delta":{"content":"Paged"}}]}` + "\n\n"},
		{"a cut before any content is a broken stream", ""},
		{"a cut after the finish reason but before usage and [DONE] is a broken stream",
			`data: {"choices":[{"delta":{"content":"a"}}]}` + "\n\n" + `data: {"choices":[{"delta":{},"finish_reason":"stop"}]}` + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tt.sent)
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}))
			defer wk.Close()
			ws, err := router.ParseWorkers([]string{"a=" + wk.URL})
			if err != nil {
				t.Fatal(err)
			}
			px := httptest.NewServer(router.New(ws, &router.RoundRobin{}))
			defer px.Close()
			c := NewOpenAIClient(px.URL+"/v1", "m", "")
			r := c.Chat(context.Background(), TurnRequest{Messages: []tokenizer.Message{{Role: "user", Content: "hi"}}, MaxTokens: 8}, nil)
			if r.Err == nil || r.Class != ErrStream {
				t.Fatalf("result %v (%s); want a broken stream", r.Err, r.Class)
			}
		})
	}
}
