package loadgen

import (
	"context"
	"errors"
	"github.com/kvlens/kvlens/internal/clocktest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlens/kvlens/tokenizer"
)

// gateTransport answers each turn when the test opens the gate, and records
// how many calls are open and whether any was cut by cancellation.
type gateTransport struct {
	gate  chan struct{}
	open  atomic.Int64
	calls atomic.Int64
	cut   atomic.Int64
}

func newGate() *gateTransport { return &gateTransport{gate: make(chan struct{})} }

func (g *gateTransport) Chat(ctx context.Context, req TurnRequest, first func(string, time.Duration)) Result {
	g.open.Add(1)
	g.calls.Add(1)
	defer g.open.Add(-1)
	if first != nil {
		first("", time.Millisecond)
	}
	select {
	case <-g.gate:
		return Result{Text: "an answer with enough words to pick a phrase from it", TTFT: time.Millisecond, E2E: 10 * time.Millisecond, OSL: 10}
	case <-ctx.Done():
		g.cut.Add(1)
		return Result{Err: ctx.Err(), Class: ErrCancelled}
	}
}

func testConfig(n int) Config {
	cfg := DefaultConfig()
	cfg.Concurrency = n
	cfg.StartRate = 0
	cfg.Turns = UniformTurns(5, 5)
	cfg.RequestTimeout = 0 // no timeout timers on a test's virtual clock
	cfg.Starters = []Starter{{ID: "s", Topic: "testing", Text: "Some text."}}
	return cfg
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestLoweringConcurrencyConvergesWithinOneTurnAndCutsNoStream(t *testing.T) {
	tr := newGate()
	g, err := New(tr, testConfig(180), nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	defer g.Stop()
	waitFor(t, "180 requests in flight", func() bool { return tr.open.Load() == 180 })
	if err := g.SetConcurrency(60); err != nil {
		t.Fatal(err)
	}
	// Nothing may be cut while the excess waits for its turn to end.
	time.Sleep(20 * time.Millisecond)
	if got := g.Snapshot().Live; got != 180 {
		t.Fatalf("live = %d before any turn ended; lowering must not cut streams", got)
	}
	calls := tr.calls.Load()
	for range 180 { // end the 180 first turns
		tr.gate <- struct{}{}
	}
	// Each of the 180 finished one turn; 120 of them must leave, 60 go on.
	waitFor(t, "60 follow-up turns", func() bool { return tr.calls.Load()-calls >= 60 && tr.open.Load() == 60 })
	time.Sleep(50 * time.Millisecond) // room for any wrongly started extra
	if got := tr.calls.Load() - calls; got != 60 {
		t.Fatalf("%d follow-up turns started, want 60", got)
	}
	if got := g.Snapshot().Live; got != 60 {
		t.Fatalf("live = %d after one turn, want 60", got)
	}
	if tr.cut.Load() != 0 {
		t.Fatalf("%d streams were cut", tr.cut.Load())
	}
}

func TestStopThenStartLeavesNothingOfTheOldRun(t *testing.T) {
	tr := newGate()
	g, _ := New(tr, testConfig(50), nil)
	g.Start()
	waitFor(t, "50 requests in flight", func() bool { return tr.open.Load() == 50 })
	g.Stop()
	if n := tr.open.Load(); n != 0 {
		t.Fatalf("%d requests of the stopped run still open after Stop returned", n)
	}
	if s := g.Snapshot(); s.Running || s.Live != 0 || s.InFlight != 0 {
		t.Fatalf("after Stop: %+v", s)
	}
	g.Start()
	defer g.Stop()
	waitFor(t, "50 requests of the new run", func() bool { return tr.open.Load() == 50 })
	if got := g.Snapshot().Live; got != 50 {
		t.Fatalf("live = %d after restart, want 50 (no double load)", got)
	}
	if s := g.Snapshot().Window; s.Errors != 0 {
		t.Fatalf("Stop's cancellations were counted as %d errors", s.Errors)
	}
}

// TestARateOfZeroStartsEveryConversationAtOnce: unpaced, the whole target
// starts with the clock standing still. (A positive rate's pacing, one
// start per 1/rate of clock time, is TestPacingAndThinkTimeRunOnTheGivenClock's.)
func TestARateOfZeroStartsEveryConversationAtOnce(t *testing.T) {
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	tr := newGate()
	cfg := testConfig(100)
	cfg.StartRate = 0
	cfg.Clock = clk
	g, _ := New(tr, cfg, nil)
	g.Start()
	defer g.Stop()
	waitFor(t, "100 conversations", func() bool { return tr.open.Load() == 100 })
	if n := len(clk.Pending()); n != 0 {
		t.Fatalf("%d timers pending: an unpaced start waits for nothing", n)
	}
}

func TestSetConcurrencyRejectsBadValues(t *testing.T) {
	g, _ := New(newGate(), testConfig(60), nil)
	for _, n := range []int{-1, MaxConcurrency + 1} {
		if err := g.SetConcurrency(n); err == nil {
			t.Errorf("SetConcurrency(%d) accepted", n)
		}
	}
	if got := g.Snapshot().Target; got != 60 {
		t.Fatalf("target = %d after rejected values, want 60 unchanged", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no starters", func(c *Config) { c.Starters = nil }},
		{"an empty turn distribution", func(c *Config) { c.Turns = TurnDist{} }},
		{"zero max tokens", func(c *Config) { c.MaxTokens = 0 }},
		{"negative start rate", func(c *Config) { c.StartRate = -1 }},
		{"negative concurrency", func(c *Config) { c.Concurrency = -5 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(10)
			tt.mutate(&cfg)
			if _, err := New(newGate(), cfg, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestRateZeroSupervisorDoesNotSpin(t *testing.T) {
	// The original demo's rate 0 was a 1 ms timer. Here, with the target
	// reached, the supervisor must sleep until something changes.
	tr := newGate()
	g, _ := New(tr, testConfig(20), nil)
	g.Start()
	defer g.Stop()
	waitFor(t, "20 requests in flight", func() bool { return tr.open.Load() == 20 })
	before := g.wakeups.Load()
	time.Sleep(200 * time.Millisecond)
	if n := g.wakeups.Load() - before; n > 0 {
		t.Fatalf("the idle supervisor woke %d times in 200 ms, want 0 (a 1 ms timer would give ~200)", n)
	}
	g.SetConcurrency(21)
	waitFor(t, "the 21st conversation", func() bool { return tr.open.Load() == 21 })
	if n := g.wakeups.Load() - before; n > 3 {
		t.Fatalf("raising the target by one took %d wake-ups, want at most 3", n)
	}
}

func TestPacingAndThinkTimeRunOnTheGivenClock(t *testing.T) {
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	tr := newGate()
	cfg := testConfig(5)
	cfg.StartRate = 10 // one start per 100 ms of clock time
	cfg.ThinkTime = 5 * time.Second
	cfg.Clock = clk
	g, _ := New(tr, cfg, nil)
	g.Start()
	defer g.Stop()
	waitFor(t, "the first start", func() bool { return tr.open.Load() == 1 })
	time.Sleep(30 * time.Millisecond) // real time must not pace anything
	if n := tr.open.Load(); n != 1 {
		t.Fatalf("%d conversations before the clock moved, want 1", n)
	}
	for want := int64(2); want <= 5; want++ {
		waitFor(t, "a pacing timer", func() bool { return len(clk.Pending()) == 1 })
		clk.Advance(100 * time.Millisecond)
		waitFor(t, "the next start", func() bool { return tr.open.Load() == want })
	}
	tr.gate <- struct{}{} // one answer: its conversation now thinks for 5 s
	waitFor(t, "the think timer", func() bool { return len(clk.Pending()) == 1 && tr.open.Load() == 4 })
	clk.Advance(4 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if n := tr.open.Load(); n != 4 {
		t.Fatalf("%d requests open 4 s into a 5 s think time, want 4", n)
	}
	clk.Advance(time.Second)
	waitFor(t, "the follow-up after thinking", func() bool { return tr.open.Load() == 5 })
}

// failingUser is a user simulator whose every call fails.
type failingUser struct{ calls atomic.Int64 }

func (f *failingUser) FollowUp(context.Context, Starter, []tokenizer.Message) (string, error) {
	f.calls.Add(1)
	return "", errors.New("user model unreachable")
}

func TestFailedUserModelCallsAreCountedFallbacks(t *testing.T) {
	tr := newGate()
	close(tr.gate) // every turn answers at once
	user := &failingUser{}
	cfg := testConfig(3)
	cfg.Turns = UniformTurns(3, 3)
	cfg.User = user
	reg := prometheus.NewRegistry()
	g, _ := New(tr, cfg, NewMetrics(reg))
	g.Start()
	waitFor(t, "some conversations", func() bool { return len(g.Conversations()) >= 6 })
	g.Stop()
	s := g.Snapshot()
	// Every failed call is a counted fallback, except the at most one per
	// conversation (3) that Stop cut short: those end their conversation.
	if calls := user.calls.Load(); !s.User.Model || s.User.Fallbacks == 0 || s.User.Fallbacks > calls || s.User.Fallbacks < calls-3 || s.User.ModelQuestions != 0 {
		t.Fatalf("user stats %+v after %d failed calls: every failure must be a counted fallback", s.User, calls)
	}
	if s.User.LastError != "user model unreachable" {
		t.Fatalf("last error %q", s.User.LastError)
	}
	if got := testutil.ToFloat64(g.metrics.fallbacks); got != float64(s.User.Fallbacks) {
		t.Fatalf("Prometheus counts %v fallbacks, snapshot %d", got, s.User.Fallbacks)
	}
	var c ConversationLog
	for _, sum := range g.Conversations() {
		if sum.Turns >= 2 {
			c, _ = g.Conversation(sum.ID)
		}
	}
	if len(c.Turns) < 2 || c.Turns[1].QuestionSource != "fallback" || c.Turns[1].Question == "" {
		t.Fatalf("logged conversation %+v: turn 1 must be marked as a fallback", c)
	}
}

func TestConversationLogKeepsTheLast200WithText(t *testing.T) {
	tr := newGate()
	close(tr.gate)
	cfg := testConfig(20)
	cfg.Turns = UniformTurns(2, 2)
	g, _ := New(tr, cfg, nil)
	g.Start()
	waitFor(t, "more than 200 conversations", func() bool {
		l := g.Conversations()
		return len(l) == LogSize && l[0].ID > LogSize+20
	})
	g.Stop()
	list := g.Conversations()
	if len(list) != LogSize {
		t.Fatalf("log holds %d conversations, want %d", len(list), LogSize)
	}
	for i := 1; i < len(list); i++ {
		if list[i].ID >= list[i-1].ID {
			t.Fatalf("list not newest first at %d: %d then %d", i, list[i-1].ID, list[i].ID)
		}
	}
	if _, ok := g.Conversation(1); ok {
		t.Fatal("conversation 1 is still in a log that has seen far more than 200")
	}
	var c ConversationLog
	for _, s := range list {
		if s.Done && s.Turns == 2 {
			c, _ = g.Conversation(s.ID)
			break
		}
	}
	if len(c.Turns) != 2 || c.Turns[0].QuestionSource != "opening" || c.Turns[1].QuestionSource != "builtin" {
		t.Fatalf("conversation %+v", c)
	}
	if strings.Contains(c.Turns[0].Question, "Some text.") || c.Turns[0].Answer == "" || c.Turns[0].OSL != 10 || c.Turns[0].E2E != 10 {
		t.Fatalf("turn 0 %+v: want the question without the starter text, the answer and its metrics", c.Turns[0])
	}
}

func TestConversationLogShowsTheQuestionWaitingForItsAnswer(t *testing.T) {
	tr := newGate() // every request waits at the gate
	cfg := testConfig(3)
	cfg.Turns = UniformTurns(2, 2)
	g, _ := New(tr, cfg, nil)
	g.Start()
	defer g.Stop()
	waitFor(t, "3 requests out", func() bool { return tr.open.Load() == 3 })
	list := g.Conversations()
	if len(list) != 3 {
		t.Fatalf("%d conversations listed, want 3", len(list))
	}
	for _, s := range list {
		if !s.Asking || s.Turns != 0 {
			t.Errorf("conversation %d: asking %v with %d turns answered, want its first question out", s.ID, s.Asking, s.Turns)
		}
		c, _ := g.Conversation(s.ID)
		if c.Asking == nil || c.Asking.Index != 0 || c.Asking.QuestionSource != "opening" || c.Asking.Question == "" || c.Asking.Sent.IsZero() {
			t.Errorf("conversation %d: asking %+v, want the opening question with its time", s.ID, c.Asking)
		}
	}
	close(tr.gate) // answers come; follow-ups go out and are answered at once
	waitFor(t, "a conversation done", func() bool {
		for _, s := range g.Conversations() {
			if s.Done {
				return true
			}
		}
		return false
	})
	for _, s := range g.Conversations() {
		c, ok := g.Conversation(s.ID)
		if !ok {
			continue // conversations churn fast here: this one left the log since listing
		}
		// The first 3 start part-way, with 1 or 2 turns; the rest with 2.
		if s.Done && (s.Asking || c.Asking != nil || len(c.Turns) != s.Planned || s.Planned < 1 || s.Planned > 2) {
			t.Errorf("done conversation %d: asking %v, %d of %d turns; want nothing asked and every planned turn logged", s.ID, c.Asking, len(c.Turns), s.Planned)
		}
	}
}

// TestAnAbortBeforeTheTransportStartsIsAppliedWhenItStarts covers Stop
// landing between a turn's registration and its transport's Start: the
// abort must neither panic on the missing cancel nor be lost.
func TestAnAbortBeforeTheTransportStartsIsAppliedWhenItStarts(t *testing.T) {
	first, second := errors.New("first"), errors.New("second")
	tests := []struct {
		name   string
		before []error // aborts before start
		after  []error // aborts after start
		want   []error // causes the transport's cancel received
	}{
		{"an abort before start cancels the turn as it starts", []error{first}, nil, []error{first}},
		{"only the first of two early aborts is kept", []error{first, second}, nil, []error{first}},
		{"an abort after start cancels at once", nil, []error{first}, []error{first}},
		{"a turn never aborted is never cancelled", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []error
			tr := &turn{}
			for _, e := range tt.before {
				tr.abort(e)
			}
			tr.start(func() func(error) { return func(e error) { got = append(got, e) } })
			for _, e := range tt.after {
				tr.abort(e)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("cancel got %v, want %v", got, tt.want)
			}
		})
	}
}

// failThenGate fails its first n calls at once, as a worker answering 503
// would, and holds every later one until its context ends.
type failThenGate struct {
	n     int64
	now   func() time.Time // the send time a real client stamps
	calls atomic.Int64
	open  atomic.Int64
}

func (f *failThenGate) Chat(ctx context.Context, req TurnRequest, first func(string, time.Duration)) Result {
	if f.calls.Add(1) <= f.n {
		return Result{Err: errors.New("HTTP 503"), Class: ErrHTTP503, Start: f.now()}
	}
	f.open.Add(1)
	defer f.open.Add(-1)
	<-ctx.Done()
	return Result{Err: ctx.Err(), Class: ErrCancelled}
}

// Stop cancels the requests in flight, which are then never answered. The
// window's figures read at an answer's end count only requests sent before
// the oldest still unanswered (Stats.Answered); had the cancelled ones been
// forgotten, a young window would count, of the requests sent just before
// the stop, only those that had already ended: the failures.
func TestStopLeavesAYoungWindowsAnswerFiguresWhereTheyWere(t *testing.T) {
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	tr := &failThenGate{n: 5, now: clk.Now}
	cfg := testConfig(20)
	cfg.Clock = clk
	g, _ := New(tr, cfg, nil)
	g.BeginWindow()
	g.Start()
	// A conversation whose turn failed is replaced after a pause on the
	// clock.
	for i := 0; tr.open.Load() < 20; i++ {
		if i == 100 {
			t.Fatalf("%d requests in flight after %d calls; want 20", tr.open.Load(), tr.calls.Load())
		}
		time.Sleep(5 * time.Millisecond)
		clk.Advance(time.Second)
	}
	clk.Advance(10 * time.Second)
	before := g.Snapshot().Window
	if before.Errors != 5 || before.Answers != 0 {
		t.Fatalf("before the stop: %d errors, %d answers; want the 5 failures ended and no answer figures yet", before.Errors, before.Answers)
	}
	g.Stop()
	clk.Advance(5 * time.Second)
	after := g.Snapshot().Window
	if after.Answers != 0 || after.ErrorRate != 0 {
		t.Fatalf("after the stop: error rate %.0f%% over %d answers; want the figures held where they were (0 answers), not the failures alone", 100*after.ErrorRate, after.Answers)
	}
	if after.Errors != 5 {
		t.Fatalf("after the stop: %d errors; want the 5 failures, and no cancelled request counted", after.Errors)
	}
}
