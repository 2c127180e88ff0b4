package router

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/tokenizer"
)

// A Source is where Auto takes a prompt's tokens from.
type Source int32

const (
	// SourceEmbedded is kvlens's own tokenizer and template (cl100k).
	SourceEmbedded Source = iota
	// SourceFiles is the model's own, read from its files.
	SourceFiles
	// SourceWorker is each request asked of a worker's /tokenize.
	SourceWorker
)

// Auto tokenizes with the first source that matches the workers' own
// tokenizer: the model's files (when given), then the embedded tokenizer,
// else the workers' /tokenize, which always matches: --tokenizer auto.
// Choose probes every healthy worker at start; Check (and Watch) probes a
// worker when it is re-admitted, and chooses again when it no longer
// matches. Once Watch runs, a probe that failed (a worker slow to answer,
// say) is tried again while the worker stays healthy, after 1 s, then
// waits doubling up to 30 s, until one answers. Once on the workers'
// /tokenize, Auto stays there.
type Auto struct {
	// Worker asks the workers' /tokenize once Auto has switched to it.
	Worker *WorkerTokenize
	// Files is the model's own tokenizer and template (--tokenizer-dir);
	// nil tries none.
	Files *tokenizer.Engine
	// Model is the model name the probe asks for; empty sends none.
	Model string
	// OnSwitch, if set, runs when Check changes the source, with the line
	// that says why; it should clear what was measured with the old one.
	OnSwitch func(line string)
	// Logf, if set, logs what retried probes find: a new reason for one to
	// fail, and the answer that ends the retries.
	Logf func(format string, args ...any)
	// Clock times the retries; nil means clock.Real.
	Clock clock.Clock

	source atomic.Int32
	mu     sync.Mutex // one choice at a time

	watching bool          // Watch runs: failed probes are retried; guarded by mu
	timeout  time.Duration // Watch's bound on a retry's probes
}

// The waits before a failed probe is tried again: the first, doubled after
// each failure up to the last.
const (
	ProbeRetryFirst = time.Second
	ProbeRetryMax   = 30 * time.Second
)

// What a worker's latest probe found, as the admin API says.
const (
	// ProbeMatches: the worker tokenizes the sample chat as the local
	// source Auto chose or kept.
	ProbeMatches = "matches"
	// ProbeDiffers: it tokenizes it otherwise, so Auto asks the workers.
	ProbeDiffers = "differs"
	// ProbeFailed: the probe got no usable answer, in time or at all; it
	// is retried while the worker is healthy.
	ProbeFailed = "failed"
)

// probeState is what Auto's probes of one worker found.
type probeState struct {
	mu       sync.Mutex
	outcome  string        // ProbeMatches, ProbeDiffers, ProbeFailed; "" before the first
	failures int64         // probes that failed
	lastErr  string        // why the latest failed; "" after a good one
	wait     time.Duration // the wait before the pending retry, or the last one
	timer    clock.Timer   // the pending retry; nil when none is
	gen      uint64        // counts retries set, so that one called off knows it
}

// snapshot returns the outcome, failures, error and the wait before the
// pending retry (0 when none is pending).
func (p *probeState) snapshot() (string, int64, string, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := p.wait
	if p.timer == nil {
		wait = 0
	}
	return p.outcome, p.failures, p.lastErr, wait
}

// set records a probe's outcome; a good one ends the retries.
func (p *probeState) set(outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outcome, p.lastErr, p.wait = outcome, "", 0
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// stop cancels the pending retry, and starts the waits over.
func (p *probeState) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.wait = 0
}

var _ Tokenizer = (*Auto)(nil)

// Source returns the source Auto tokenizes with.
func (a *Auto) Source() Source { return Source(a.source.Load()) }

// IsEmbedded reports whether Auto tokenizes with the embedded tokenizer.
func (a *Auto) IsEmbedded() bool { return a.Source() == SourceEmbedded }

// Tokens implements Tokenizer.
func (a *Auto) Tokens(ctx context.Context, path string, body []byte) ([]uint32, error) {
	switch a.Source() {
	case SourceFiles:
		return Files{a.Files}.Tokens(ctx, path, body)
	case SourceWorker:
		return a.Worker.Tokens(ctx, path, body)
	}
	return Embedded{}.Tokens(ctx, path, body)
}

// probeChat is the sample chat Auto compares: a system prompt, a turn and
// an answer, with punctuation, digits and a newline, so that templates and
// BPEs that differ anywhere common tend to differ here.
var probeChat = []tokenizer.Message{
	{Role: "system", Content: "You are a helpful assistant. Answer briefly."},
	{Role: "user", Content: "What's 12 + 30? Reply with the number,\nthen a haiku."},
	{Role: "assistant", Content: "42.\nQuiet prefix cache / blocks remembered, reused / the router sees all"},
	{Role: "user", Content: "Thanks!"},
}

// describe names a source for people.
func (a *Auto) describe(s Source) string {
	switch s {
	case SourceFiles:
		return "files (the model's tokenizer.json and chat template in " + a.Files.String() + ")"
	case SourceWorker:
		return "worker (each worker's /tokenize)"
	}
	return "embedded (cl100k, kvlens template)"
}

// local returns the sources that need no round trip, in order of choice,
// with their tokens of the probe chat.
func (a *Auto) local() ([]Source, [][]uint32) {
	var srcs []Source
	var toks [][]uint32
	if a.Files != nil {
		if text, err := a.Files.Render(probeChat); err == nil {
			srcs, toks = append(srcs, SourceFiles), append(toks, a.Files.Encode(text))
		}
	}
	return append(srcs, SourceEmbedded), append(toks, ChatTokens(probeChat))
}

// probe asks wk's /tokenize for the probe chat. A failure is recorded and,
// while Watch runs, retried later; the caller records a success's outcome.
// Call it with a.mu held.
func (a *Auto) probe(ctx context.Context, wk *Worker) ([]uint32, error) {
	msgs, _ := json.Marshal(probeChat)
	payload, _ := json.Marshal(tokenizeBody{Model: a.Model, Messages: msgs})
	toks, err := tokenizeOn(ctx, a.Worker.Client, wk, payload, a.Worker.Timeout)
	if err != nil {
		a.failed(wk, err)
	}
	return toks, err
}

// failed records a failed probe of wk and, while Watch runs, sets a retry
// after the next wait. Call it with a.mu held.
func (a *Auto) failed(wk *Worker, err error) {
	p := &wk.autoProbe
	p.mu.Lock()
	defer p.mu.Unlock()
	reason := oneLine(err)
	if a.watching && reason != p.lastErr && a.Logf != nil {
		a.Logf("tokenizer auto: %s's probe failed (%s); tried again while it is healthy", wk.Name, reason)
	}
	p.outcome, p.lastErr = ProbeFailed, reason
	p.failures++
	if a.watching {
		a.retryLater(wk)
	}
}

// retryLater sets wk's next retry, if none is pending. Call it with a.mu
// and wk.autoProbe.mu held.
func (a *Auto) retryLater(wk *Worker) {
	p := &wk.autoProbe
	if p.timer != nil || !wk.Healthy() || a.Source() == SourceWorker {
		return
	}
	p.wait = min(max(2*p.wait, ProbeRetryFirst), ProbeRetryMax)
	clk := a.Clock
	if clk == nil {
		clk = clock.Real
	}
	p.gen++
	gen := p.gen
	p.timer = clk.AfterFunc(p.wait, func() { a.retry(wk, gen) })
}

// retry probes wk again (see Check), unless the retry was called off: the
// worker failed its health check or left the pool, or Auto already asks
// every worker. Another failure sets the next retry.
func (a *Auto) retry(wk *Worker, gen uint64) {
	a.mu.Lock()
	p := &wk.autoProbe
	p.mu.Lock()
	current := p.timer != nil && p.gen == gen
	if current {
		p.timer = nil
	}
	failures := p.failures
	p.mu.Unlock()
	if !current || !wk.Healthy() || !slices.Contains(a.Worker.Pool.Workers(), wk) || a.Source() == SourceWorker {
		a.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	was := a.Source()
	line, err := a.check(ctx, wk, "answered a retried probe")
	a.mu.Unlock()
	if err == nil && a.Source() == was && a.Logf != nil {
		a.Logf("%s, on a retry after %d failed %s", line, failures, plural(int(failures), "probe", "probes"))
	}
}

// Choose probes every healthy worker and keeps the first local source that
// tokenizes the sample chat as every one of them does, else the workers'
// /tokenize. It returns one line naming the source chosen and why.
func (a *Auto) Choose(ctx context.Context, pool *Pool) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.choose(ctx, pool)
}

func (a *Auto) choose(ctx context.Context, pool *Pool) string {
	srcs, toks := a.local()
	var asked, failed []string
	n := 0
	for _, wk := range pool.Workers() {
		if !wk.Healthy() {
			continue
		}
		theirs, err := a.probe(ctx, wk)
		if err != nil {
			failed = append(failed, oneLine(err))
			continue
		}
		var keepS []Source
		var keepT [][]uint32
		for i, t := range toks {
			if slices.Equal(t, theirs) {
				keepS, keepT = append(keepS, srcs[i]), append(keepT, t)
			}
		}
		if len(keepS) == 0 {
			wk.autoProbe.set(ProbeDiffers)
			var differs []string
			for i, t := range toks {
				differs = append(differs, fmt.Sprintf("%s's %d tokens%s", shortName(srcs[i]), len(t), firstDiff(t, theirs)))
			}
			a.source.Store(int32(SourceWorker))
			return fmt.Sprintf("tokenizer auto: %s: %s tokenizes a sample chat differently (%d tokens, against %s)",
				a.describe(SourceWorker), wk.Name, len(theirs), strings.Join(differs, "; "))
		}
		wk.autoProbe.set(ProbeMatches)
		srcs, toks = keepS, keepT
		asked = append(asked, wk.Name)
		n = len(theirs)
	}
	a.source.Store(int32(srcs[0]))
	switch {
	case len(asked) > 0:
		return fmt.Sprintf("tokenizer auto: %s: %s %s a sample chat exactly as it does (%d tokens)",
			a.describe(srcs[0]), strings.Join(asked, ", "), plural(len(asked), "tokenizes", "tokenize"), n)
	case len(failed) > 0:
		return fmt.Sprintf("tokenizer auto: %s, unverified: %s", a.describe(srcs[0]), failed[0])
	}
	return fmt.Sprintf("tokenizer auto: %s, unverified: no healthy worker to ask yet", a.describe(srcs[0]))
}

func shortName(s Source) string {
	switch s {
	case SourceFiles:
		return "the model's files"
	case SourceWorker:
		return "the workers'"
	}
	return "the embedded tokenizer"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// firstDiff describes where two token lists part, as ", first at token 3".
func firstDiff(a, b []uint32) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf(", first differing at token %d", i)
		}
	}
	return ""
}

// Check probes wk, a worker just (re)admitted: while the source in use
// tokenizes the sample chat as wk does, nothing changes; when it does not,
// Auto chooses again over every healthy worker (see Choose), which may
// land on another local source or on the workers' /tokenize. It returns
// one line saying what it found, and calls OnSwitch when the source
// changed; an error when wk could not be asked, which changes nothing
// but, while Watch runs, sets a retry.
func (a *Auto) Check(ctx context.Context, wk *Worker) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.check(ctx, wk, "was re-admitted")
}

// check is Check with a.mu held; why says what made wk worth asking, for
// the line that says why the source changed.
func (a *Auto) check(ctx context.Context, wk *Worker, why string) (string, error) {
	was := a.Source()
	if was == SourceWorker {
		return fmt.Sprintf("tokenizer auto: %s is asked for its tokens, as every worker is", wk.Name), nil
	}
	theirs, err := a.probe(ctx, wk)
	if err != nil {
		return "", err
	}
	srcs, toks := a.local()
	for i, s := range srcs {
		if s == was && slices.Equal(toks[i], theirs) {
			wk.autoProbe.set(ProbeMatches)
			return fmt.Sprintf("tokenizer auto: %s tokenizes a sample chat exactly as %s (%d tokens)", wk.Name, shortName(was), len(theirs)), nil
		}
	}
	line := a.choose(ctx, a.Worker.Pool)
	if a.Source() != was {
		line = fmt.Sprintf("%s (was %s, until %s %s)", line, shortName(was), wk.Name, why)
		if a.OnSwitch != nil {
			a.OnSwitch(line)
		}
	}
	return line, nil
}

// Watch checks every worker the pool re-admits (see Check), in the
// background, each within timeout, and from now on tries a failed probe
// again while its worker is healthy: those that failed already, and any
// that fails later.
func (a *Auto) Watch(pool *Pool, timeout time.Duration) {
	a.mu.Lock()
	a.watching, a.timeout = true, timeout
	for _, w := range pool.Workers() {
		p := &w.autoProbe
		p.mu.Lock()
		if p.outcome == ProbeFailed {
			a.retryLater(w)
			if a.Logf != nil {
				a.Logf("tokenizer auto: %s's probe failed (%s); tried again while it is healthy", w.Name, p.lastErr)
			}
		}
		p.mu.Unlock()
	}
	a.mu.Unlock()
	pool.OnHealthChange(func(w *Worker, healthy bool) {
		if !healthy {
			// The re-admission's Check will probe it again.
			w.autoProbe.stop()
			return
		}
		if a.Source() == SourceWorker {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			a.Check(ctx, w)
		}()
	})
}
