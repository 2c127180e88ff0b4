package loadgen

import (
	"context"
	"time"
)

// An AsyncTransport starts one chat turn and returns at once; the generator
// is event-driven and never waits for an answer.
//
// Start calls onFirstToken, when not nil, once with the serving worker and
// the TTFT as soon as the first content arrives, and then done exactly once
// with the result. Start itself never calls them: a transport driven by a
// discrete-event loop calls them from later events, a goroutine-backed one
// from its goroutine. The returned cancel abandons the turn: done then
// reports the cause (the generator passes context.Canceled when it stops, or
// its request timeout), and may be called before cancel returns.
type AsyncTransport interface {
	Start(req TurnRequest, onFirstToken func(worker string, ttft time.Duration), done func(Result)) (cancel func(cause error))
}

// Async adapts a blocking Transport: each turn runs Chat in its own
// goroutine, under a context that cancel ends.
func Async(t Transport) AsyncTransport { return asyncTransport{t} }

type asyncTransport struct{ t Transport }

func (a asyncTransport) Start(req TurnRequest, onFirstToken func(string, time.Duration), done func(Result)) func(error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		r := a.t.Chat(ctx, req, onFirstToken)
		cancel(nil)
		done(r)
	}()
	return cancel
}
