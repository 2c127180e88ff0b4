package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// ThinkDist is how a user's pause between an answer and the next question
// is drawn.
type ThinkDist string

// The think-time distributions.
const (
	// ThinkFixed pauses Config.ThinkTime every time.
	ThinkFixed ThinkDist = ""
	// ThinkExponential draws each pause from an exponential distribution
	// of mean Config.ThinkTime: most pauses are short, a few long.
	ThinkExponential ThinkDist = "exponential"
	// ThinkReading pauses as long as reading the answer takes: its output
	// tokens × WordsPerToken words at Config.ReadingWPM words per minute.
	ThinkReading ThinkDist = "reading"
)

// WordsPerToken converts an answer's tokens into words for ThinkReading:
// English prose runs about 0.75 words per BPE token.
const WordsPerToken = 0.75

// ReadingTime is how long reading an answer of tokens output tokens takes at
// wpm words per minute.
func ReadingTime(tokens int, wpm float64) time.Duration {
	if wpm <= 0 || tokens <= 0 {
		return 0
	}
	return time.Duration(float64(tokens) * WordsPerToken / wpm * float64(time.Minute))
}

func (cfg *Config) checkThink() error {
	switch cfg.ThinkDist {
	case ThinkFixed, ThinkExponential:
		return nil
	case ThinkReading:
		if !(cfg.ReadingWPM > 0) || math.IsInf(cfg.ReadingWPM, 0) {
			return fmt.Errorf("reading think time needs a positive reading speed, got %v words per minute", cfg.ReadingWPM)
		}
		return nil
	}
	return fmt.Errorf("think-time distribution %q: want fixed, %s or %s", cfg.ThinkDist, ThinkExponential, ThinkReading)
}

// think draws a conversation's pause after the answer res.
func (g *Generator) think(c *conversation, res Result) time.Duration {
	switch g.cfg.ThinkDist {
	case ThinkExponential:
		return time.Duration(c.rng.ExpFloat64() * float64(g.cfg.ThinkTime))
	case ThinkReading:
		return ReadingTime(res.OSL, g.cfg.ReadingWPM)
	}
	return g.cfg.ThinkTime
}

// contextMargin is what a follow-up's prompt may hold beyond the last
// prompt, its answer and the new question, in tokens: the chat template's
// few tokens, and an answer's text re-tokenized a little differently.
const contextMargin = 64

// TokenRange is a uniform range of token counts.
type TokenRange struct {
	// Min and Max bound the range, inclusive; Max 0 means none.
	Min, Max int
}

func (r TokenRange) valid() error {
	if r.Max == 0 && r.Min == 0 {
		return nil
	}
	if r.Min < 1 || r.Max < r.Min || r.Max > maxTraceTokens {
		return fmt.Errorf("range %d..%d: need 1 <= min <= max <= %d", r.Min, r.Max, maxTraceTokens)
	}
	return nil
}

func (r TokenRange) sample(rng *rand.Rand) int { return r.Min + rng.IntN(r.Max-r.Min+1) }

// toolPreamble opens every tool result.
const toolPreamble = "Tool result:\n"

// toolResult is an agent's tool output: a line saying what it is, then
// tokens words of its own, drawn from rng, each one token.
func toolResult(r TokenRange, rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString(toolPreamble)
	blockWords(&b, rng.Uint64(), r.sample(rng))
	return b.String()
}

// OpenLoopRate is the arrival rate, per second, that keeps level
// conversations in flight when each lasts session on average: Little's law,
// L = λW, read as λ = L/W.
func OpenLoopRate(level int, session time.Duration) float64 {
	if level <= 0 || session <= 0 {
		return 0
	}
	return float64(level) / session.Seconds()
}

// sampleRemaining draws the turns left to a conversation caught part-way
// through, as the conversations in flight at a random moment are: one of n
// turns in proportion to n × its weight (a longer conversation is more
// likely to be in flight), then a uniform position within it. Starting an
// open loop's first conversations so makes them end at the rate later
// arrivals replace them.
func (d TurnDist) sampleRemaining(rng *rand.Rand) int {
	total := 0
	for i, w := range d.Weights {
		total += w * d.Counts[i]
	}
	x := rng.IntN(total)
	n := d.Counts[len(d.Counts)-1]
	for i, w := range d.Weights {
		if x < w*d.Counts[i] {
			n = d.Counts[i]
			break
		}
		x -= w * d.Counts[i]
	}
	return 1 + rng.IntN(n)
}

// Mean is the distribution's mean number of turns.
func (d TurnDist) Mean() float64 {
	var sum, total float64
	for i, w := range d.Weights {
		sum += float64(w * d.Counts[i])
		total += float64(w)
	}
	if total == 0 {
		return 0
	}
	return sum / total
}
