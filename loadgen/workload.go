package loadgen

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// A Workload is a named shape of load: the parameters it sets on a Config,
// and a paragraph saying what it models.
type Workload struct {
	// Name is what --workload takes.
	Name string
	// Doc is one paragraph: what the workload models, with its parameters.
	Doc string
	// Warmup is how long a run of it should load the deployment before
	// measuring: long enough for the conversations in flight to spread
	// over their turns and pauses, and for the caches to fill.
	Warmup time.Duration
	// Trace, for the trace workload, is the synthetic trace replayed when
	// no file is given (see TraceFor); nil for the others.
	Trace *TraceSpec

	set func(*Config)
}

// Apply sets the workload's parameters on cfg: turns, think time, max
// tokens, system prompt, tool results and open loop. Everything else, the
// concurrency included, is left as it was.
func (w Workload) Apply(cfg *Config) {
	cfg.Turns = UniformTurns(5, 5)
	cfg.ThinkTime, cfg.ThinkDist, cfg.ReadingWPM = 0, ThinkFixed, 0
	cfg.MaxTokens = 1024
	cfg.SystemPrompt = ""
	cfg.ToolTokens = TokenRange{}
	cfg.SessionLength = 0
	if w.set != nil {
		w.set(cfg)
	}
}

// OpenLoop says whether the workload's level is an arrival rate (by
// Little's law, sessions in flight) rather than a concurrency.
func (w Workload) OpenLoop() bool {
	var cfg Config
	w.Apply(&cfg)
	return cfg.SessionLength > 0 || w.Trace != nil
}

// TraceFor is the trace workload's synthetic trace at level sessions in
// flight (Little's law, at the spec's SessionLength), with enough sessions
// to keep arriving for length; the seed makes it reproducible. Other
// workloads return nil.
func (w Workload) TraceFor(level int, seed uint64, length time.Duration) ([]TraceRecord, error) {
	if w.Trace == nil {
		return nil, nil
	}
	s := *w.Trace
	s.Seed = seed
	s.Rate = OpenLoopRate(level, s.SessionLength())
	if s.Rate == 0 {
		return nil, fmt.Errorf("trace workload: level %d: need at least 1 session in flight", level)
	}
	s.Sessions = max(1, int(math.Ceil(s.Rate*length.Seconds())))
	return s.Generate()
}

// Reading speed of the reading workload: about an adult's silent reading
// speed for non-fiction.
const readingWPM = 250

// openLoopSession is the open-loop workload's mean session length W: 5
// turns of about 30 s each (an 832-token answer at 35 ms per token, the
// default profile's TPOT near 100 conversations on 3 workers) and 4 pauses
// of 10 s.
const openLoopSession = 5*30*time.Second + 4*10*time.Second

// SharedPromptTokens is the length of the shared-prefix workload's system
// prompt, in tokens, besides its first line.
const SharedPromptTokens = 3000

var (
	sharedOnce   sync.Once
	sharedPrompt string
)

// SharedSystemPrompt is the shared-prefix workload's system prompt: a line
// saying what it stands for, then SharedPromptTokens tokens of fixed words
// (one token each), the same in every conversation and every run.
func SharedSystemPrompt() string {
	sharedOnce.Do(func() {
		var b strings.Builder
		b.WriteString("You are the assistant of a large engineering team. The reference material below (style rules, tool schemas and worked examples) applies to every answer.\n")
		blockWords(&b, 0x73686172656470, SharedPromptTokens) // "sharedp"
		sharedPrompt = b.String()
	})
	return sharedPrompt
}

// Workloads is the suite, in the order reports list it.
var Workloads = []Workload{
	{
		Name:   "chat",
		Doc:    "The seeds' multi-turn chat, kvlens's default: each conversation opens with one of the starter texts (about 3,600–3,800 tokens) and a short system prompt, then asks 5 questions in all, as the original demo's code did (seed 003's text says 3–5; the seeds' baselines were measured with 5), each the moment the last answer ends (no think time); answers are capped at 1,024 tokens (the simulated H200 draws 640–1,024). A closed loop: the level is the number of conversations, and one that ends is replaced at once. Those started at once, at start and when the level rises, start part-way through with the turns left to a conversation caught at a random moment (1–5), so that they end at spread times; the original demo started each at its first question, and since all last 5 turns they stayed in step and reached the workers in waves (calibrate keeps that, as the seeds were measured with it).",
		Warmup: 60 * time.Second,
	},
	{
		Name:   "think",
		Doc:    "The chat with a user who pauses before each follow-up: think time drawn from an exponential distribution of mean 10 s, between an answer's last token and the next question. Conversations spend a fifth of their life idle, so the worker that answered is no longer necessarily the least loaded when the next turn comes.",
		Warmup: 150 * time.Second,
		set: func(c *Config) {
			c.ThinkTime, c.ThinkDist = 10*time.Second, ThinkExponential
		},
	},
	{
		Name:   "reading",
		Doc:    "The chat with a user who reads each answer before asking the next question: the pause is the answer's output tokens × 0.75 words per token read at 250 words per minute (an 832-token answer, the default profile's mean, takes 150 s). Conversations are idle most of their life, so their KV blocks age in the caches and eviction decides what a follow-up finds.",
		Warmup: 600 * time.Second,
		set: func(c *Config) {
			c.ThinkDist, c.ReadingWPM = ThinkReading, readingWPM
		},
	},
	{
		Name:   "long",
		Doc:    "Long chats: 5–15 turns (uniform), no think time, answers capped at 1,024 tokens. A conversation's prompt grows to 7,000–16,000 tokens, so each follow-up has far more to lose on the wrong worker; a conversation whose next prompt plus max_tokens would pass the model's context (16,384 tokens on the default profile) ends early, and the count is reported.",
		Warmup: 120 * time.Second,
		set: func(c *Config) {
			c.Turns = UniformTurns(5, 15)
		},
	},
	{
		Name:   "shared-prefix",
		Doc:    "The chat behind one long system prompt shared by every conversation: a first line and 3,000 tokens of fixed text standing in for style rules, tool schemas and examples, the same in every conversation and run. Every worker soon caches it, so a new conversation finds about 3,000 tokens cached anywhere and routing by prefix alone cannot tell workers apart.",
		Warmup: 60 * time.Second,
		set: func(c *Config) {
			c.SystemPrompt = SharedSystemPrompt()
		},
	},
	{
		Name:   "open-loop",
		Doc:    "Sessions that arrive on their own schedule: a Poisson process of chats (5 turns, exponential think time of mean 10 s), each session's turns following its answers, whatever the others do. The level is a rate: level L means L / W sessions per second, where W = 190 s is the estimated mean session length (5 turns of about 30 s, an 832-token answer at 35 ms per token, plus 4 pauses of 10 s), so that by Little's law L sessions are in flight when the estimate holds; under heavy load sessions last longer and more are in flight, as in production. At start, and when the level rises, L sessions (or the increase) start at once part-way through, with the turns left to a session caught at a random moment, so the number in flight starts near L instead of ramping up over W.",
		Warmup: 150 * time.Second,
		set: func(c *Config) {
			c.ThinkTime, c.ThinkDist = 10*time.Second, ThinkExponential
			c.SessionLength = openLoopSession
		},
	},
	{
		Name:   "agentic",
		Doc:    "An agent loop: the starter text as the task, then 10–30 turns (uniform) in which the model answers briefly (max_tokens 64, a tool call) and the next prompt appends a tool result of 100–500 tokens (uniform, fresh text), after a tool call (a search, a file read, a test run) that takes an exponential 3 s on average. The context grows by about 380 tokens a turn to 7,000–15,000, and each turn is mostly prefill of a long cached prefix; a session whose next prompt would not fit the model's context ends early, and the count is reported.",
		Warmup: 60 * time.Second,
		set: func(c *Config) {
			c.Turns = UniformTurns(10, 30)
			c.MaxTokens = 64
			c.ToolTokens = TokenRange{Min: 100, Max: 500}
			c.ThinkTime, c.ThinkDist = 3*time.Second, ThinkExponential
		},
	},
	{
		Name:   "trace",
		Doc:    "Replay of a Mooncake-format trace (--trace FILE) on its own schedule: each record's prompt is synthesized from its hash_ids, so equal ids are equal token blocks, and sent at its timestamp whatever the answers before it (an open loop). Without a file, the trace replayed is a synthetic one from kvlens trace gen's defaults, made for the level (serve's --concurrency, a sweep's one level, each level of kvlens bench routing): sessions of 3–5 turns sharing a 2,048-token system prompt, each with its own 1,024-token document, then 512 new tokens and a 256-token answer per turn, turns 10 s plus a mean of 10 s apart; level L is L / W sessions per second with W = 70 s, the mean session length (3 gaps of 10 s plus a mean of 10 s, then 10 s for the last answer), so that by Little's law L sessions are in flight.",
		Warmup: 120 * time.Second,
		Trace:  ptr(DefaultTraceSpec()),
	},
}

func ptr[T any](v T) *T { return &v }

// LookupWorkload returns the suite's workload called name.
func LookupWorkload(name string) (Workload, error) {
	for _, w := range Workloads {
		if w.Name == name {
			return w, nil
		}
	}
	return Workload{}, fmt.Errorf("unknown workload %q: want one of %s", name, strings.Join(WorkloadNames(), ", "))
}

// WorkloadNames lists the suite's names, in order.
func WorkloadNames() []string {
	names := make([]string, len(Workloads))
	for i, w := range Workloads {
		names[i] = w.Name
	}
	return names
}
