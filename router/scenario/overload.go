package scenario

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Overload is a shared-prefix overload: many conversations open with one
// long system prompt (as in Dynamo issue #737), and together they need more
// than one worker's batch capacity.
type Overload struct {
	// Requests is how many conversations arrive.
	Requests int
	// SystemTokens is the shared system prompt's length, in tokens.
	SystemTokens int
	// UserTokens is each conversation's own message length, in tokens.
	UserTokens int
	// Every is the time between arrivals.
	Every time.Duration
	// Prefill is the time from routing to the first token.
	Prefill time.Duration
	// Duration is the time from routing to the end of the answer.
	Duration time.Duration
}

// OverloadReport says how the requests spread.
type OverloadReport struct {
	// Peak is the most requests each worker had in flight at once.
	Peak map[string]int
	// Routed counts requests per worker.
	Routed map[string]int
	// Refused counts requests the router refused.
	Refused int
}

func (r OverloadReport) String() string {
	names := make([]string, 0, len(r.Peak))
	for n := range r.Peak {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s peak %d (routed %d)", n, r.Peak[n], r.Routed[n])
	}
	if r.Refused > 0 {
		fmt.Fprintf(&b, "; %d refused", r.Refused)
	}
	return b.String()
}

// RunOverload plays o against t in virtual time on clk. One request carrying
// only the system prompt runs first, so that one worker holds the prefix, as
// in a fleet that has served it before. workers names every worker, so that
// idle ones report a peak of 0.
func RunOverload(ctx context.Context, t Target, clk *Clock, o Overload, workers []string) (OverloadReport, error) {
	rep := OverloadReport{Peak: map[string]int{}, Routed: map[string]int{}}
	for _, w := range workers {
		rep.Peak[w], rep.Routed[w] = 0, 0
	}
	system := make([]uint32, o.SystemTokens)
	for i := range system {
		system[i] = uint32(1000 + i%5000)
	}
	warm, err := t.Begin(ctx, Prompt{Tokens: system})
	if err != nil {
		return rep, fmt.Errorf("scenario: warm-up: %w", err)
	}
	warm.Finish()

	start := clk.Now()
	var q events
	for i := range o.Requests {
		heap.Push(&q, event{at: start.Add(time.Duration(i) * o.Every), kind: arrive, conv: i})
	}
	inflight := map[string]int{}
	for q.Len() > 0 {
		ev := heap.Pop(&q).(event)
		clk.Set(ev.at)
		switch ev.kind {
		case arrive:
			tokens := append(append(make([]uint32, 0, o.SystemTokens+o.UserTokens), system...), userTokens(ev.conv, o.UserTokens)...)
			u, err := t.Begin(ctx, Prompt{Tokens: tokens})
			if err != nil {
				rep.Refused++
				continue
			}
			w := u.Worker()
			rep.Routed[w]++
			inflight[w]++
			rep.Peak[w] = max(rep.Peak[w], inflight[w])
			heap.Push(&q, event{at: ev.at.Add(o.Prefill), kind: firstToken, turn: u})
			heap.Push(&q, event{at: ev.at.Add(o.Duration), kind: finish, turn: u})
		case firstToken:
			ev.turn.FirstToken()
		case finish:
			ev.turn.Finish()
			inflight[ev.turn.Worker()]--
		}
	}
	return rep, nil
}

// userTokens is conversation c's own message: n tokens no other shares.
func userTokens(c, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(50000 + c*n + i)
	}
	return out
}

type eventKind int

const (
	finish eventKind = iota // finishes first at equal times, freeing room
	firstToken
	arrive
)

type event struct {
	at   time.Time
	kind eventKind
	conv int
	turn Turn
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].kind < q[j].kind
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
