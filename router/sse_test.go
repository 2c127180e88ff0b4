package router

import (
	"strings"
	"testing"
)

func TestStreamScanner(t *testing.T) {
	tests := []struct {
		name        string
		stream      string
		wantContent bool
		wantCached  int
	}{
		{"a role-only first chunk is not content; the next one is",
			"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n", true, 0},
		{"the usage chunk's cached_tokens is read",
			"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":90,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\ndata: [DONE]\n\n", true, 64},
		{"a completions stream carries text, not delta",
			"data: {\"choices\":[{\"text\":\"once\"}]}\n\n", true, 0},
		{"a plain JSON body without a final newline is read at close",
			`{"choices":[{"message":{"content":"hello"}}],"usage":{"prompt_tokens_details":{"cached_tokens":32}}}`, true, 32},
		{"a reasoning model's first thought ends the prefill (vLLM's delta.reasoning)",
			"data: {\"choices\":[{\"delta\":{\"reasoning\":\"Let me\"}}]}\n\n", true, 0},
		{"so does SGLang's and older vLLM's delta.reasoning_content",
			"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"Let me\"}}]}\n\n", true, 0},
		{"an empty reasoning field is not content",
			"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"reasoning\":\"\",\"content\":null}}]}\n\n", false, 0},
		{"CRLF line ends are accepted", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n", true, 0},
		{"bare CR line ends are accepted", "data: {\"choices\":[]}\r\rdata: {\"choices\":[],\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":5}}}\r\r", false, 5},
		{"a JSON chunk split over two data lines is read whole",
			"data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"Hi\"}}]}\n\ndata: {\"usage\":{\"prompt_tokens_details\":\ndata: {\"cached_tokens\":48}}}\n\n", true, 48},
		{"so is one split over CRLF lines without the space after data:",
			"data:{\"choices\":[{\"delta\":\r\ndata:{\"content\":\"Hi\"}}]}\r\n\r\n", true, 0},
		{"comments and event, id and retry fields inside an event are left aside",
			": hello\nevent: message\nid: 1\nretry: 50\ndata: {\"choices\":[{\"delta\":\n: thinking\ndata: {\"content\":\"Hi\"}}]}\n\n", true, 0},
		{"a last event without a blank line after it is read at close",
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":9}}}\n", false, 9},
		{"a pretty-printed plain JSON body is read at close",
			"{\n  \"choices\": [{\"message\": {\"content\": \"hello\"}}],\n  \"usage\": {\"prompt_tokens_details\": {\"cached_tokens\": 16}}\n}\n", true, 16},
		// sad path
		{"a broken JSON chunk is skipped, not fatal", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"\n\ndata: [DONE]\n\n", false, 0},
		{"comments and keep-alives are ignored", ": keep-alive\n\nevent: ping\n\n", false, 0},
		{"a usage without details reports nothing", "data: {\"usage\":{\"prompt_tokens\":5}}\n\n", false, 0},
		{"a negative cached count is clamped", "data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":-4}}}\n\n", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Fed whole, one byte at a time, as the worst network would,
			// and in 3-byte writes, which split CRLFs.
			for _, size := range []int{len(tt.stream), 1, 3} {
				s := &streamScanner{}
				for p := tt.stream; len(p) > 0; {
					n := min(size, len(p))
					s.Write([]byte(p[:n]))
					p = p[n:]
				}
				s.Close()
				if s.content != tt.wantContent || s.cached != tt.wantCached {
					t.Fatalf("in %d-byte writes: content %v, cached %d; want %v, %d", size, s.content, s.cached, tt.wantContent, tt.wantCached)
				}
			}
		})
	}
}

// TestStreamScannerSeesContentAsItsEventEnds proves the first token is
// noted when the blank line that ends its event is written, not at its
// first data line: only then is a chunk split over data lines whole.
func TestStreamScannerSeesContentAsItsEventEnds(t *testing.T) {
	s := &streamScanner{}
	written := 0
	for _, w := range []string{"data: {\"choices\":[{\"delta\":\n", "data: {\"content\":\"Hi\"}}]}\r"} {
		s.Write([]byte(w))
		written += len(w)
		if s.content {
			t.Fatalf("content seen after %q, before the event ended", w)
		}
	}
	if s.Partial() != written {
		t.Fatalf("%d bytes of the unended event, want all %d", s.Partial(), written)
	}
	s.Write([]byte("\n\r\n")) // the rest of the data line's CRLF, then a blank line
	if !s.content || s.Partial() != 0 {
		t.Fatalf("after the blank line: content %v, %d bytes partial; want true and 0", s.content, s.Partial())
	}
}

func TestStreamScannerSkipsAnOverlongEvent(t *testing.T) {
	tests := []struct {
		name   string
		events []string // written one after another
	}{
		{"one overlong data line", []string{"data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", maxSSELine) + "\"}}]}\n\n"}},
		{"data lines overlong together", []string{strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\""+strings.Repeat("x", 1000)+"\"}}]}\n", maxSSELine/1000) + "\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &streamScanner{}
			for _, e := range tt.events {
				s.Write([]byte(e))
			}
			if s.content || s.events.Held() > maxSSELine {
				t.Fatalf("an overlong event was read or kept (content %v, %d bytes held)", s.content, s.events.Held())
			}
			s.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"y\"}}]}\n\n"))
			if !s.content {
				t.Fatal("the event after an overlong one was lost")
			}
		})
	}
}

// FuzzStreamScanner checks that any stream, split anywhere, reads the same
// as in one piece, never panics, and never makes the scanner hold more than
// its limit.
func FuzzStreamScanner(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":7}}}\n\n"), 5)
	f.Add([]byte(`{"choices":[{"text":"a"}]}`), 1)
	f.Add([]byte("data:{\"choices\":[{\"delta\":\r\ndata:{\"content\":\"Hi\"}}]}\r\r: x\rdata: {\"usage\":{\"prompt_tokens_details\":\ndata: {\"cached_tokens\":7}}}\n"), 60)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\""+strings.Repeat("x", 80)+"\"}}]}\n\n"), 30)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		const limit = 96
		whole := &streamScanner{limit: limit}
		whole.Write(data)
		whole.Close()
		split := &streamScanner{limit: limit}
		if cut < 0 {
			cut = -cut
		}
		if len(data) > 0 {
			cut %= len(data)
		}
		if cut > len(data) {
			cut = len(data)
		}
		split.Write(data[:cut])
		if split.held() > limit {
			t.Fatalf("holds %d bytes, over its limit of %d", split.held(), limit)
		}
		split.Write(data[cut:])
		if split.held() > limit {
			t.Fatalf("holds %d bytes, over its limit of %d", split.held(), limit)
		}
		split.Close()
		if whole.content != split.content || whole.cached != split.cached {
			t.Fatalf("split at %d read %v/%d, whole %v/%d", cut, split.content, split.cached, whole.content, whole.cached)
		}
	})
}
