package components

// A Term is one figure the dashboard shows, in plain words: what its tile
// is called, its full name with the acronym people use, and its definition,
// one tap or hover away. The definitions follow docs/metrics.md, which
// follows AIPerf's.
type Term struct {
	// ID is the tile's data-tile, such as "ttft-p95".
	ID string
	// Label is the tile's heading, such as "First token p95".
	Label string
	// Name is the figure's full name, such as "Time to first token (TTFT), p95".
	Name string
	// Text defines it in a sentence or three.
	Text string
}

const (
	p50Text = " p50 is the median: half of the window's requests did better."
	p95Text = " p95: 95% of the window's requests did better, the slowest 5% worse."
	ttftDef = "From sending a request to the first chunk of its answer that carries text. " +
		"It is mostly the prompt's prefill, which a cached prefix skips."
	tpotDef = "The answer's decode time per token after the first: (answer time − time to first token) ÷ (output tokens − the first chunk's tokens, usually 1), " +
		"per request. It grows with the number of answers a worker decodes at once."
	e2eDef = "From sending a request to the last chunk of its answer."
)

// Terms are the dashboard's figures, in the tiles' order.
var Terms = []Term{
	{"ttft-p50", "First token p50", "Time to first token (TTFT), p50", ttftDef + p50Text},
	{"ttft-p95", "First token p95", "Time to first token (TTFT), p95", ttftDef + p95Text + " The SLO is on this figure."},
	{"tpot-p50", "Per token p50", "Time per output token (TPOT), p50", tpotDef + p50Text + " Also called inter-token latency (ITL)."},
	{"tpot-p95", "Per token p95", "Time per output token (TPOT), p95", tpotDef + p95Text + " The SLO is on this figure."},
	{"chunk-gap-p50", "Chunk gap p50", "Gap between stream chunks, p50",
		"The raw time between two chunks of a streamed answer, as the client receives them. " +
			"A chunk may carry several tokens, so this is not the time per token." + p50Text},
	{"e2e-p50", "Answer p50", "End-to-end latency (E2E), p50", e2eDef + p50Text},
	{"e2e-p95", "Answer p95", "End-to-end latency (E2E), p95", e2eDef + p95Text},
	{"tops", "Tokens/s", "Output tokens per second",
		"Every answer's output tokens, as the worker counts them, ended in the window, divided by the time the window covers."},
	{"rps", "Requests/s", "Requests per second", "Requests completed in the window, divided by the time it covers."},
	{"goodput", "Good req/s", "Goodput",
		"Requests per second that met every SLO: time to first token and time per output token both within their limits. A failed request is never good."},
	{"errors", "Errors", "Error rate",
		"Failed requests as a share of all that ended in the window: refused connections, timeouts, HTTP errors and broken streams, every one counted. " +
			"After a change, only requests sent before the oldest one still in flight count, so that failures, which end at once, do not stand for all. " +
			"Shed: requests the router turned away (503) because every worker was full."},
	{"kv-hit", "Cache hit", "KV cache hit rate",
		"The share of prompt tokens the workers served from their KV cache instead of computing them: cached tokens ÷ prompt tokens, as the workers report them."},
}

// TermByID returns the term of a tile; ok is false for an unknown one.
func TermByID(id string) (Term, bool) {
	for _, t := range Terms {
		if t.ID == id {
			return t, true
		}
	}
	return Term{}, false
}

// termTitle is a tile label's hover text: the full name and definition.
func termTitle(id string) string {
	t, ok := TermByID(id)
	if !ok {
		return ""
	}
	return t.Name + ": " + t.Text
}

// profileTitle is the header's hover text on the workers: the simulated
// profile's name, which --sim-profile takes.
func profileTitle(d PageData) string {
	if d.ProfileName == "" {
		return ""
	}
	return "simulated profile " + d.ProfileName + " (--sim-profile)"
}
