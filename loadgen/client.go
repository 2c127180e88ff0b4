package loadgen

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/internal/sse"
	"github.com/kvlens/kvlens/tokenizer"
)

// WorkerHeader is the response header from which the load generator learns
// which worker served a request (set by kvlens's router).
const WorkerHeader = "X-Kvlens-Worker"

// OracleHeader is the response header in which kvlens's router gives a
// request's best achievable cached prefix, in tokens.
const OracleHeader = "X-Kvlens-Oracle-Tokens"

// OpenAIClient is the Transport that streams chat completions from any
// OpenAI-compatible endpoint.
//
// It reads the SSE stream itself, with net/http and internal/sse, rather
// than through go-openai (which the user simulator still uses): every
// timestamp is taken the moment the read that ends an event returns,
// before any JSON is decoded, and the chunk body is decoded into a
// five-field struct instead of go-openai's full response type. That keeps decoding cost out of TTFT and
// the chunk gaps, and the client's CPU per token low at 500 streams
// (BenchmarkClientOverhead, TestAccuracy).
type OpenAIClient struct {
	http  *http.Client
	url   string
	model string
	key   string
	clk   clock.Clock // nil means time.Now
}

var _ Transport = (*OpenAIClient)(nil)

// NewOpenAIClient returns a transport for the OpenAI API at baseURL (ending
// in /v1), asking for model. apiKey may be empty.
func NewOpenAIClient(baseURL, model, apiKey string) *OpenAIClient {
	return &OpenAIClient{
		http: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // a benchmark client must not detour through HTTP_PROXY
			MaxIdleConnsPerHost: MaxConcurrency,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // SSE must arrive as written
		}},
		url:   strings.TrimSuffix(baseURL, "/") + "/chat/completions",
		model: model,
		key:   apiKey,
	}
}

// SetClock makes the client time every request on clk rather than the
// wall clock, as a load generator whose workers run on a warped clock
// must, so that its figures are the model's time (clock.Warp). Call it
// before the first request.
func (c *OpenAIClient) SetClock(clk clock.Clock) { c.clk = clk }

// now is the time on the client's clock.
func (c *OpenAIClient) now() time.Time {
	if c.clk == nil {
		return time.Now()
	}
	return c.clk.Now()
}

// CloseIdleConnections closes the client's idle connections, among them
// those a cancelled request dialled and never used: a server shutting down
// waits seconds for such a connection to say something.
func (c *OpenAIClient) CloseIdleConnections() { c.http.CloseIdleConnections() }

type chatBody struct {
	Model         string              `json:"model"`
	Messages      []tokenizer.Message `json:"messages"`
	MaxTokens     int                 `json:"max_tokens"`
	Stream        bool                `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// streamChunk is the part of a chat.completion.chunk the client reads.
type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
			// A reasoning model's thinking, before its answer, under
			// vLLM's current name and the one SGLang and older vLLM use
			// (newer vLLM may send both, the same text).
			Reasoning        string `json:"reasoning"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Chat implements Transport.
func (c *OpenAIClient) Chat(ctx context.Context, req TurnRequest, onFirstToken func(worker string, ttft time.Duration)) Result {
	body := chatBody{Model: c.model, Messages: req.Messages, MaxTokens: req.MaxTokens, Stream: true}
	body.StreamOptions.IncludeUsage = true
	raw, err := json.Marshal(body)
	if err != nil {
		return Result{Err: fmt.Errorf("encode request: %w", err), Class: ErrHTTP4xx}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(raw))
	if err != nil {
		return Result{Err: fmt.Errorf("build request: %w", err), Class: ErrHTTP4xx}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if c.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.key)
	}

	start := c.now() // monotonic: every duration below is immune to clock steps
	r := Result{Start: start}
	resp, err := c.http.Do(hreq)
	if err != nil {
		r.Err = err
		r.Class = classify(ctx, err, 0, false)
		return r
	}
	defer resp.Body.Close()
	r.Worker = resp.Header.Get(WorkerHeader)
	if v, err := strconv.Atoi(resp.Header.Get(OracleHeader)); err == nil && v >= 0 {
		r.OracleTokens, r.HasOracle = v, true
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.Err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.Join(strings.Fields(string(msg)), " "))
		r.Class = classify(ctx, r.Err, resp.StatusCode, false)
		return r
	}

	// text is the answer, which the conversation keeps; thought is a
	// reasoning model's thinking before it, which counts as output (first
	// token, gaps, OSL without usage) as AIPerf's TTFT counts it, and
	// which chat templates leave out of the history.
	var text, thought strings.Builder
	started := false
	var last time.Time
	var chunk streamChunk
	finished, usage, done, cacheReport := false, false, false, false
	// event reads one event's chunk, timed at now; it returns false when
	// the chunk ends the request in failure, with r's error set.
	event := func(ev sse.Event, now time.Time) bool {
		if ev.TooLong {
			r.Err = fmt.Errorf("stream broke after %d bytes of text: SSE event longer than %d bytes", text.Len(), maxLineBytes)
			r.Class = ErrStream
			return false
		}
		payload := bytes.TrimSpace(ev.Data)
		if string(payload) == "[DONE]" {
			done = true
			return true
		}
		chunk = streamChunk{}
		if err := json.Unmarshal(payload, &chunk); err != nil {
			r.Err = fmt.Errorf("decode stream chunk %.80q: %w", payload, err)
			r.Class = ErrStream
			return false
		}
		if chunk.Error != nil {
			r.Err = fmt.Errorf("server error mid-stream: %q", chunk.Error.Message)
			r.Class = ErrStream
			return false
		}
		if u := chunk.Usage; u != nil {
			usage = true
			r.OSL, r.ISL = u.CompletionTokens, u.PromptTokens
			if u.PromptTokensDetails != nil {
				r.CachedTokens, cacheReport = u.PromptTokensDetails.CachedTokens, true
			}
		}
		content := false
		for _, ch := range chunk.Choices {
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finished = true
			}
			reasoning := cmp.Or(ch.Delta.Reasoning, ch.Delta.ReasoningContent)
			if ch.Delta.Content == "" && reasoning == "" {
				continue
			}
			if !started {
				started = true
				r.TTFT = now.Sub(start)
				if onFirstToken != nil {
					onFirstToken(r.Worker, r.TTFT)
				}
				r.FirstChunkTokens = tokenizer.Count(reasoning + ch.Delta.Content)
			}
			thought.WriteString(reasoning)
			text.WriteString(ch.Delta.Content)
			content = true
		}
		if content {
			if !last.IsZero() {
				r.ChunkGaps = append(r.ChunkGaps, now.Sub(last))
			}
			last = now
		}
		return true
	}
	// Each event is timed when the read that ends it returns: a chunk is
	// whole only at the blank line after its last data line, since a
	// worker may split its JSON over several. The time is taken before
	// anything is decoded.
	events := sse.Decoder{Limit: maxLineBytes}
	buf := make([]byte, 16<<10)
	for !done {
		n, err := resp.Body.Read(buf)
		now := c.now()
		for p := buf[:n]; len(p) > 0 && !done; {
			k, ev, ok := events.Feed(p)
			p = p[k:]
			if ok && !event(ev, now) {
				return r
			}
		}
		if done {
			break
		}
		if errors.Is(err, io.EOF) {
			// A last event without a blank line after it still counts,
			// as "data: [DONE]\n" ending the stream does.
			if ev, ok := events.End(); ok && !event(ev, now) {
				return r
			}
			break
		}
		if err != nil {
			r.Err = fmt.Errorf("stream broke after %d bytes of text: %w", text.Len(), err)
			r.Class = classify(ctx, err, 0, true)
			return r
		}
	}
	// A stream that ended without [DONE], a finish reason or a usage chunk
	// was cut, and counts as a failure.
	if !done && !finished && !usage {
		r.Class = ErrStream
		r.Err = fmt.Errorf("stream ended after %d bytes of text without a finish reason, usage or [DONE]", text.Len())
		return r
	}
	r.Text, r.NoCacheReport = text.String(), !cacheReport
	if !last.IsZero() {
		r.E2E = last.Sub(start)
	}
	if !usage || r.OSL == 0 && started {
		r.OSL = tokenizer.Count(thought.String()) + tokenizer.Count(r.Text)
	}
	return r
}
