package scenario

import (
	"io"
	"net/http"
)

// fakeWorker answers every chat request at once with a short SSE stream
// that names the worker.
func fakeWorker(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Reply from "+name+".\"}}]}\n\ndata: [DONE]\n\n")
	}
}
