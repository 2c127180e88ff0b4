package router

import (
	"bytes"
	"encoding/json"

	"github.com/kvlens/kvlens/internal/sse"
)

// maxSSELine bounds what the scanner keeps of one SSE event's data, or of
// a plain JSON body (1 MiB); a longer one is skipped, never buffered whole.
const maxSSELine = 1 << 20

// streamScanner watches a worker's answer as it passes through, without
// holding it back: it notices the first chunk that carries content, and the
// cached_tokens of the usage chunk. It reads both SSE streams, event by
// event as the standard assembles them (a chunk's JSON may be split over
// several data lines), and plain JSON bodies, whole at Close.
type streamScanner struct {
	// cached is the last prompt_tokens_details.cached_tokens seen.
	cached int
	// hasCached reports whether cached_tokens was seen at all.
	hasCached bool
	// content reports whether content has been seen: in an SSE stream,
	// from the write that ends the event carrying it.
	content bool

	// isSSE and isPlain say which the answer is, once its first byte that
	// is not white space has told: an SSE line starts with a field name, a
	// colon or a line end, never with the '{' a JSON body starts with.
	isSSE, isPlain bool
	events         sse.Decoder
	body           []byte // a plain JSON body so far
	overflow       bool   // the body passed the limit and is skipped
	// limit bounds what is kept of an event's data or of a body, in
	// bytes; 0 means maxSSELine.
	limit int
}

// Write feeds the next bytes of the stream.
func (s *streamScanner) Write(p []byte) {
	if s.limit <= 0 {
		s.limit = maxSSELine
	}
	s.events.Limit = s.limit
	if !s.isSSE && !s.isPlain {
		if rest := bytes.TrimLeft(p, " \t\r\n"); len(rest) > 0 {
			s.isPlain = rest[0] == '{'
			s.isSSE = !s.isPlain
		}
	}
	if s.isPlain {
		s.keep(p)
		return
	}
	for len(p) > 0 {
		n, ev, ok := s.events.Feed(p)
		p = p[n:]
		if ok && !ev.TooLong {
			s.handle(ev.Data)
		}
	}
}

// keep adds p to a plain body, growing its buffer no further than the
// limit.
func (s *streamScanner) keep(p []byte) {
	need := len(s.body) + len(p)
	if s.overflow || need > s.limit {
		s.overflow = true
		s.body = nil
		return
	}
	if need > cap(s.body) {
		s.body = append(make([]byte, 0, min(max(2*cap(s.body), need), s.limit)), s.body...)
	}
	s.body = append(s.body, p...)
}

// held returns how many bytes the scanner holds, which is never more than
// its limit.
func (s *streamScanner) held() int { return cap(s.body) + s.events.Held() }

// Close reads a plain JSON body, and an SSE stream's last event when no
// blank line followed it.
func (s *streamScanner) Close() {
	if s.isPlain {
		if !s.overflow {
			s.handle(s.body)
		}
		s.body = nil
		return
	}
	if ev, ok := s.events.End(); ok && !ev.TooLong {
		s.handle(ev.Data)
	}
}

// Partial returns how many of the bytes written so far belong to an SSE
// event not yet ended: the proxy holds those back, and passes the rest on.
func (s *streamScanner) Partial() int {
	if s.isPlain {
		return 0
	}
	return s.events.Partial()
}

type chunkFields struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
			// A reasoning model's thinking: its first token ends the
			// prefill as an answer's does (vLLM's current name, then
			// SGLang's and older vLLM's).
			Reasoning        string `json:"reasoning"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Text string `json:"text"`
	} `json:"choices"`
	Usage *struct {
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// handle reads one chunk: an event's data, or a whole JSON body.
func (s *streamScanner) handle(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return
	}
	wantContent := !s.content && (bytes.Contains(line, []byte(`"content"`)) || bytes.Contains(line, []byte(`"text"`)) || bytes.Contains(line, []byte(`"reasoning`)))
	wantUsage := bytes.Contains(line, []byte(`"cached_tokens"`))
	if !wantContent && !wantUsage {
		return
	}
	var f chunkFields
	if json.Unmarshal(line, &f) != nil {
		return
	}
	if wantContent {
		for _, c := range f.Choices {
			if c.Delta.Content != "" || c.Delta.Reasoning != "" || c.Delta.ReasoningContent != "" || c.Message.Content != "" || c.Text != "" {
				s.content = true
				break
			}
		}
	}
	if f.Usage != nil && f.Usage.PromptTokensDetails != nil {
		s.cached = max(0, f.Usage.PromptTokensDetails.CachedTokens)
		s.hasCached = true
	}
}
