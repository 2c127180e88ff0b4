package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// streamSpec says how the precise test server answers one request.
type streamSpec struct {
	ttft     time.Duration // to the first chunk
	itl      time.Duration // per token: a chunk of k tokens follows k·itl after the previous
	tokens   int           // output tokens in all
	perChunk int           // tokens per chunk
	worker   string        // X-Kvlens-Worker, if not empty
	status   int           // if not 0 or 200, answer with this status at once
	cutAfter int           // if > 0, drop the connection after this many chunks
	cached   func(req chatBody) (prompt, cached int)
	// written, if set, learns when the first content chunk's write began
	// and when its flush returned, and when the last chunk's flush returned,
	// keyed by the last message's content.
	written func(key string, firstFrom, firstTo, last time.Time)
}

// streamServer streams answers whose every write is scheduled against an
// absolute time from the request's arrival, not a chain of sleeps, so its
// own timer lateness does not accumulate into the truth it claims. Each chunk
// carries perChunk words that are one cl100k token each.
func streamServer(spec func(r *http.Request) streamSpec) http.Handler {
	words := blockVocab()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		s := spec(r)
		var req chatBody
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if s.worker != "" {
			w.Header().Set(WorkerHeader, s.worker)
		}
		if s.status != 0 && s.status != 200 {
			http.Error(w, `{"error":{"message":"injected"}}`, s.status)
			return
		}
		prompt, cached := 0, 0
		if s.cached != nil {
			prompt, cached = s.cached(req)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fl := w.(http.Flusher)
		chunks := (s.tokens + s.perChunk - 1) / s.perChunk
		// Build every SSE line before the clock starts mattering, and wait on
		// one reused timer: the server's own cost per chunk stays small so
		// that, sharing the process with the client, it disturbs it little.
		lines := make([][]byte, chunks)
		var b strings.Builder
		for j := range chunks {
			b.Reset()
			for i := j * s.perChunk; i < min((j+1)*s.perChunk, s.tokens); i++ {
				b.WriteString(words[i%len(words)])
			}
			content, _ := json.Marshal(b.String())
			lines[j] = fmt.Appendf(nil, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", content)
		}
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		var firstFrom, first, last time.Time
		for j := range chunks {
			if s.cutAfter > 0 && j == s.cutAfter {
				panic(http.ErrAbortHandler)
			}
			timer.Reset(time.Until(t0.Add(s.ttft + time.Duration(j*s.perChunk)*s.itl)))
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
			if j == 0 {
				firstFrom = time.Now()
			}
			w.Write(lines[j])
			fl.Flush()
			last = time.Now()
			if j == 0 {
				first = last
			}
		}
		if s.written != nil && len(req.Messages) > 0 {
			s.written(req.Messages[len(req.Messages)-1].Content, firstFrom, first, last)
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\n", prompt, s.tokens, cached)
		io.WriteString(w, "data: [DONE]\n\n")
		fl.Flush()
	})
}
