// Package scenario scripts routing runs and reports where each request went:
// multi-turn conversations (does each follow-up return to the worker that
// holds its conversation?) and a shared-prefix overload (does any worker go
// past its batch capacity?). A run drives a Target: in process, a router fed
// with the KV events a caching worker would publish; or over HTTP, a kvlens
// proxy in front of a real or simulated fleet.
package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/internal/sse"
	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/tokenizer"
)

// Prompt is one request's prompt.
type Prompt struct {
	// Messages is the chat so far.
	Messages []tokenizer.Message
	// Tokens, when set, is the rendered and tokenized prompt, saving the
	// target the work.
	Tokens []uint32
}

// Target runs requests for a scenario.
type Target interface {
	// Begin routes p and starts the request; it returns once the worker is
	// chosen.
	Begin(ctx context.Context, p Prompt) (Turn, error)
}

// Turn is one request in flight.
type Turn interface {
	// Worker is the worker that serves the request.
	Worker() string
	// Reply is the assistant's answer, known once Finish returns.
	Reply() string
	// FirstToken marks the end of prefill. Targets that see the real stream
	// ignore it.
	FirstToken()
	// Finish ends the request.
	Finish() error
}

// InProcess runs requests on a router directly, with no HTTP. Each worker
// behaves as a worker with a prefix cache does: at the first token it
// publishes a BlockStored event of the whole prompt to the router's index.
type InProcess struct {
	Router *router.Router
}

type inProcessTurn struct {
	t      *InProcess
	b      *router.Booking
	tokens []uint32
	reply  string
	once   sync.Once
}

// Begin implements Target.
func (t *InProcess) Begin(_ context.Context, p Prompt) (Turn, error) {
	tokens := p.Tokens
	if tokens == nil {
		tokens = tokenizer.Encode(tokenizer.RenderChat(p.Messages))
	}
	b, err := t.Router.Decide(&router.Request{Path: "/v1/chat/completions", TokenIDs: tokens}, nil)
	if err != nil {
		return nil, err
	}
	return &inProcessTurn{t: t, b: b, tokens: tokens, reply: fmt.Sprintf("Answer %d from %s.", len(tokens), b.Worker.Name)}, nil
}

func (u *inProcessTurn) Worker() string { return u.b.Worker.Name }
func (u *inProcessTurn) Reply() string  { return u.reply }

func (u *inProcessTurn) FirstToken() {
	u.once.Do(func() {
		u.b.FirstToken()
		bs := u.t.Router.BlockSize()
		chain := u.t.Router.Hash(u.tokens)
		if len(chain) == 0 {
			return
		}
		// The engine's ids are opaque; the chain hashes serve.
		u.t.Router.Index().Apply(u.b.Worker.Name, &kvevents.BlockStored{
			BlockHashes: chain, TokenIDs: u.tokens[:len(chain)*bs], BlockSize: bs,
		})
	})
}

func (u *inProcessTurn) Finish() error {
	u.FirstToken()
	u.b.Release()
	return nil
}

// HTTP runs requests through a kvlens proxy, reading the chosen worker from
// its X-Kvlens-Worker header.
type HTTP struct {
	// BaseURL is the proxy's OpenAI base URL, such as http://localhost:8080/v1.
	BaseURL string
	// Model is the model name requests ask for.
	Model string
	// MaxTokens bounds each answer.
	MaxTokens int
	// Client is the HTTP client; nil means http.DefaultClient.
	Client *http.Client
}

type httpTurn struct {
	worker string
	resp   *http.Response
	reply  strings.Builder
}

// Begin implements Target.
func (t *HTTP) Begin(ctx context.Context, p Prompt) (Turn, error) {
	body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"messages":%s}`, t.Model, max(1, t.MaxTokens), jsonMessages(p.Messages))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(t.BaseURL, "/")+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	c := t.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("scenario: %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	return &httpTurn{worker: resp.Header.Get(router.HeaderWorker), resp: resp}, nil
}

func (u *httpTurn) Worker() string { return u.worker }
func (u *httpTurn) Reply() string  { return u.reply.String() }
func (u *httpTurn) FirstToken()    {}

// Finish reads the stream to its end, collecting the answer's text.
func (u *httpTurn) Finish() error {
	defer u.resp.Body.Close()
	var events sse.Decoder // each event's data up to 1 MiB
	buf := make([]byte, 32<<10)
	for {
		n, err := u.resp.Body.Read(buf)
		for p := buf[:n]; len(p) > 0; {
			k, ev, ok := events.Feed(p)
			p = p[k:]
			if ok {
				if err := u.add(ev); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			if ev, ok := events.End(); ok {
				return u.add(ev)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
	}
}

// add adds the content of one event's chunk to the reply. Other events,
// [DONE] and usage among them, add nothing.
func (u *httpTurn) add(ev sse.Event) error {
	if ev.TooLong {
		return fmt.Errorf("scenario: an SSE event of more than %d bytes", sse.DefaultLimit)
	}
	var chunk struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(ev.Data, &chunk) != nil {
		return nil
	}
	for _, c := range chunk.Choices {
		u.reply.WriteString(c.Delta.Content)
	}
	return nil
}

// Affinity is the result of a multi-turn run.
type Affinity struct {
	// Conversations and Turns are the run's shape.
	Conversations, Turns int
	// FollowUps counts turns after the first of their conversation.
	FollowUps int
	// Sticky counts follow-ups served by the worker that served the turn
	// before, which holds the conversation's prefix.
	Sticky int
	// Routed counts requests per worker.
	Routed map[string]int
}

// StickyRate is Sticky / FollowUps.
func (a Affinity) StickyRate() float64 {
	if a.FollowUps == 0 {
		return 0
	}
	return float64(a.Sticky) / float64(a.FollowUps)
}

func (a Affinity) String() string {
	return fmt.Sprintf("%d conversations × %d turns: %d of %d follow-ups (%.0f%%) returned to their worker; routed %v",
		a.Conversations, a.Turns, a.Sticky, a.FollowUps, 100*a.StickyRate(), a.Routed)
}

// RunAffinity plays conversations of turns each. Every round, each
// conversation sends its next turn, in an order shuffled by seed, one
// request at a time.
func RunAffinity(ctx context.Context, t Target, conversations, turns int, seed uint64) (Affinity, error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	msgs := make([][]tokenizer.Message, conversations)
	last := make([]string, conversations)
	for c := range msgs {
		msgs[c] = []tokenizer.Message{{Role: "system", Content: "You are a patient teacher."}}
	}
	a := Affinity{Conversations: conversations, Turns: turns, Routed: map[string]int{}}
	order := rng.Perm(conversations)
	for turn := range turns {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, c := range order {
			msgs[c] = append(msgs[c], tokenizer.Message{Role: "user", Content: question(c, turn)})
			u, err := t.Begin(ctx, Prompt{Messages: msgs[c]})
			if err != nil {
				return a, fmt.Errorf("scenario: conversation %d turn %d: %w", c, turn, err)
			}
			if err := u.Finish(); err != nil {
				return a, fmt.Errorf("scenario: conversation %d turn %d: %w", c, turn, err)
			}
			w := u.Worker()
			a.Routed[w]++
			if turn > 0 {
				a.FollowUps++
				if w == last[c] {
					a.Sticky++
				}
			}
			last[c] = w
			msgs[c] = append(msgs[c], tokenizer.Message{Role: "assistant", Content: u.Reply()})
		}
	}
	return a, nil
}

// question is conversation c's user message at turn, long enough to fill
// several blocks and distinct per conversation.
func question(c, turn int) string {
	topics := []string{"paged attention", "Raft elections", "LSM compaction", "TCP congestion control", "garbage collection",
		"GPU warps", "Kubernetes scheduling", "vector indexes", "CDN caching", "serializable transactions"}
	return fmt.Sprintf("Conversation %d, question %d: explain %s step by step, with one worked example and the trade-offs a practitioner should weigh before choosing it.",
		c, turn, topics[(c+turn)%len(topics)])
}

func jsonMessages(ms []tokenizer.Message) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":%q,"content":%q}`, m.Role, m.Content)
	}
	b.WriteByte(']')
	return b.String()
}

var (
	_ Target      = (*InProcess)(nil)
	_ Target      = (*HTTP)(nil)
	_ clock.Clock = (*Clock)(nil)
)

// Clock is a manual clock for in-process scenarios: time moves only when a
// scenario advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Unix(1_700_000_000, 0)} }

// Now implements clock.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements clock.Clock; scenarios do not schedule wake-ups, so
// it never fires.
func (c *Clock) AfterFunc(time.Duration, func()) clock.Timer { return stopped{} }

type stopped struct{}

func (stopped) Stop() bool { return false }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
