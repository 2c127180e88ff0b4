package router

import (
	"bytes"
	"encoding/json"
)

// maxSSELine bounds the partial line the scanner keeps (1 MiB); a longer
// line is skipped, never buffered whole.
const maxSSELine = 1 << 20

// streamScanner watches a worker's answer as it passes through, without
// holding it back: it notices the first chunk that carries content, and the
// cached_tokens of the usage chunk. It reads both SSE streams and plain JSON
// bodies.
type streamScanner struct {
	// onContent runs once, at the first content token.
	onContent func()
	// cached is the last prompt_tokens_details.cached_tokens seen.
	cached int
	// hasCached reports whether cached_tokens was seen at all.
	hasCached bool
	// content reports whether content has been seen.
	content bool

	line     []byte
	overflow bool
}

// Write feeds the next bytes of the stream.
func (s *streamScanner) Write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.keep(p)
			return
		}
		s.keep(p[:i])
		if !s.overflow {
			s.handle(s.line)
		}
		s.line, s.overflow = s.line[:0], false
		p = p[i+1:]
	}
}

func (s *streamScanner) keep(p []byte) {
	if s.overflow || len(s.line)+len(p) > maxSSELine {
		s.overflow = true
		s.line = s.line[:0]
		return
	}
	s.line = append(s.line, p...)
}

// Close handles a last line that had no newline, as a plain JSON body has.
func (s *streamScanner) Close() {
	if len(s.line) > 0 && !s.overflow {
		s.handle(s.line)
	}
	s.line = s.line[:0]
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

func (s *streamScanner) handle(line []byte) {
	line = bytes.TrimSpace(line)
	if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		line = bytes.TrimSpace(data)
	}
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
				if s.onContent != nil {
					s.onContent()
				}
				break
			}
		}
	}
	if f.Usage != nil && f.Usage.PromptTokensDetails != nil {
		s.cached = max(0, f.Usage.PromptTokensDetails.CachedTokens)
		s.hasCached = true
	}
}
