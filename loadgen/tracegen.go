package loadgen

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// TraceSpec describes a synthetic Mooncake-format trace: sessions of
// several turns arriving as a Poisson process, whose prompts share prefixes
// in a given structure. Every prompt of every session starts with the same
// SharedBlocks blocks (a system prompt), then SessionBlocks blocks of its
// own session (a document), then TurnBlocks new blocks per turn so far (the
// previous answers and the questions), so each turn's prompt extends the
// one before it.
type TraceSpec struct {
	// Sessions is how many sessions the trace holds.
	Sessions int
	// Rate is how many sessions arrive per second, on average.
	Rate float64
	// Turns is the distribution of requests per session.
	Turns TurnDist
	// SharedBlocks is how many blocks every prompt starts with.
	SharedBlocks int
	// SessionBlocks is how many blocks follow, the same in every prompt of
	// a session and unique to it.
	SessionBlocks int
	// TurnBlocks is how many blocks each turn adds.
	TurnBlocks int
	// OutputTokens is every request's output_length.
	OutputTokens int
	// Gap and Think space a session's turns: each is sent Gap plus an
	// exponential draw of mean Think after the one before. The trace is an
	// open loop, so a turn does not wait for the answer before it.
	Gap, Think time.Duration
	// BlockSize is how many tokens each hash id names.
	BlockSize int
	// Seed makes the trace reproducible.
	Seed uint64
}

// DefaultTraceSpec is `kvlens trace gen`'s default and the trace
// workload's: 1,000 sessions at one a second, 3–5 turns each, Mooncake's
// 512-token blocks, a 2,048-token system prompt shared by all, a
// 1,024-token document per session, 512 new tokens (the last answer and a
// question) and a 256-token answer per turn, turns 10 s plus a mean of
// 10 s apart. Its longest prompt is 5,632 tokens.
func DefaultTraceSpec() TraceSpec {
	return TraceSpec{
		Sessions: 1000, Rate: 1, Turns: UniformTurns(3, 5),
		SharedBlocks: 4, SessionBlocks: 2, TurnBlocks: 1, OutputTokens: 256,
		Gap: 10 * time.Second, Think: 10 * time.Second, BlockSize: TraceBlockTokens, Seed: 1,
	}
}

// maxTraceSessions bounds a synthetic trace: a million sessions is days
// of load at any rate a few workers serve.
const maxTraceSessions = 1_000_000

// maxTraceRate bounds the arrival rate, in sessions a second: past it every
// session arrives in the same millisecond.
const maxTraceRate = 1e6

// Validate checks that the spec describes a trace ParseTrace would read back.
func (s TraceSpec) Validate() error {
	switch {
	case s.Sessions < 1 || s.Sessions > maxTraceSessions:
		return fmt.Errorf("sessions %d: need 1..%d", s.Sessions, maxTraceSessions)
	case !(s.Rate > 0) || s.Rate > maxTraceRate:
		return fmt.Errorf("rate %v: need a positive number of sessions per second, at most %g", s.Rate, maxTraceRate)
	case s.SharedBlocks < 0 || s.SessionBlocks < 0:
		return fmt.Errorf("shared prefix %d and session prefix %d blocks must not be negative", s.SharedBlocks, s.SessionBlocks)
	case s.TurnBlocks < 1:
		return fmt.Errorf("turn blocks %d: each turn adds at least one block", s.TurnBlocks)
	case s.OutputTokens < 1 || s.OutputTokens > maxTraceTokens:
		return fmt.Errorf("output tokens %d: need 1..%d", s.OutputTokens, maxTraceTokens)
	case s.Gap < 0 || s.Think < 0:
		return fmt.Errorf("gap %v and think %v must not be negative", s.Gap, s.Think)
	case s.BlockSize < 1 || s.BlockSize > maxTraceTokens:
		return fmt.Errorf("block size %d: need 1..%d tokens", s.BlockSize, maxTraceTokens)
	}
	if err := s.Turns.valid(); err != nil {
		return err
	}
	// ParseTrace holds a record to 2^20 tokens and 2^20/512 hash ids.
	if n := s.longestPrompt(); n > maxTraceTokens || (n/s.BlockSize)*TraceBlockTokens > maxTraceTokens {
		return fmt.Errorf("the longest prompt would be %d blocks of %d tokens: more than a trace may hold", n/s.BlockSize, s.BlockSize)
	}
	return nil
}

// longestPrompt is the last turn's prompt length of the longest session,
// in tokens; it saturates rather than overflow.
func (s TraceSpec) longestPrompt() int {
	blocks := float64(s.SharedBlocks) + float64(s.SessionBlocks) + float64(s.TurnBlocks)*float64(slices.Max(s.Turns.Counts))
	return int(min(blocks*float64(s.BlockSize), math.MaxInt32))
}

// SessionLength estimates how long a session is in flight: its turns' gaps
// plus one more Gap for the last answer. OpenLoopRate(level, it) is the
// rate that keeps level sessions in flight.
func (s TraceSpec) SessionLength() time.Duration {
	return time.Duration((s.Turns.Mean()-1)*float64(s.Gap+s.Think)) + s.Gap
}

// Generate makes the trace's records, in timestamp order, numbered from 1
// in that order, each naming BlockSize tokens per hash id. Hash ids 0 to
// SharedBlocks−1 are the shared prefix; every other id names one block of
// one session.
func (s TraceSpec) Generate() ([]TraceRecord, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("trace gen: %w", err)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x74726163656765)) // "tracege"
	shared := make([]int64, s.SharedBlocks)
	for i := range shared {
		shared[i] = int64(i)
	}
	next := int64(s.SharedBlocks)
	ids := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = next
			next++
		}
		return out
	}
	var recs []TraceRecord
	var arrival float64 // seconds
	for range s.Sessions {
		arrival += rng.ExpFloat64() / s.Rate
		prefix := append(slices.Clone(shared), ids(s.SessionBlocks)...)
		at := arrival * 1000 // ms
		for turn := range s.Turns.sample(rng) {
			if turn > 0 {
				at += float64(s.Gap.Milliseconds()) + rng.ExpFloat64()*float64(s.Think.Milliseconds())
			}
			if at > maxTraceMillis {
				// A rate of 1e-300 wrote timestamps of -2^63, which
				// ParseTrace refuses: stop at what it reads.
				return nil, fmt.Errorf("trace gen: rate %g, gap %v and think %v would stamp requests past %g ms: more than a trace may hold", s.Rate, s.Gap, s.Think, maxTraceMillis)
			}
			prefix = append(prefix, ids(s.TurnBlocks)...)
			recs = append(recs, TraceRecord{
				Timestamp:    int64(at),
				InputLength:  len(prefix) * s.BlockSize,
				OutputLength: s.OutputTokens,
				HashIDs:      slices.Clone(prefix),
				BlockTokens:  s.BlockSize,
			})
		}
	}
	slices.SortStableFunc(recs, func(a, b TraceRecord) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	for i := range recs {
		recs[i].Line = i + 1
	}
	return recs, nil
}

// WriteTrace writes records as Mooncake-format JSONL, one a line with
// timestamp (ms), input_length, output_length and hash_ids: what
// ParseTrace reads.
func WriteTrace(w io.Writer, recs []TraceRecord) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("trace: write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("trace: write: %w", err)
	}
	return nil
}
