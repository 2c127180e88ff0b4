package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/kvlens/kvlens/tokenizer"
)

// WorkerHeader is the response header from which the load generator learns
// which worker served a request (set by kvlens's router).
const WorkerHeader = "X-Kvlens-Worker"

// OpenAIClient is the Transport that talks to any OpenAI-compatible endpoint
// through github.com/sashabaranov/go-openai.
type OpenAIClient struct {
	client *openai.Client
	model  string
}

var _ Transport = (*OpenAIClient)(nil)

// NewOpenAIClient returns a transport for the OpenAI API at baseURL (ending
// in /v1), asking for model. apiKey may be empty.
func NewOpenAIClient(baseURL, model, apiKey string) *OpenAIClient {
	cfg := openai.DefaultConfig(apiKey)
	cfg.BaseURL = strings.TrimSuffix(baseURL, "/")
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{
		Proxy:               nil, // a benchmark client must not detour through HTTP_PROXY
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}}
	return &OpenAIClient{client: openai.NewClientWithConfig(cfg), model: model}
}

// Chat implements Transport.
func (c *OpenAIClient) Chat(ctx context.Context, req TurnRequest, onFirstToken func(time.Duration)) Result {
	msgs := make([]openai.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	var r Result
	start := time.Now() // monotonic: every duration below is immune to clock steps
	stream, err := c.client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model:         c.model,
		Messages:      msgs,
		MaxTokens:     req.MaxTokens,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		return failed(ctx, r, err, false)
	}
	defer stream.Close()
	r.Worker = stream.Header().Get(WorkerHeader)

	var text strings.Builder
	var last time.Time
	var usage *openai.Usage
	finished := false
	for {
		chunk, err := stream.Recv()
		now := time.Now()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return failed(ctx, r, fmt.Errorf("stream broke after %d bytes: %w", text.Len(), err), true)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.FinishReason != "" {
				finished = true
			}
			if ch.Delta.Content == "" {
				continue
			}
			if text.Len() == 0 {
				r.TTFT = now.Sub(start)
				if onFirstToken != nil {
					onFirstToken(r.TTFT)
				}
				r.FirstChunkTokens = tokenizer.Count(ch.Delta.Content)
			}
			text.WriteString(ch.Delta.Content)
			last = now
		}
	}
	// go-openai reports a clean end of stream as io.EOF whether or not
	// [DONE] came. A stream that ended without a finish reason or usage
	// chunk was cut, and counts as a failure.
	if !finished && usage == nil {
		r.Class = ErrStream
		r.Err = errors.New("stream ended without a finish reason or usage")
		return r
	}
	r.Text = text.String()
	if !last.IsZero() {
		r.E2E = last.Sub(start)
	}
	if usage != nil {
		r.OSL = usage.CompletionTokens
		r.ISL = usage.PromptTokens
		if usage.PromptTokensDetails != nil {
			r.CachedTokens = usage.PromptTokensDetails.CachedTokens
		}
	} else {
		r.OSL = tokenizer.Count(r.Text)
	}
	return r
}

// failed fills in r's error; midStream says whether the response had begun.
func failed(ctx context.Context, r Result, err error, midStream bool) Result {
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	r.Err = err
	r.Class = classify(ctx, err, status, midStream)
	return r
}
