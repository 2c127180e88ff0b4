package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/tokenizer"
)

// TestSeveralChoicesAreServedAsVLLMServesThem: vLLM answers a request for n
// choices with n sequences of its own engine, one per choice: each choice
// has its index, usage counts the prompt once and every choice's tokens,
// and a stream's chunks each carry the index of their choice, which gets
// its own role, text and finish.
func TestSeveralChoicesAreServedAsVLLMServesThem(t *testing.T) {
	w, srv, _ := newTestServer(t, fast())
	const user = `"messages":[{"role":"user","content":"x"}]`
	chatPrompt := tokenizer.Count(tokenizer.RenderChat([]tokenizer.Message{{Role: "user", Content: "x"}}))
	textPrompt := tokenizer.Count("x")
	tests := []struct {
		name, path, body string
		n, maxTokens     int
		stream           bool
		// prompt is the prompt's tokens, which usage counts once.
		prompt int
	}{
		{"a chat for 3 choices answers 3, each to max_tokens", "/v1/chat/completions", `{"n":3,"max_tokens":5,"ignore_eos":true,` + user + `}`, 3, 5, false, chatPrompt},
		{"a completion for 2 choices answers 2", "/v1/completions", `{"n":2,"max_tokens":4,"ignore_eos":true,"prompt":"x"}`, 2, 4, false, textPrompt},
		{"a streamed chat for 3 choices streams each with its index", "/v1/chat/completions", `{"n":3,"max_tokens":5,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},` + user + `}`, 3, 5, true, chatPrompt},
		{"a streamed completion for 2 choices streams each with its index", "/v1/completions", `{"n":2,"max_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"prompt":"x"}`, 2, 6, true, textPrompt},
		{"n 1 answers one choice, as before", "/v1/completions", `{"n":1,"max_tokens":3,"ignore_eos":true,"prompt":"x"}`, 1, 3, false, textPrompt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := w.Runner().Stats()
			status, raw := call(t, srv, "POST", tt.path, tt.body)
			if status != 200 {
				t.Fatalf("got %d %.300s", status, raw)
			}
			var got answerSeen
			if tt.stream {
				got = readStreamedChoices(t, raw, tt.n)
			} else {
				got = readWholeChoices(t, raw)
			}
			if len(got.texts) != tt.n {
				t.Fatalf("%d choices, want %d: %.300s", len(got.texts), tt.n, raw)
			}
			for i := range tt.n {
				if got.texts[i] == "" || got.finish[i] != "length" {
					t.Errorf("choice %d: text %q, finish %q; want text and length", i, got.texts[i], got.finish[i])
				}
			}
			if tt.n > 1 && strings.Count(strings.Join(got.texts, "\x00"), got.texts[0]) == tt.n {
				t.Errorf("every sampled choice says %q: the choices are one answer copied", got.texts[0])
			}
			if got.usage.PromptTokens != tt.prompt || got.usage.CompletionTokens != tt.n*tt.maxTokens || got.usage.TotalTokens != tt.prompt+tt.n*tt.maxTokens {
				t.Errorf("usage %+v, want prompt %d once and %d completion tokens", got.usage, tt.prompt, tt.n*tt.maxTokens)
			}
			// Each choice was its own sequence of the engine.
			after := w.Runner().Stats()
			if gen := after.GenerationTokens - before.GenerationTokens; gen != uint64(tt.n*tt.maxTokens) {
				t.Errorf("the engine generated %d tokens, want %d", gen, tt.n*tt.maxTokens)
			}
			if p := after.PromptTokens - before.PromptTokens; p != uint64(tt.n*tt.prompt) {
				t.Errorf("the engine admitted %d prompt tokens, want %d: one prompt per choice", p, tt.n*tt.prompt)
			}
		})
	}
}

// TestChoicesOutsideVLLMsRangeAreRefused: vLLM's SamplingParams refuses an
// n under 1, and n over 1 with greedy decoding, in its words; the worker
// also refuses beam search, which it does not run, and n past its own cap.
func TestChoicesOutsideVLLMsRangeAreRefused(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	const user = `"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name, path, body string
		want             int
		// wantIn is a piece of the answer.
		wantIn string
	}{
		{"use_beam_search false is served", "/v1/chat/completions", `{"use_beam_search":false,"max_tokens":1,` + user + `}`, 200, `"chat.completion"`},
		{"n null is one choice", "/v1/chat/completions", `{"n":null,"max_tokens":1,` + user + `}`, 200, `"index":0`},
		{"temperature 0 with n 1 is served", "/v1/completions", `{"n":1,"temperature":0,"max_tokens":1,"prompt":"x"}`, 200, `"text_completion"`},
		{"the cap itself is served", "/v1/completions", fmt.Sprintf(`{"n":%d,"max_tokens":1,"prompt":"x"}`, maxChoices), 200, fmt.Sprintf(`"index":%d`, maxChoices-1)},
		// sad path
		{"n 0 is a 400 in vLLM's words", "/v1/chat/completions", `{"n":0,` + user + `}`, 400, "n must be at least 1, got 0."},
		{"a negative n is a 400", "/v1/completions", `{"n":-2,"prompt":"x"}`, 400, "n must be at least 1, got -2."},
		{"several greedy choices are a 400 in vLLM's words", "/v1/chat/completions", `{"n":2,"temperature":0,` + user + `}`, 400, "n must be 1 when using greedy sampling, got 2."},
		{"n past the worker's cap is a 400", "/v1/completions", fmt.Sprintf(`{"n":%d,"prompt":"x"}`, maxChoices+1), 400, fmt.Sprintf("n must be at most %d, got %d", maxChoices, maxChoices+1)},
		{"beam search is a 400, not sampled answers passed off as beams", "/v1/completions", `{"use_beam_search":true,"prompt":"x"}`, 400, "use_beam_search"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, "POST", tt.path, tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantIn) || strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 {
				t.Fatalf("got %d %.300s, want %d containing %q on one line", status, raw, tt.want, tt.wantIn)
			}
		})
	}
}

// answerSeen is what a client read of an answer's choices.
type answerSeen struct {
	texts, finish []string
	usage         usage
}

// readWholeChoices reads an unstreamed chat or completion, whose choices
// must come in index order.
func readWholeChoices(t *testing.T, raw []byte) answerSeen {
	t.Helper()
	var a struct {
		Choices []struct {
			Index   int     `json:"index"`
			Text    *string `json:"text"`
			Message *struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%.300s: %v", raw, err)
	}
	var got answerSeen
	for i, c := range a.Choices {
		if c.Index != i {
			t.Fatalf("choice %d has index %d", i, c.Index)
		}
		text := ""
		switch {
		case c.Text != nil:
			text = *c.Text
		case c.Message != nil && c.Message.Role == "assistant":
			text = c.Message.Content
		}
		got.texts = append(got.texts, text)
		got.finish = append(got.finish, c.FinishReason)
	}
	got.usage = a.Usage
	return got
}

// readStreamedChoices reads an SSE answer for n choices: every chunk holds
// one choice by its index, a chat's first chunk of each choice carries the
// assistant's role, each choice finishes once and gets no text after, and
// the usage chunk comes last.
func readStreamedChoices(t *testing.T, raw []byte, n int) answerSeen {
	t.Helper()
	got := answerSeen{texts: make([]string, n), finish: make([]string, n)}
	seen := make([]bool, n)
	usageSeen := false
	for _, ev := range strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q is not data", ev)
		}
		if data == "[DONE]" {
			break
		}
		if usageSeen {
			t.Fatalf("chunk %q after the usage chunk", data)
		}
		var c struct {
			Choices []struct {
				Index int     `json:"index"`
				Text  *string `json:"text"`
				Delta *struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Usage != nil {
			got.usage, usageSeen = *c.Usage, true
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk %q holds %d choices, want 1", data, len(c.Choices))
		}
		ch := c.Choices[0]
		i := ch.Index
		if i < 0 || i >= n {
			t.Fatalf("chunk %q: index %d of %d choices", data, i, n)
		}
		if got.finish[i] != "" {
			t.Fatalf("chunk %q after choice %d finished", data, i)
		}
		text := ""
		switch {
		case ch.Text != nil:
			text = *ch.Text
		case ch.Delta != nil:
			if !seen[i] && ch.Delta.Role != "assistant" {
				t.Fatalf("choice %d's first chunk %q has no assistant role", i, data)
			}
			text = ch.Delta.Content
		}
		seen[i] = true
		got.texts[i] += text
		if ch.FinishReason != nil {
			got.finish[i] = *ch.FinishReason
		}
	}
	if !usageSeen {
		t.Fatal("no usage chunk")
	}
	return got
}

// TestAClientThatLeavesCancelsEveryChoice: each choice is a sequence of
// its own in the engine, so a client that goes away mid-stream must free
// all of them, not only the first.
func TestAClientThatLeavesCancelsEveryChoice(t *testing.T) {
	w, srv, _ := newTestServer(t, fast())
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"n":3,"max_tokens":2000,"ignore_eos":true,"stream":true,"messages":[{"role":"user","content":"x"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if st := w.Runner().Stats(); st.Running+st.Waiting != 3 {
		t.Fatalf("%d running and %d waiting while 3 choices stream", st.Running, st.Waiting)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for st := w.Runner().Stats(); st.Running+st.Waiting > 0; st = w.Runner().Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("%d running and %d waiting 5 s after the client left", st.Running, st.Waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
