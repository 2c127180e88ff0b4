package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestChunkWriterBytes pins the chunks a stream is made of, byte for byte.
func TestChunkWriterBytes(t *testing.T) {
	const head = `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":`
	const textHead = `data: {"id":"cmpl-x","object":"text_completion","created":7,"model":"m","choices":[{"index":`
	tests := []struct {
		name  string
		chat  bool
		write func(c *chunkWriter)
		want  string
	}{
		{
			"a chat opens each choice with the assistant's role and empty content, as vLLM does",
			true, func(c *chunkWriter) { c.role(1) },
			head + `1,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n",
		},
		{
			"a chat's token that is not the last carries content alone, no role",
			true, func(c *chunkWriter) { c.token(0, "hi", "") },
			head + `0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n",
		},
		{
			"a chat's last token carries the finish_reason on its own chunk",
			true, func(c *chunkWriter) { c.token(0, "end", "stop") },
			head + `0,"delta":{"content":"end"},"finish_reason":"stop"}]}` + "\n\n",
		},
		{
			"a completion's last token carries the finish_reason with its text",
			false, func(c *chunkWriter) { c.token(2, " x", "length") },
			textHead + `2,"text":" x","finish_reason":"length"}]}` + "\n\n",
		},
		{
			"a completion's token that is not the last has a null finish_reason",
			false, func(c *chunkWriter) { c.token(0, "\"q\"", "") },
			textHead + `0,"text":"\"q\"","finish_reason":null}]}` + "\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			id := "cmpl-x"
			if tt.chat {
				id = "chatcmpl-x"
			}
			c := newChunkWriter(rec, id, "m", 7, tt.chat)
			tt.write(c)
			c.flush()
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// streamChoice is one chunk's choice as a test reads it.
type streamChoice struct {
	Index int     `json:"index"`
	Text  *string `json:"text"`
	Delta *struct {
		Role    *string `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// readChoices posts body to path and returns each chunk's choice in order,
// skipping the usage chunk and [DONE].
func readChoices(t *testing.T, url, path, body string) []streamChoice {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var out []streamChoice
	for _, ev := range strings.Split(string(raw), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []streamChoice `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if len(c.Choices) != 1 {
			if len(c.Choices) == 0 {
				continue // the usage chunk
			}
			t.Fatalf("chunk %q holds %d choices, want 1", data, len(c.Choices))
		}
		out = append(out, c.Choices[0])
	}
	return out
}

// TestStreamOpensAndEndsAsVLLM holds the shape of a stream against
// vLLM's: a chat opens every choice with a chunk of the assistant's role
// and empty content before any token, later chunks carry no role, and
// each choice's finish_reason rides on the chunk of its last token, never
// on a chunk of its own without text.
func TestStreamOpensAndEndsAsVLLM(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	tests := []struct {
		name, path, body string
		chat             bool
		n, tokens        int // choices, and tokens in each
		reason           string
	}{
		{"a chat of one choice opens with its role and ends on its last token", "/v1/chat/completions",
			`{"stream":true,"max_tokens":3,"ignore_eos":true,"messages":[{"role":"user","content":"hi"}]}`, true, 1, 3, "length"},
		{"a chat of three choices opens all three before any token", "/v1/chat/completions",
			`{"stream":true,"n":3,"max_tokens":4,"ignore_eos":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, true, 3, 4, "length"},
		{"a chat of a single token carries it and its end in one chunk", "/v1/chat/completions",
			`{"stream":true,"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, true, 1, 1, "length"},
		{"a completion has no role chunk and ends on its last token", "/v1/completions",
			`{"stream":true,"max_tokens":5,"ignore_eos":true,"prompt":"hello"}`, false, 1, 5, "length"},
		{"a completion of two choices ends each on its last token", "/v1/completions",
			`{"stream":true,"n":2,"max_tokens":3,"ignore_eos":true,"prompt":"hello"}`, false, 2, 3, "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readChoices(t, srv.URL, tt.path, tt.body)
			opened := map[int]bool{}
			tokens := map[int]int{}
			ended := map[int]bool{}
			for k, c := range got {
				if ended[c.Index] {
					t.Fatalf("chunk %d: choice %d goes on after its finish_reason", k, c.Index)
				}
				var role, content *string
				if tt.chat {
					if c.Delta == nil {
						t.Fatalf("chunk %d: a chat chunk without delta", k)
					}
					role, content = c.Delta.Role, c.Delta.Content
				} else {
					content = c.Text
				}
				if role != nil {
					if *role != "assistant" || content == nil || *content != "" || c.FinishReason != nil || opened[c.Index] {
						t.Fatalf("chunk %d: role chunk %+v, want one per choice with empty content and no finish_reason", k, c)
					}
					if len(tokens) > 0 {
						t.Fatalf("chunk %d: choice %d's role comes after a token", k, c.Index)
					}
					opened[c.Index] = true
					continue
				}
				if tt.chat && !opened[c.Index] {
					t.Fatalf("chunk %d: choice %d's token comes before its role", k, c.Index)
				}
				if content == nil || *content == "" {
					t.Fatalf("chunk %d: a chunk with no text: %+v", k, c)
				}
				tokens[c.Index]++
				if c.FinishReason != nil {
					if *c.FinishReason != tt.reason {
						t.Errorf("chunk %d: finish_reason %q, want %q", k, *c.FinishReason, tt.reason)
					}
					ended[c.Index] = true
				}
			}
			for i := range tt.n {
				if tt.chat != opened[i] {
					t.Errorf("choice %d: role chunk sent = %v, want %v", i, opened[i], tt.chat)
				}
				if tokens[i] != tt.tokens || !ended[i] {
					t.Errorf("choice %d: %d token chunks, ended %v; want %d, ended on the last", i, tokens[i], ended[i], tt.tokens)
				}
			}
		})
	}
}
