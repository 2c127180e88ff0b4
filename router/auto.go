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
// matches. Once on the workers' /tokenize, Auto stays there.
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

	source atomic.Int32
	mu     sync.Mutex // one choice at a time
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

// probe asks wk's /tokenize for the probe chat.
func (a *Auto) probe(ctx context.Context, wk *Worker) ([]uint32, error) {
	msgs, _ := json.Marshal(probeChat)
	payload, _ := json.Marshal(tokenizeBody{Model: a.Model, Messages: msgs})
	return tokenizeOn(ctx, a.Worker.Client, wk, payload, a.Worker.Timeout)
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
			var differs []string
			for i, t := range toks {
				differs = append(differs, fmt.Sprintf("%s's %d tokens%s", shortName(srcs[i]), len(t), firstDiff(t, theirs)))
			}
			a.source.Store(int32(SourceWorker))
			return fmt.Sprintf("tokenizer auto: %s: %s tokenizes a sample chat differently (%d tokens, against %s)",
				a.describe(SourceWorker), wk.Name, len(theirs), strings.Join(differs, "; "))
		}
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
// changed; an error when wk could not be asked, which changes nothing.
func (a *Auto) Check(ctx context.Context, wk *Worker) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
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
			return fmt.Sprintf("tokenizer auto: %s tokenizes a sample chat exactly as %s (%d tokens)", wk.Name, shortName(was), len(theirs)), nil
		}
	}
	line := a.choose(ctx, a.Worker.Pool)
	if a.Source() != was {
		line = fmt.Sprintf("%s (was %s, until %s was re-admitted)", line, shortName(was), wk.Name)
		if a.OnSwitch != nil {
			a.OnSwitch(line)
		}
	}
	return line, nil
}

// Watch checks every worker the pool re-admits (see Check), in the
// background, each within timeout.
func (a *Auto) Watch(pool *Pool, timeout time.Duration) {
	pool.OnHealthChange(func(w *Worker, healthy bool) {
		if !healthy || a.Source() == SourceWorker {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			a.Check(ctx, w)
		}()
	})
}
