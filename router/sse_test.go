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
		// sad path
		{"a broken JSON chunk is skipped, not fatal", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"\n\ndata: [DONE]\n\n", false, 0},
		{"comments and keep-alives are ignored", ": keep-alive\n\nevent: ping\n\n", false, 0},
		{"a usage without details reports nothing", "data: {\"usage\":{\"prompt_tokens\":5}}\n\n", false, 0},
		{"a negative cached count is clamped", "data: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":-4}}}\n\n", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Fed one byte at a time, as the worst network would.
			calls := 0
			s := &streamScanner{onContent: func() { calls++ }}
			for i := range len(tt.stream) {
				s.Write([]byte{tt.stream[i]})
			}
			s.Close()
			if s.content != tt.wantContent || s.cached != tt.wantCached {
				t.Fatalf("content %v, cached %d; want %v, %d", s.content, s.cached, tt.wantContent, tt.wantCached)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.wantContent]; calls != want {
				t.Fatalf("onContent ran %d times, want %d", calls, want)
			}
		})
	}
}

func TestStreamScannerSkipsAnOverlongLine(t *testing.T) {
	s := &streamScanner{}
	s.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", maxSSELine) + "\"}}]}\n"))
	if s.content || len(s.line) != 0 {
		t.Fatalf("an overlong line was kept (content %v, %d bytes held)", s.content, len(s.line))
	}
	s.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"y\"}}]}\n"))
	if !s.content {
		t.Fatal("the line after an overlong one was lost")
	}
}

// FuzzStreamScanner checks that any stream, split anywhere, reads the same
// as in one piece and never panics.
func FuzzStreamScanner(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":7}}}\n\n"), 5)
	f.Add([]byte(`{"choices":[{"text":"a"}]}`), 1)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		whole := &streamScanner{}
		whole.Write(data)
		whole.Close()
		split := &streamScanner{}
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
		split.Write(data[cut:])
		split.Close()
		if whole.content != split.content || whole.cached != split.cached {
			t.Fatalf("split at %d read %v/%d, whole %v/%d", cut, split.content, split.cached, whole.content, whole.cached)
		}
	})
}
