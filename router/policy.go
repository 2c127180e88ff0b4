package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/kvlens/kvlens/tokenizer"
)

// ErrNoWorker means no worker can take the request.
var ErrNoWorker = errors.New("no healthy worker available")

// ErrBusy means the admission policy shed the request because every worker
// is busy. Its text is what Dynamo answers in the same case.
var ErrBusy = errors.New("all workers are busy, please retry later")

// Request is what a policy may look at to pick a worker.
type Request struct {
	// Path is the OpenAI endpoint, such as /v1/chat/completions.
	Path string
	// Body is the raw JSON request body.
	Body []byte
	// Messages is a chat's messages, for callers that hold them parsed and
	// send no body (the virtual-time pipeline); the proxy leaves it nil.
	Messages []tokenizer.Message
	// TokenIDs is the rendered prompt, tokenized as the workers do; the
	// router hashes it when Chain is nil.
	TokenIDs []uint32
	// Tokens is the prompt length in tokens (ISL).
	Tokens int
	// Chain is the prompt's block-hash chain, one hash per full block.
	Chain []uint64
	// BlockSize is tokens per block.
	BlockSize int
	// Adapter is the LoRA adapter the request is for; empty for the base
	// model. The router fills it from the body's "model" when that names an
	// adapter workers have stored blocks of.
	Adapter string
	// Sequences is how many sequences the engine runs for the request, its
	// body's "n" (a choice each); 0 means 1. Each holds a batch slot.
	Sequences int
}

// Candidate is one healthy worker as a policy sees it at decision time.
type Candidate struct {
	// Worker is the worker itself.
	Worker *Worker
	// Position is the worker's place in the fleet's list, unhealthy
	// workers included.
	Position int
	// Overlap is how many leading blocks of the request's chain the index
	// says the worker holds.
	Overlap int
	// IndexBlocks is how many blocks the index holds for the worker.
	IndexBlocks int
	// InFlight counts the sequences of requests booked on the worker and
	// not finished: one a request, or its "n" (Request.Sequences).
	InFlight int
	// PrefillTokens sums the uncached prompt tokens of booked requests that
	// have no first token yet.
	PrefillTokens int
	// ContextTokens sums the prompt tokens of every booked request.
	ContextTokens int
	// ActiveBlocks counts the distinct prompt blocks of booked requests.
	ActiveBlocks int
	// ActiveDepth is how many leading blocks of the request's chain booked
	// requests on the worker already hold.
	ActiveDepth int
	// Capacity is the worker's batch capacity (max_batch_size).
	Capacity int
	// RecentlyFreed counts the batch slots the worker freed within the last
	// FreedWindow (at most 8): one for each request that ended, n for a
	// request for n choices. It is 0 under
	// shed admission, which refuses a request rather than queue it.
	RecentlyFreed int
}

// FreedWindow is how far back Candidate.RecentlyFreed looks. A full worker
// that freed as many slots within it as requests would wait there is
// likely to free the next soon; one that freed none, as in a burst of new
// conversations, may not for as long as its requests last.
const FreedWindow = 2 * time.Second

// A Policy picks the worker for each request. The Router calls Pick under
// its decision lock, one decision at a time, and books the request on the
// chosen worker before the next decision.
type Policy interface {
	// Name is the policy's identifier, as used in flags and the admin API.
	Name() string
	// Pick returns the index in cands of the chosen worker; cands is never
	// empty.
	Pick(r *Request, cands []Candidate) int
}

// Knobs are the tunable settings of the cost-based policies.
type Knobs struct {
	// Weight is W, the weight of prefill blocks against decode blocks
	// (Dynamo's overlap_score_weight).
	Weight float64 `json:"weight"`
	// Temperature softens the choice; 0 takes the lowest cost.
	Temperature float64 `json:"temperature"`
	// Seed seeds the random choices; 0 picks a random seed.
	Seed uint64 `json:"-"`
}

// DefaultKnobs are Dynamo's defaults: W = 1, temperature 0.
func DefaultKnobs() Knobs { return Knobs{Weight: 1, Temperature: 0} }

// Policies lists the policy names in the order people meet them.
var Policies = []string{"round_robin", "random", "least_loaded", "dynamo", "dynamo_latest", "dynamo_tuned", "sglang", "sglang_events", "llmd", "kv", "kv_approx"}

// Describe gives a policy's name in plain words, for people.
func Describe(name string) string {
	switch name {
	case "round_robin":
		return "Round-robin"
	case "random":
		return "Random"
	case "least_loaded":
		return "Least-loaded"
	case "dynamo":
		return "KV-aware (Dynamo 0.9 cost)"
	case "dynamo_latest":
		return "KV-aware (Dynamo latest defaults)"
	case "dynamo_tuned":
		return "KV-aware (Dynamo latest, tuned)"
	case "sglang":
		return "Cache-aware (SGLang / vLLM router)"
	case "sglang_events":
		return "Cache-aware with KV events (SGLang gateway)"
	case "llmd":
		return "Scorers (llm-d default profile)"
	case "kv":
		return "KV-aware"
	case "kv_approx":
		return "KV-aware (approximate)"
	}
	return name
}

// Rule says in one sentence how a policy picks a worker, for the
// dashboard's "How it works"; each policy's doc comment has it in full.
func Rule(name string) string {
	switch name {
	case "round_robin":
		return "Each request goes to the next healthy worker in turn."
	case "random":
		return "Each request goes to a healthy worker chosen uniformly at random."
	case "least_loaded":
		return "Each request goes to the worker with the fewest requests in flight."
	case "dynamo":
		return "The lowest Dynamo cost (W = 1), ties to the worker whose overlapping index is smallest, then at random: NVIDIA Dynamo 0.9's KV router with its defaults."
	case "dynamo_latest":
		return "Dynamo's newest cost, with its defaults: cached blocks earn an overlap credit, and requests in flight add decode load."
	case "dynamo_tuned":
		return "Dynamo's newest cost with the knobs that change decisions turned (decode weight per active request 64, credit decay 1)."
	case "sglang":
		return "The worker whose tree of prompts it was sent matches most, if more than 30% matches and the load is balanced; else the least loaded (the cache_aware policy of SGLang's gateway and the vLLM router). It reads no KV events."
	case "sglang_events":
		return "The worker whose cache holds the most of the prompt by the KV events, ties to the less loaded; the least loaded when no worker holds any of it or the load is imbalanced (SGLang's gateway with KV events)."
	case "llmd":
		return "The highest weighted score of prefix match 3, queue depth 2 and KV-cache use 2 (llm-d's default scheduling profile). Its prefix match remembers what it sent where, not what workers stored."
	case "kv":
		return "The lowest kvlens cost: the prompt tokens the worker would have to prefill for the request, plus a quarter of the prefill already queued there, plus 32 tokens for each request already in flight there; near-ties (half a block or 2%) go to the worker with fewer requests in flight, never to chance. A first turn, cached nowhere beyond a prefix other conversations share, skips a worker more than a quarter (or 4 requests) over the mean in flight while another is under."
	case "kv_approx":
		return "KV-aware, predicting each worker's cache from its own decisions, for workers that publish no KV events."
	}
	return ""
}

// NewPolicy returns the policy called name with DefaultKnobs.
func NewPolicy(name string) (Policy, error) { return NewPolicyWith(name, DefaultKnobs()) }

// NewPolicyWith returns the policy called name with knobs k.
func NewPolicyWith(name string, k Knobs) (Policy, error) {
	if k.Weight < 0 || k.Temperature < 0 {
		return nil, fmt.Errorf("policy %s: weight %g and temperature %g must not be negative", name, k.Weight, k.Temperature)
	}
	rng := newRand(k.Seed)
	switch name {
	case "round_robin":
		return &RoundRobin{}, nil
	case "random":
		return &Random{rng: rng}, nil
	case "least_loaded":
		return &LeastLoaded{}, nil
	case "dynamo":
		return &Dynamo{Weight: k.Weight, Temperature: k.Temperature, rng: rng}, nil
	case "dynamo_latest":
		return &DynamoLatest{Credit: k.Weight, PrefillScale: 1, Temperature: k.Temperature, rng: rng}, nil
	case "dynamo_tuned":
		p := DynamoTuned(rng)
		p.Credit, p.Temperature = k.Weight, k.Temperature
		return p, nil
	case "sglang":
		return NewSGLang(DefaultBlockSize), nil
	case "sglang_events":
		return SGLangEvents{BalanceAbs: sglangBalanceAbs, BalanceRel: sglangBalanceRel}, nil
	case "llmd":
		return &LLMD{PrefixWeight: llmdPrefixWeight, QueueWeight: llmdQueueWeight, KVWeight: llmdKVWeight, rng: rng}, nil
	case "kv":
		return &KV{Weight: k.Weight}, nil
	case "kv_approx":
		return &KV{Weight: k.Weight, Approximate: true}, nil
	}
	return nil, fmt.Errorf("unknown routing policy %q (available: %s)", name, strings.Join(Policies, ", "))
}

func newRand(seed uint64) *rand.Rand {
	if seed == 0 {
		seed = rand.Uint64()
	}
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// predicted is implemented by policies that read the approximate index.
type predicted interface{ predicted() bool }

func usesPrediction(p Policy) bool {
	q, ok := p.(predicted)
	return ok && q.predicted()
}
