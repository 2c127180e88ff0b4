package sim

import "time"

// Timing is the walking skeleton's latency model: time to first token grows
// linearly with prompt tokens, and tokens then arrive at a fixed gap. It knows
// nothing of batching or caching; the engine replaces it.
type Timing struct {
	// FirstTokenBase is the time to first token of an empty prompt.
	FirstTokenBase time.Duration
	// PerPromptToken is added to the time to first token for each prompt token.
	PerPromptToken time.Duration
	// InterToken is the gap between output tokens.
	InterToken time.Duration
}

// DefaultTiming gives numbers of the order the seeds measured at low load on
// H200s: about 230 ms for a 4,000-token prompt and 25 ms per output token.
var DefaultTiming = Timing{
	FirstTokenBase: 30 * time.Millisecond,
	PerPromptToken: 50 * time.Microsecond,
	InterToken:     25 * time.Millisecond,
}

// firstToken is the delay before the first output token of a prompt of n tokens.
func (t Timing) firstToken(n int) time.Duration {
	return t.FirstTokenBase + time.Duration(n)*t.PerPromptToken
}
