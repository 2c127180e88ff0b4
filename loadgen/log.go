package loadgen

import (
	"sync"
	"time"
)

// LogSize is how many conversations the log keeps: the most recent ones.
const LogSize = 200

// TurnLog is one turn of a logged conversation.
type TurnLog struct {
	// Index is the turn's index, from 0.
	Index int `json:"index"`
	// Question is the user's message; for turn 0, without the starter's
	// text, which the log stores once, in the starter.
	Question string `json:"question"`
	// QuestionSource says who wrote Question: "opening", "builtin",
	// "user_model", "fallback" (built-in after a failed user-model call),
	// or "tool" (an agent's tool result).
	QuestionSource string `json:"question_source"`
	// Answer is the assistant's reply; empty if the request failed.
	Answer string `json:"answer"`
	// TTFT is the time to first token, in ms.
	TTFT float64 `json:"ttft_ms"`
	// E2E is the end-to-end latency, in ms.
	E2E float64 `json:"e2e_ms"`
	// TPOT is the time per output token, in ms; 0 when undefined.
	TPOT float64 `json:"tpot_ms"`
	// ISL is the prompt length, in tokens.
	ISL int `json:"isl"`
	// OSL is the answer length, in tokens.
	OSL int `json:"osl"`
	// CachedTokens is the prompt tokens the server found in its cache.
	CachedTokens int `json:"cached_tokens"`
	// Worker is the worker that served the turn.
	Worker string `json:"worker,omitempty"`
	// Error is why the turn failed; empty on success.
	Error string `json:"error,omitempty"`
	// Class is the error's class; empty on success.
	Class ErrorClass `json:"class,omitempty"`
}

// ConversationLog is one logged conversation.
type ConversationLog struct {
	// ID identifies the conversation within this generator's life.
	ID uint64 `json:"id"`
	// StarterID is the starter it opened with.
	StarterID string `json:"starter_id"`
	// Title is the starter's title.
	Title string `json:"title"`
	// Started is when its first turn was sent.
	Started time.Time `json:"started"`
	// Planned is how many turns it was to have.
	Planned int `json:"planned"`
	// Done says whether it has ended.
	Done bool `json:"done"`
	// Turns are the turns answered (or failed) so far.
	Turns []TurnLog `json:"turns"`
	// Asking is the turn sent and not yet answered; nil when none is.
	Asking *AskingTurn `json:"asking,omitempty"`
}

// AskingTurn is a question waiting for its answer.
type AskingTurn struct {
	// Index is the turn's index, from 0.
	Index int `json:"index"`
	// Question and QuestionSource are as in TurnLog.
	Question       string `json:"question"`
	QuestionSource string `json:"question_source"`
	// Sent is when the request went out.
	Sent time.Time `json:"sent"`
}

// ConversationSummary is a conversation's line in the list.
type ConversationSummary struct {
	// ID identifies the conversation.
	ID uint64 `json:"id"`
	// Title is the starter's title.
	Title string `json:"title"`
	// Started is when its first turn was sent.
	Started time.Time `json:"started"`
	// Turns is how many turns have been sent.
	Turns int `json:"turns"`
	// Planned is how many turns it was to have.
	Planned int `json:"planned"`
	// Done says whether it has ended.
	Done bool `json:"done"`
	// Errors counts its failed turns.
	Errors int `json:"errors"`
	// LastWorker is the worker that served its latest turn.
	LastWorker string `json:"last_worker,omitempty"`
	// Asking says that a turn is out, waiting for its answer.
	Asking bool `json:"asking,omitempty"`
}

// convLog keeps the last LogSize conversations in a ring.
type convLog struct {
	mu   sync.Mutex
	next uint64
	ring []*ConversationLog // oldest first once full
	head int                // index of the oldest entry when full
}

func (l *convLog) open(s *Starter, planned int, now time.Time) *ConversationLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	c := &ConversationLog{ID: l.next, StarterID: s.ID, Title: s.Title, Started: now, Planned: planned}
	if len(l.ring) < LogSize {
		l.ring = append(l.ring, c)
	} else {
		l.ring[l.head] = c
		l.head = (l.head + 1) % LogSize
	}
	return c
}

// ask records a question sent, until its answer comes.
func (l *convLog) ask(c *ConversationLog, turn int, question, source string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Asking = &AskingTurn{Index: turn, Question: question, QuestionSource: source, Sent: now}
}

func (l *convLog) addTurn(c *ConversationLog, t TurnLog) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Turns = append(c.Turns, t)
	c.Asking = nil
}

func (l *convLog) end(c *ConversationLog) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Done, c.Asking = true, nil
}

// list returns the summaries, newest first.
func (l *convLog) list() []ConversationSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ConversationSummary, 0, len(l.ring))
	for i := len(l.ring) - 1; i >= 0; i-- {
		c := l.ring[(l.head+i)%len(l.ring)]
		s := ConversationSummary{ID: c.ID, Title: c.Title, Started: c.Started, Turns: len(c.Turns), Planned: c.Planned, Done: c.Done, Asking: c.Asking != nil}
		for _, t := range c.Turns {
			if t.Class != "" {
				s.Errors++
			}
		}
		if n := len(c.Turns); n > 0 {
			s.LastWorker = c.Turns[n-1].Worker
		}
		out = append(out, s)
	}
	return out
}

func (l *convLog) get(id uint64) (ConversationLog, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.ring {
		if c.ID == id {
			cp := *c
			cp.Turns = append([]TurnLog(nil), c.Turns...)
			if c.Asking != nil {
				a := *c.Asking
				cp.Asking = &a
			}
			return cp, true
		}
	}
	return ConversationLog{}, false
}

func turnLog(turn int, question, source string, r Result) TurnLog {
	t := TurnLog{
		Index: turn, Question: question, QuestionSource: source, Answer: r.Text,
		TTFT: ms(r.TTFT), E2E: ms(r.E2E), ISL: r.ISL, OSL: r.OSL, CachedTokens: r.CachedTokens,
		Worker: r.Worker, Class: r.Class,
	}
	if tpot, ok := r.TPOT(); ok {
		t.TPOT = ms(tpot)
	}
	if r.Err != nil {
		t.Error = r.Err.Error()
	}
	return t
}
