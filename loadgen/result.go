package loadgen

import (
	"context"
	"errors"
	"time"

	"github.com/kvlens/kvlens/tokenizer"
)

// ErrorClass names why a request failed, as in shared/reference/metrics.md.
type ErrorClass string

// The error classes the load generator counts.
const (
	ErrConnect   ErrorClass = "connect"
	ErrTimeout   ErrorClass = "timeout"
	ErrHTTP429   ErrorClass = "http_429"
	ErrHTTP503   ErrorClass = "http_503"
	ErrHTTP5xx   ErrorClass = "http_5xx"
	ErrHTTP4xx   ErrorClass = "http_4xx"
	ErrStream    ErrorClass = "broken_stream"
	ErrCancelled ErrorClass = "cancelled"
)

// ErrorClasses are every ErrorClass, in the order above.
var ErrorClasses = []ErrorClass{ErrConnect, ErrTimeout, ErrHTTP429, ErrHTTP503, ErrHTTP5xx, ErrHTTP4xx, ErrStream, ErrCancelled}

// TurnRequest is one chat turn to send.
type TurnRequest struct {
	// Messages is the whole conversation so far, resent every turn.
	Messages []tokenizer.Message
	// MaxTokens caps the answer.
	MaxTokens int
}

// Result is what one request measured.
type Result struct {
	// Text is the answer's content.
	Text string
	// Start is when the request was sent: the instant TTFT and E2E count
	// from (with a monotonic reading).
	Start time.Time
	// TTFT is the time from just before sending to the first content chunk.
	TTFT time.Duration
	// E2E is the time from just before sending to the last content chunk.
	E2E time.Duration
	// OSL is the number of output tokens, from usage or else the tokenizer.
	OSL int
	// FirstChunkTokens is how many tokens the first content chunk carried.
	FirstChunkTokens int
	// ISL is usage.prompt_tokens.
	ISL int
	// CachedTokens is usage.prompt_tokens_details.cached_tokens.
	CachedTokens int
	// NoCacheReport says the response's usage said nothing of cached
	// tokens (vLLM without --enable-prompt-tokens-details): the request
	// counts in no hit rate, rather than as a miss.
	NoCacheReport bool
	// OracleTokens is the prompt's best achievable cached prefix when it
	// was routed, in tokens, as kvlens's router reports it; HasOracle says
	// it was reported (a foreign frontend reports none).
	OracleTokens int
	HasOracle    bool
	// ChunkGaps are the gaps between consecutive content chunks, the raw
	// inter-chunk latency: not ITL, since a chunk may carry several tokens.
	ChunkGaps []time.Duration
	// Worker is the worker that served the request, from the router header.
	Worker string
	// Turn is the turn's index in its conversation, from 0; in trace replay,
	// the record's line number.
	Turn int
	// Err is why the request failed; nil on success.
	Err error
	// Class classifies Err.
	Class ErrorClass
}

// TPOT is time per output token, (E2E − TTFT) / (OSL − k), where k is the
// tokens of the first chunk. It is undefined (false) when OSL − k < 1.
func (r Result) TPOT() (time.Duration, bool) {
	k := max(r.FirstChunkTokens, 1)
	if r.Err != nil || r.OSL-k < 1 {
		return 0, false
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OSL-k), true
}

// A Transport sends one chat turn and measures it. onFirstToken, when not nil,
// is called once with the serving worker (may be "") and the TTFT as soon as
// the first content arrives.
type Transport interface {
	Chat(ctx context.Context, req TurnRequest, onFirstToken func(worker string, ttft time.Duration)) Result
}

// classify maps an error to its class, given the HTTP status if there was one
// and whether the response stream had begun.
func classify(ctx context.Context, err error, status int, midStream bool) ErrorClass {
	switch {
	case status == 429:
		return ErrHTTP429
	case status == 503:
		return ErrHTTP503
	case status >= 500:
		return ErrHTTP5xx
	case status >= 400:
		return ErrHTTP4xx
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ErrTimeout
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return ErrCancelled
	case midStream:
		return ErrStream
	}
	return ErrConnect
}
