//go:build !race

// These run the suite's workloads over minutes of virtual time: about 45 s
// in all, ten times that under the race detector. make unit runs them
// without it.

package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/tokenizer"
)

const assistantOpen = "<|assistant|>\n"

// sent is one request an echoTransport took.
type sent struct {
	at    time.Time
	req   TurnRequest
	isl   int
	pause time.Duration // since the answer it follows; -1 for an opening turn
}

// echoTransport answers every turn on a virtual clock after a fixed delay
// with osl tokens of fresh words (at most max_tokens), reports the prompt's
// real token count as usage, and records each request with the pause since
// the answer it follows, found by that answer's text.
type echoTransport struct {
	loop    *des.Loop
	delay   time.Duration
	osl     int
	n       uint64
	ended   map[string]time.Time // answer text → when it ended
	islOf   map[string]int       // answer text → its prompt's tokens
	opening map[string]int       // an opening prompt's tokens, by its text
	sent    []sent
	maxISL  int
}

func newEcho(loop *des.Loop, delay time.Duration, osl int) *echoTransport {
	return &echoTransport{loop: loop, delay: delay, osl: osl, ended: map[string]time.Time{}, islOf: map[string]int{}, opening: map[string]int{}}
}

func (e *echoTransport) Start(req TurnRequest, _ func(string, time.Duration), done func(Result)) func(error) {
	now := e.loop.Now()
	// The prompt's tokens: counted whole for an opening turn, and for a
	// follow-up as the last prompt's plus what the turn added after it (a
	// token or two off where BPE would merge across the seam).
	s := sent{at: now, req: req, pause: -1}
	if n := len(req.Messages); n > 2 {
		answer := req.Messages[n-2].Content
		s.pause = now.Sub(e.ended[answer])
		s.isl = e.islOf[answer] + tokenizer.Count(tokenizer.RenderChat(req.Messages[n-2:])) - tokenizer.Count(assistantOpen)
	} else {
		key := req.Messages[0].Content + "\x00" + req.Messages[1].Content
		if _, ok := e.opening[key]; !ok {
			e.opening[key] = tokenizer.Count(tokenizer.RenderChat(req.Messages))
		}
		s.isl = e.opening[key]
	}
	e.maxISL = max(e.maxISL, s.isl+req.MaxTokens)
	e.sent = append(e.sent, s)
	e.n++
	osl := min(e.osl, req.MaxTokens)
	var b strings.Builder
	blockWords(&b, e.n, osl)
	text := b.String()
	e.islOf[text] = s.isl
	finished := false
	e.loop.AfterFunc(e.delay, func() {
		if finished {
			return
		}
		finished = true
		e.ended[text] = e.loop.Now()
		done(Result{Text: text, Start: now, TTFT: e.delay / 10, E2E: e.delay, OSL: osl, FirstChunkTokens: 1, ISL: s.isl, Worker: "w"})
	})
	return func(err error) {
		if !finished {
			finished = true
			done(Result{Err: err, Class: ErrCancelled})
		}
	}
}

// runWorkload runs a workload at level for d of virtual time, answering
// every turn after delay with osl tokens, and returns the generator (still
// running) and what it sent.
func runWorkload(t *testing.T, name string, level int, seed uint64, delay time.Duration, osl int, d time.Duration, edits ...func(*Config)) (*Generator, *echoTransport, *des.Loop) {
	t.Helper()
	w, err := LookupWorkload(name)
	if err != nil {
		t.Fatal(err)
	}
	loop := des.New(time.Time{})
	cfg := DefaultConfig()
	w.Apply(&cfg)
	cfg.Concurrency, cfg.Seed, cfg.Clock = level, seed, loop
	cfg.Starters = BuiltinStarters()
	cfg.MaxContext = 16384
	cfg.RequestTimeout = 0
	for _, edit := range edits {
		edit(&cfg)
	}
	tr := newEcho(loop, delay, osl)
	g, err := NewAsync(tr, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	loop.Run(d)
	return g, tr, loop
}

func TestWorkloadsHaveTheTurnsTheyClaim(t *testing.T) {
	tests := []struct {
		name, workload string
		min, max       int
	}{
		{"the chat has 5 turns, as the original demo ran the seeds", "chat", 5, 5},
		{"think has the chat's 5 turns", "think", 5, 5},
		{"long chats have 5 to 15 turns", "long", 5, 15},
		{"the shared prefix has the chat's 5 turns", "shared-prefix", 5, 5},
		{"open-loop sessions have the chat's 5 turns", "open-loop", 5, 5},
		{"the agent loop has 10 to 30 short turns", "agentic", 10, 30},
	}
	const level = 20
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _, _ := runWorkload(t, tt.workload, level, 1, 5*time.Second, 700, 10*time.Minute)
			defer g.Stop()
			done, seen := 0, map[int]bool{}
			for _, c := range g.Conversations() {
				lo := tt.min
				if c.ID <= level {
					lo = 1 // the run's first conversations start part-way
				}
				if c.Planned < lo || c.Planned > tt.max {
					t.Fatalf("conversation %d planned %d turns, want %d..%d", c.ID, c.Planned, lo, tt.max)
				}
				seen[c.Planned] = true
				if c.Done && c.Errors == 0 && c.Turns != c.Planned && g.Snapshot().ContextFull == 0 {
					t.Fatalf("conversation %d ended after %d of its %d turns with no error and none cut at the context", c.ID, c.Turns, c.Planned)
				}
				if c.Done {
					done++
				}
			}
			if done < 20 || len(seen) < min(3, tt.max-tt.min+1) {
				t.Fatalf("%d conversations done, turn counts %v: too few to tell", done, seen)
			}
		})
	}
}

func TestThinkTimeFollowsItsModel(t *testing.T) {
	tests := []struct {
		name, workload string
		osl            int
		run            time.Duration
		want           time.Duration
		exactly        bool
	}{
		{"the chat asks the next question the moment the answer ends", "chat", 700, 10 * time.Minute, 0, true},
		// the mean of a few thousand pauses is within 5%
		{"think pauses an exponential 10 s on average", "think", 700, time.Hour, 10 * time.Second, false},
		// 500 tokens × 0.75 words per token / 250 words per minute = 90 s
		{"reading pauses 90 s to read 500 tokens, every time", "reading", 500, time.Hour, 90 * time.Second, true},
		{"the agent loop waits an exponential 3 s for each tool", "agentic", 700, 20 * time.Minute, 3 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, tr, _ := runWorkload(t, tt.workload, 40, 2, 5*time.Second, tt.osl, tt.run)
			defer g.Stop()
			var sum time.Duration
			var pauses []time.Duration
			for _, s := range tr.sent {
				if s.pause < 0 {
					continue
				}
				pauses = append(pauses, s.pause)
				sum += s.pause
				if tt.exactly && (s.pause-tt.want).Abs() > time.Millisecond {
					t.Fatalf("a pause of %v, want %v", s.pause, tt.want)
				}
			}
			if len(pauses) < 1000 {
				t.Fatalf("only %d follow-ups", len(pauses))
			}
			mean := sum / time.Duration(len(pauses))
			if tt.exactly {
				return
			}
			if math.Abs(float64(mean-tt.want)) > 0.05*float64(tt.want) {
				t.Fatalf("mean pause %v over %d follow-ups, want %v ± 5%%", mean, len(pauses), tt.want)
			}
			// An exponential's median is ln 2 ≈ 0.69 of its mean.
			slices.Sort(pauses)
			if med := pauses[len(pauses)/2]; math.Abs(float64(med)/float64(tt.want)-math.Ln2) > 0.06 {
				t.Fatalf("median pause %v is not that of an exponential of mean %v", med, tt.want)
			}
		})
	}
}

func TestReadingTime(t *testing.T) {
	tests := []struct {
		tokens int
		wpm    float64
		want   time.Duration
	}{
		{832, 250, 149760 * time.Millisecond}, // the default profile's mean answer: 624 words
		{0, 250, 0},                           // nothing to read
		{100, 0, 0},                           // no reading speed: no pause
	}
	for _, tt := range tests {
		if got := ReadingTime(tt.tokens, tt.wpm); got != tt.want {
			t.Errorf("ReadingTime(%d, %v) = %v, want %v", tt.tokens, tt.wpm, got, tt.want)
		}
	}
}

func TestSharedPrefixOpensEveryConversation(t *testing.T) {
	g, tr, _ := runWorkload(t, "shared-prefix", 30, 3, 5*time.Second, 700, 10*time.Minute)
	defer g.Stop()
	shared := SharedSystemPrompt()
	if n := tokenizer.Count(shared); n < SharedPromptTokens || n > SharedPromptTokens+40 {
		t.Fatalf("the shared system prompt is %d tokens, want %d and its first line", n, SharedPromptTokens)
	}
	firsts := 0
	for _, s := range tr.sent {
		if s.req.Messages[0].Content != shared {
			t.Fatalf("a prompt opens with %.60q, not the shared system prompt", s.req.Messages[0].Content)
		}
		if s.pause < 0 {
			firsts++
		}
	}
	if firsts < 50 {
		t.Fatalf("only %d conversations opened", firsts)
	}
	// The chat keeps its short prompt.
	g2, tr2, _ := runWorkload(t, "chat", 5, 3, 5*time.Second, 700, time.Minute)
	defer g2.Stop()
	if c := tr2.sent[0].req.Messages[0].Content; c != systemPrompt {
		t.Fatalf("the chat opens with %.60q", c)
	}
}

func TestOpenLoopArrivesAtItsRateAndHoldsItsLevel(t *testing.T) {
	const level = 100
	// Each turn takes 30 s, so a session lasts 5 × 30 s + 4 × 10 s = 190 s
	// on average: the estimate W, and Little's law gives level in flight.
	g, tr, loop := runWorkload(t, "open-loop", level, 4, 30*time.Second, 700, 0)
	defer g.Stop()
	var live []int
	for range 100 {
		loop.Run(30 * time.Second)
		live = append(live, g.Snapshot().Live)
	}
	from, to := des.Epoch.Add(60*time.Second), loop.Now()
	arrivals := 0
	for _, s := range tr.sent {
		if s.pause < 0 && !s.at.Before(from) {
			arrivals++
		}
	}
	want := float64(level) / sessionSeconds * to.Sub(from).Seconds()
	if math.Abs(float64(arrivals)-want) > 0.07*want {
		t.Fatalf("%d sessions arrived in %v, want %.0f ± 7%% (%v per second)", arrivals, to.Sub(from), want, g.Snapshot().ArrivalRate)
	}
	mean := 0.0
	for _, n := range live {
		mean += float64(n) / float64(len(live))
	}
	if math.Abs(mean-level) > 0.1*level || live[0] < level*8/10 {
		t.Fatalf("sessions in flight: mean %.1f, first %d; want about %d from the start", mean, live[0], level)
	}
	if r := g.Snapshot().ArrivalRate; math.Abs(r-level/sessionSeconds) > 1e-9 {
		t.Fatalf("snapshot arrival rate %v, want %v", r, level/sessionSeconds)
	}
}

// sessionSeconds is an open-loop session's mean length, worked out here
// rather than read from the package: 5 turns of answers lasting about 30 s
// and 4 pauses of 10 s between them.
const sessionSeconds = 5*30.0 + 4*10.0

func TestOpenLoopRateFollowsTheLevel(t *testing.T) {
	g, tr, loop := runWorkload(t, "open-loop", 150, 5, 30*time.Second, 700, 10*time.Minute)
	defer g.Stop()
	if err := g.SetConcurrency(30); err != nil {
		t.Fatal(err)
	}
	from := loop.Now()
	loop.Run(time.Hour)
	arrivals := 0
	for _, s := range tr.sent {
		if s.pause < 0 && s.at.After(from) {
			arrivals++
		}
	}
	want := 30 / sessionSeconds * 3600
	if math.Abs(float64(arrivals)-want) > 0.1*want {
		t.Fatalf("%d arrivals in the hour after lowering the level to 30, want %.0f ± 10%%", arrivals, want)
	}
}

func TestAgenticContextGrowsByToolResults(t *testing.T) {
	g, tr, _ := runWorkload(t, "agentic", 10, 6, 3*time.Second, 700, 20*time.Minute)
	defer g.Stop()
	// A conversation's prompt is the last one, its 64-token answer and a
	// tool result of 100–500 tokens, with a few tokens of chat template.
	growth := 0
	for _, s := range tr.sent {
		if s.req.MaxTokens != 64 {
			t.Fatalf("max_tokens %d, want 64", s.req.MaxTokens)
		}
		n := len(s.req.Messages)
		if n <= 2 {
			continue
		}
		if q := s.req.Messages[n-1].Content; !strings.HasPrefix(q, toolPreamble) {
			t.Fatalf("a follow-up is %.40q, not a tool result", q)
		}
		if d := s.isl - tr.islOf[s.req.Messages[n-2].Content]; d < 100+64 || d > 500+64+16 {
			t.Fatalf("a turn added %d tokens to the prompt, want 64 + 100..500 and the template's few", d)
		}
		growth++
	}
	if growth < 300 {
		t.Fatalf("only %d follow-ups", growth)
	}
}

func TestMaxContextEndsAConversationBeforeItOverflows(t *testing.T) {
	// Long chats of 700-token answers outgrow 9,000 tokens by their 6th turn.
	g, tr, _ := runWorkload(t, "long", 10, 8, 5*time.Second, 700, 10*time.Minute, func(c *Config) { c.MaxContext = 9000 })
	defer g.Stop()
	if tr.maxISL > 9000 {
		t.Fatalf("a prompt plus max_tokens reached %d tokens, past the 9,000 allowed", tr.maxISL)
	}
	if n := g.Snapshot().ContextFull; n < 10 {
		t.Fatalf("%d conversations ended at the context, want most", n)
	}
	if e := g.Snapshot().Window.Errors; e != 0 {
		t.Fatalf("%d errors", e)
	}
}

func TestWorkloadsAreDeterministicUnderASeed(t *testing.T) {
	digest := func(name string, seed uint64) uint64 {
		g, tr, _ := runWorkload(t, name, 10, seed, 4*time.Second, 300, 2*time.Minute)
		defer g.Stop()
		h := fnv.New64a()
		for _, s := range tr.sent {
			fmt.Fprintf(h, "%d|", s.at.UnixNano())
			for _, m := range s.req.Messages {
				fmt.Fprintf(h, "%s:%s|", m.Role, m.Content)
			}
		}
		return h.Sum64()
	}
	for _, w := range Workloads {
		if w.Trace != nil {
			continue // a trace is a file, or TraceFor's, tested below
		}
		t.Run(w.Name, func(t *testing.T) {
			if a, b := digest(w.Name, 9), digest(w.Name, 9); a != b {
				t.Fatal("two runs with seed 9 sent different requests")
			}
			if digest(w.Name, 9) == digest(w.Name, 10) {
				t.Fatal("seeds 9 and 10 sent the same requests")
			}
		})
	}
}

func TestLookupWorkload(t *testing.T) {
	if _, err := LookupWorkload("chat"); err != nil {
		t.Fatal(err)
	}
	_, err := LookupWorkload("chats")
	if err == nil || !strings.Contains(err.Error(), "chat, think, reading") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("unknown workload: %v, want one line listing the suite", err)
	}
	for _, w := range Workloads {
		if w.Doc == "" || strings.Contains(w.Doc, "\n") || w.Warmup <= 0 {
			t.Errorf("workload %s: need a one-paragraph doc and a warmup", w.Name)
		}
	}
}

func TestTraceSpecStructure(t *testing.T) {
	s := DefaultTraceSpec()
	s.Sessions, s.Rate, s.Seed = 2000, 2, 7
	recs, err := s.Generate()
	if err != nil {
		t.Fatal(err)
	}
	// Sessions arrive at the rate: their first turns are the records
	// holding one turn's blocks.
	firstBlocks := s.SharedBlocks + s.SessionBlocks + s.TurnBlocks
	var firsts []int64
	byPrefix := map[int64][]TraceRecord{} // a session's first own block → its records
	for i, r := range recs {
		if r.Line != i+1 || r.BlockTokens != s.BlockSize || r.InputLength != len(r.HashIDs)*s.BlockSize || r.OutputLength != s.OutputTokens {
			t.Fatalf("record %d: %+v", i, r)
		}
		for j := range s.SharedBlocks {
			if r.HashIDs[j] != int64(j) {
				t.Fatalf("record %d does not open with the shared prefix: %v", r.Line, r.HashIDs)
			}
		}
		if len(r.HashIDs) == firstBlocks {
			firsts = append(firsts, r.Timestamp)
		}
		own := r.HashIDs[s.SharedBlocks]
		byPrefix[own] = append(byPrefix[own], r)
	}
	if len(byPrefix) != s.Sessions || len(firsts) != s.Sessions {
		t.Fatalf("%d sessions and %d first turns, want %d", len(byPrefix), len(firsts), s.Sessions)
	}
	span := float64(firsts[len(firsts)-1]-firsts[0]) / 1000
	if rate := float64(len(firsts)-1) / span; math.Abs(rate-s.Rate) > 0.06*s.Rate {
		t.Fatalf("sessions arrive at %.3f per second, want %v", rate, s.Rate)
	}
	for _, sess := range byPrefix {
		if len(sess) < 3 || len(sess) > 5 {
			t.Fatalf("a session of %d turns, want 3..5", len(sess))
		}
		for k := 1; k < len(sess); k++ {
			prev, cur := sess[k-1], sess[k]
			if !slices.Equal(cur.HashIDs[:len(prev.HashIDs)], prev.HashIDs) || len(cur.HashIDs) != len(prev.HashIDs)+s.TurnBlocks {
				t.Fatalf("turn %d does not extend the one before by %d blocks", k, s.TurnBlocks)
			}
			if gap := time.Duration(cur.Timestamp-prev.Timestamp) * time.Millisecond; gap < s.Gap-time.Millisecond {
				t.Fatalf("turns %v apart, under the %v gap", gap, s.Gap)
			}
		}
	}
	// What WriteTrace writes, ParseTrace reads back.
	var buf bytes.Buffer
	if err := WriteTrace(&buf, recs); err != nil {
		t.Fatal(err)
	}
	back, err := ParseTrace(&buf, "gen.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i := range back {
		back[i].BlockTokens = s.BlockSize
	}
	if !slices.EqualFunc(back, recs, func(a, b TraceRecord) bool {
		return a.Timestamp == b.Timestamp && a.InputLength == b.InputLength && a.OutputLength == b.OutputLength && slices.Equal(a.HashIDs, b.HashIDs)
	}) {
		t.Fatal("the trace read back differs from the one written")
	}
}

func TestTraceSpecRefusesBadValues(t *testing.T) {
	tests := []struct {
		name string
		edit func(*TraceSpec)
		want string
	}{
		{"no sessions", func(s *TraceSpec) { s.Sessions = 0 }, "sessions 0"},
		{"a zero rate", func(s *TraceSpec) { s.Rate = 0 }, "rate 0"},
		{"an infinite rate", func(s *TraceSpec) { s.Rate = math.Inf(1) }, "rate +Inf"},
		{"a rate so low that timestamps overflowed to -2^63", func(s *TraceSpec) { s.Rate = 1e-300 }, "more than a trace may hold"},
		{"a rate past a million a second, which said +Inf in flight", func(s *TraceSpec) { s.Rate = 1e308 }, "rate 1e+308: need a positive number"},
		{"turns that add nothing", func(s *TraceSpec) { s.TurnBlocks = 0 }, "turn blocks 0"},
		{"a negative shared prefix", func(s *TraceSpec) { s.SharedBlocks = -1 }, "shared prefix -1"},
		{"a zero block size", func(s *TraceSpec) { s.BlockSize = 0 }, "block size 0"},
		{"a negative gap", func(s *TraceSpec) { s.Gap = -time.Second }, "gap -1s"},
		{"prompts past what a trace holds", func(s *TraceSpec) { s.SessionBlocks = 5000 }, "more than a trace may hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultTraceSpec()
			tt.edit(&s)
			_, err := s.Generate()
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tt.want)
			}
		})
	}
}

func TestTraceForHoldsTheLevelByLittlesLaw(t *testing.T) {
	w, _ := LookupWorkload("trace")
	recs, err := w.TraceFor(70, 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// W = 3 × (10 s + 10 s) + 10 s = 70 s, so level 70 is one session a
	// second: about 3,600 sessions of 4 turns in the hour.
	if got := w.Trace.SessionLength(); got != 70*time.Second {
		t.Fatalf("session length %v, want 70s", got)
	}
	if n := len(recs); n < 4*3600*9/10 || n > 4*3600*11/10 {
		t.Fatalf("%d records for an hour at one session a second", n)
	}
	again, _ := w.TraceFor(70, 3, time.Hour)
	a, _ := json.Marshal(recs)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed gave two traces")
	}
}

func TestSampleRemainingIsLengthBiased(t *testing.T) {
	d := UniformTurns(3, 5)
	rng := rand.New(rand.NewPCG(1, 2))
	var sum float64
	const n = 100000
	for range n {
		k := d.sampleRemaining(rng)
		if k < 1 || k > 5 {
			t.Fatalf("%d turns left", k)
		}
		sum += float64(k)
	}
	// P(n) ∝ n over 3, 4, 5; then uniform 1..n: E = Σ n/12 × (n+1)/2 = 62/24.
	if mean := sum / n; math.Abs(mean-(3*4+4*5+5*6)/24.0) > 0.02 {
		t.Fatalf("mean turns left %.3f, want 2.583", mean)
	}
}

// TestAClosedLoopStartsItsConversationsPartWay checks that the conversations
// a closed loop starts at once, at Start and when the level rises, are drawn
// part-way through, so that they end at spread times, unless InStep asks
// for the original demo's way; and that a conversation replacing one that
// ended starts with its full turns.
func TestAClosedLoopStartsItsConversationsPartWay(t *testing.T) {
	tests := []struct {
		name   string
		inStep bool
		when   string
		n      int
		lo, hi int // the fewest and most turns drawn
	}{
		{"at Start, part-way", false, "at Start", 30, 1, 5},
		{"when the level rose, part-way", false, "when the level rose", 30, 1, 5},
		{"replacing one that ended, in full", false, "replacing one that ended", 0, 5, 5},
		{"in step at Start, in full", true, "at Start", 30, 5, 5},
		{"in step when the level rose, in full", true, "when the level rose", 30, 5, 5},
	}
	started := map[bool]map[string]map[int]int{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if started[tt.inStep] == nil {
				started[tt.inStep] = startedPartWay(t, tt.inStep)
			}
			got := started[tt.inStep][tt.when]
			n, lo, hi := 0, 99, 0
			for k, c := range got {
				n += c
				lo, hi = min(lo, k), max(hi, k)
			}
			if tt.n > 0 && n != tt.n {
				t.Fatalf("%d conversations started, want %d", n, tt.n)
			}
			if n == 0 || lo != tt.lo || hi != tt.hi {
				t.Fatalf("turn counts drawn %v, want from %d to %d", got, tt.lo, tt.hi)
			}
		})
	}
}

// startedPartWay runs the chat at 30 conversations, raises it to 60 and
// counts the turns drawn by when each conversation started.
func startedPartWay(t *testing.T, inStep bool) map[string]map[int]int {
	// Every turn takes 5 s; the level rises at 62.5 s, between turns. Starts
	// are unpaced, so those started at once share a start time.
	edit := func(c *Config) { c.StartRate, c.InStep = 0, inStep }
	g, _, loop := runWorkload(t, "chat", 30, 3, 5*time.Second, 700, 62500*time.Millisecond, edit)
	defer g.Stop()
	raised := loop.Now()
	seen := map[uint64]ConversationSummary{} // the log keeps the last LogSize
	for _, c := range g.Conversations() {
		seen[c.ID] = c
	}
	if err := g.SetConcurrency(60); err != nil {
		t.Fatal(err)
	}
	loop.Run(30 * time.Second)
	for _, c := range g.Conversations() {
		seen[c.ID] = c
	}
	byStart := map[string]map[int]int{} // when started -> planned turns -> count
	for _, c := range seen {
		when := "replacing one that ended"
		switch {
		case c.Started.Equal(des.Epoch):
			when = "at Start"
		case c.Started.Equal(raised):
			when = "when the level rose"
		}
		if byStart[when] == nil {
			byStart[when] = map[int]int{}
		}
		byStart[when][c.Planned]++
	}
	return byStart
}
