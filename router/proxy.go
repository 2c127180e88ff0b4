// Package router is kvlens's OpenAI-compatible proxy: for each request it
// picks a worker with a Policy, using a global index of which worker holds
// which KV blocks and what each worker has in flight, and streams the
// worker's answer back.
package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvlens/kvlens/apierror"
	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/reqbody"
	"github.com/kvlens/kvlens/tokenizer"
)

// Header names the proxy sets on every routed response.
const (
	// HeaderWorker carries the name of the worker that served the request.
	HeaderWorker = "X-Kvlens-Worker"
	// HeaderOverlap carries how many leading prompt blocks the index said the
	// worker held when the request was routed.
	HeaderOverlap = "X-Kvlens-Overlap-Blocks"
	// HeaderOracle carries the request's best achievable cached prefix when
	// it was routed, in tokens (see Oracle).
	HeaderOracle = "X-Kvlens-Oracle-Tokens"
)

// maxAnswerBytes bounds a worker's answer to /tokenize (8 MiB).
const maxAnswerBytes = 8 << 20

// Large request bodies are read, parsed and tokenized a few at a time.
// While it is parsed, a body costs about three times its size (the body, the
// decoded messages, the rendered segments), so a burst of 32 bodies at the
// cap of a 16k-token model (2 MiB each) would otherwise hold 200 MiB at
// once, and the garbage collector lets the heap grow to twice what it holds.

// largeBodies is the budget of large request bodies the router reads,
// parses and tokenizes at once: 16 MiB, eight bodies at the cap of a
// 16k-token model (see package reqbody).
var largeBodies = reqbody.NewBudget(16 << 20)

// Proxy routes OpenAI requests to workers.
type Proxy struct {
	rt        *Router
	client    *http.Client
	tokenizer Tokenizer
	// bg tracks the tokenizing of prompts' rests after their first token.
	bg sync.WaitGroup
}

// New returns a proxy over a fixed set of workers that starts with policy p
// and every Router default.
func New(workers []*Worker, p Policy) *Proxy {
	return NewProxy(NewRouter(NewPool(workers), p, Config{}))
}

// NewProxy returns a proxy that routes with rt.
func NewProxy(rt *Router) *Proxy {
	return &Proxy{
		rt:        rt,
		tokenizer: Embedded{},
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // workers are addressed directly, never through HTTP_PROXY
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // compression would buffer the stream
		}},
	}
}

// SetTokenizer replaces the embedded tokenizer, for example with
// WorkerTokenize. Call it before serving.
func (px *Proxy) SetTokenizer(t Tokenizer) { px.tokenizer = t }

// Router returns the proxy's router.
func (px *Proxy) Router() *Router { return px.rt }

// Client is the HTTP client the proxy calls workers with.
func (px *Proxy) Client() *http.Client { return px.client }

// Policy returns the active policy.
func (px *Proxy) Policy() Policy { return px.rt.Policy() }

// SetPolicy switches the active policy without dropping requests in flight.
func (px *Proxy) SetPolicy(p Policy) { px.rt.SetPolicy(p) }

// PolicyName returns the active policy's identifier.
func (px *Proxy) PolicyName() string { return px.rt.Policy().Name() }

// Workers returns the workers behind the proxy.
func (px *Proxy) Workers() []*Worker { return px.rt.pool.Workers() }

// ServeHTTP proxies /v1/chat/completions, /v1/completions and /v1/models.
func (px *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/completions"):
		px.route(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		px.models(w, r)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("router: no route for %s %s", r.Method, r.URL.Path))
	}
}

// models asks the first healthy worker that answers.
func (px *Proxy) models(w http.ResponseWriter, r *http.Request) {
	var last error = ErrNoWorker
	for _, wk := range px.Workers() {
		if !wk.Healthy() {
			continue
		}
		resp, err := px.send(r, wk, nil)
		if err != nil {
			last = err
			continue
		}
		px.stream(w, r, resp, wk, nil, nil)
		return
	}
	writeError(w, http.StatusBadGateway, "router: "+last.Error())
}

// chatTokens caches the tokens of chat messages across requests.
var chatTokens = newTokenCache()

// PromptTokens tokenizes a request body as the workers do: a chat request's
// messages through the shared chat template, a completion's prompt as is.
// A body it cannot read yields no tokens; the worker will judge it.
func PromptTokens(path string, body []byte) []uint32 {
	ids, _ := promptTokens(path, body, 0)
	return ids
}

// promptBody is the part of an OpenAI request body that holds the prompt.
type promptBody struct {
	Messages []tokenizer.Message `json:"messages"`
	Prompt   json.RawMessage     `json:"prompt"`
	// N is kept raw so that an "n" the worker will refuse does not hide
	// the prompt from the router.
	N json.RawMessage `json:"n"`
}

// sequences is the body's "n", the sequences the engine will run for the
// request, when it is a whole number of at least 1; else 1, and the worker
// judges what is wrong with it.
func (b *promptBody) sequences() int {
	var n float64
	if json.Unmarshal(b.N, &n) != nil || n < 1 || n != math.Trunc(n) || n > math.MaxInt32 {
		return 1
	}
	return int(n)
}

// completionPrompt reads a completion request's prompt (see
// tokenizer.CompletionPrompt). ok is false for anything the router does not
// read, a batch of several prompts among them: the worker judges those, and
// the router routes them without cache affinity.
func (b *promptBody) completionPrompt() (text string, ids []uint32, ok bool) {
	return tokenizer.CompletionPrompt(b.Prompt)
}

// textBytes is the length in bytes of the prompt the workers will tokenize,
// or -1 when the body holds no text the router can read (none, or token ids).
func (b *promptBody) textBytes(path string) int {
	if path == "/v1/chat/completions" {
		if len(b.Messages) == 0 {
			return -1
		}
		return tokenizer.ChatBytes(b.Messages)
	}
	if s, ids, ok := b.completionPrompt(); ok && ids == nil {
		return len(s)
	}
	return -1
}

// promptTokens is PromptTokens for a model of at most limit tokens (0: no
// limit), which it checks as tokenizer.EncodeLimit does.
func promptTokens(path string, body []byte, limit int) ([]uint32, error) {
	if path == "/v1/chat/completions" && limit > 0 {
		if err := tokenizer.CheckPieces(body, limit); err != nil {
			return nil, err
		}
	}
	var req promptBody
	if json.Unmarshal(body, &req) != nil {
		return nil, nil
	}
	if limit <= 0 {
		limit = math.MaxInt / tokenizer.MaxTokenBytes
	}
	if path == "/v1/chat/completions" {
		if len(req.Messages) == 0 {
			return nil, nil
		}
		if err := tokenizer.CheckBytes(tokenizer.ChatBytes(req.Messages), limit); err != nil {
			return nil, err
		}
		ids, _, _, err := chatTokens.chatUntil(req.Messages, func([]uint32) bool { return true }, limit)
		return ids, err
	}
	s, ids, ok := req.completionPrompt()
	switch {
	case !ok:
		return nil, nil
	case ids != nil:
		if err := tokenizer.CheckIDs(ids, limit); err != nil {
			return nil, err
		}
		return ids, nil
	}
	return tokenizer.EncodeLimit(s, limit)
}

// request tokenizes a request's prompt for a decision, refusing one longer
// than limit tokens with a *tokenizer.TooLongError: on its bytes alone when
// they say so (nothing is tokenized), else as soon as tokenizing passes the
// limit.
//
// With the embedded tokenizer, a chat prompt is tokenized only as far as
// any worker could hold it (Router.Reaches): text no worker can have cached
// cannot change the decision, only the prompt's length, which is estimated.
// rest then tokenizes the remainder, and is nil when nothing was left. This
// keeps a new long prompt's BPE (about 0.2 µs a token) off the time to
// first token: the decision waits for the first piece only, and the rest is
// tokenized once the first token is out (see stream). A prompt of more bytes
// than limit may have more tokens than limit, so it is tokenized whole (up
// to the limit) before the decision instead.
func (px *Proxy) request(r *http.Request, body []byte, limit int) (req *Request, rest func() []uint32, err error) {
	req = &Request{Path: r.URL.Path, Body: body}
	if r.URL.Path == "/v1/chat/completions" {
		if err := tokenizer.CheckPieces(body, limit); err != nil {
			return nil, nil, err
		}
	}
	var pb promptBody
	if json.Unmarshal(body, &pb) != nil {
		return req, nil, nil // the worker will judge the body
	}
	req.Sequences = pb.sequences()
	n := pb.textBytes(r.URL.Path)
	if n < 0 {
		if r.URL.Path != "/v1/chat/completions" {
			if _, ids, ok := pb.completionPrompt(); ok && ids != nil {
				// Token ids are what every tokenizer would give: none is asked.
				if err := tokenizer.CheckIDs(ids, limit); err != nil {
					return nil, nil, err
				}
				req.TokenIDs = ids
			}
		}
		return req, nil, nil // else the worker will judge the body
	}
	if err := tokenizer.CheckBytes(n, limit); err != nil {
		return nil, nil, err
	}
	if isEmbedded(px.tokenizer) && r.URL.Path == "/v1/chat/completions" {
		// Every token has at least one byte, so a prompt of at most limit
		// bytes fits, and only a longer one must be counted to the end.
		mustCount := n > limit
		bs := px.rt.blockSize
		var chain []uint64
		more := func(ids []uint32) bool {
			chain = blockhash.Extend(chain, ids[len(chain)*bs:], bs)
			return mustCount || px.rt.Reaches(chain)
		}
		ids, estimate, rest, err := chatTokens.chatUntil(pb.Messages, more, limit)
		if err != nil {
			return nil, nil, err
		}
		req.TokenIDs, req.Tokens = ids, estimate
		req.Chain = blockhash.Extend(chain, ids[len(chain)*bs:], bs)
		return req, rest, nil
	}
	var ids []uint32
	if isEmbedded(px.tokenizer) {
		ids, err = promptTokens(r.URL.Path, body, limit)
	} else {
		ids, err = px.tokenizer.Tokens(r.Context(), r.URL.Path, body)
		if err == nil && len(ids) > limit {
			err = &tokenizer.TooLongError{AtLeast: len(ids), Limit: limit}
		}
	}
	var tooLong *tokenizer.TooLongError
	switch {
	case errors.As(err, &tooLong):
		return nil, nil, err
	case err != nil:
		// Route anyway, without cache affinity: a tokenizer outage must
		// not become an outage of the service. It is counted.
		px.rt.metrics.TokenizeErrors.Inc()
	}
	req.TokenIDs = ids
	return req, nil, nil
}

// readBody reads a request body of at most limit bytes within largeBodies.
// Its error is one line, fit to show a client, and comes with the status to
// answer: 413 for a body over limit, 400 for one that could not be read. A
// client that left while it waited gets no answer: status 0.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, maxTokens int) (body []byte, release func(), status int, err error) {
	body, release, err = largeBodies.Read(w, r, limit)
	var tooLarge *reqbody.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, nil, http.StatusRequestEntityTooLarge, fmt.Errorf("router: the request body is larger than %d bytes, the most a prompt within the maximum context length of %d tokens can need", limit, maxTokens)
	case errors.Is(err, reqbody.ErrGone):
		return nil, nil, 0, err
	case err != nil:
		return nil, nil, http.StatusBadRequest, fmt.Errorf("router: read the request body: %s", oneLine(err))
	}
	return body, release, 0, nil
}

func (px *Proxy) route(w http.ResponseWriter, r *http.Request) {
	limit, maxTokens := px.bodyLimit()
	body, release, status, err := readBody(w, r, limit, maxTokens)
	if status == 0 && err != nil {
		return // the client left; nobody to answer
	}
	if err != nil {
		if status == http.StatusRequestEntityTooLarge {
			px.rt.metrics.Refused.WithLabelValues("too_large").Inc()
		}
		writeError(w, status, err.Error())
		return
	}
	req, rest, err := px.request(r, body, maxTokens)
	release()
	if err != nil {
		px.rt.metrics.Refused.WithLabelValues("too_long").Inc()
		writeError(w, http.StatusBadRequest, "router: "+err.Error())
		return
	}
	var tried []*Worker
	var lastErr error
	for {
		b, err := px.rt.Decide(req, tried)
		switch {
		case errors.Is(err, ErrBusy):
			writeError(w, http.StatusServiceUnavailable, "router: "+err.Error())
			return
		case err != nil && lastErr != nil:
			writeError(w, http.StatusBadGateway, "router: "+lastErr.Error())
			return
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, "router: "+err.Error())
			return
		}
		resp, err := px.send(r, b.Worker, body)
		if err != nil {
			b.Release()
			if r.Context().Err() != nil {
				return // the client left; nobody to answer
			}
			// Nothing reached the client yet, so another worker may serve it.
			// This one gets no new requests until its health check passes.
			b.Worker.SetHealthy(false)
			b.Worker.errors.Add(1)
			px.rt.metrics.UpstreamErrors.WithLabelValues(b.Worker.Name).Inc()
			px.rt.retries.Add(1)
			px.rt.metrics.Retries.Inc()
			tried, lastErr = append(tried, b.Worker), err
			if rest != nil { // the retry decides on the whole prompt
				req, rest = &Request{Path: r.URL.Path, Body: body, TokenIDs: rest()}, nil
			}
			continue
		}
		px.stream(w, r, resp, b.Worker, b, rest)
		return
	}
}

// send starts the upstream request; it returns once the worker's response
// headers arrive.
func (px *Proxy) send(r *http.Request, wk *Worker, body []byte) (*http.Response, error) {
	target := *wk.URL
	target.Path = strings.TrimSuffix(target.Path, "/") + r.URL.Path
	target.RawQuery = r.URL.RawQuery
	up, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request for worker %s: %w", wk.Name, err)
	}
	for _, h := range []string{"Content-Type", "Accept", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			up.Header.Set(h, v)
		}
	}
	resp, err := px.client.Do(up)
	if err != nil {
		return nil, fmt.Errorf("worker %s unreachable: %w", wk.Name, err)
	}
	return resp, nil
}

// stream copies resp to the client, flushing after every read so that SSE
// chunks reach the client as the worker sends them. A booking b, if any, is
// told of the first content token and released when the stream ends however
// it ends.
//
// rest, when not nil, tokenizes the rest of the prompt b was decided on; it
// runs once the first token has reached the client (or the stream ends), so
// its CPU time stays off the time to first token, and its result completes
// the booking (Router.Complete).
func (px *Proxy) stream(w http.ResponseWriter, r *http.Request, resp *http.Response, wk *Worker, b *Booking, rest func() []uint32) {
	defer resp.Body.Close()
	sc := &streamScanner{}
	firstToken := func() {} // runs once the first content token is out
	if b != nil {
		defer b.Release()
		complete := func() {}
		// A worker's refusal (say, 400: prompt too long) has no first
		// token and needs no rest: nothing more is tokenized for it.
		if rest != nil && resp.StatusCode/100 == 2 {
			var once sync.Once
			complete = func() { once.Do(func() { px.bg.Go(func() { px.rt.Complete(b, rest()) }) }) }
		}
		defer complete()
		firstToken = func() { b.FirstToken(); complete() }
		w.Header().Set(HeaderOverlap, strconv.Itoa(b.Overlap))
		w.Header().Set(HeaderOracle, strconv.Itoa(b.OracleTokens()))
	}
	copyHeader(w.Header(), resp.Header)
	w.Header().Set(HeaderWorker, wk.Name)
	w.WriteHeader(resp.StatusCode)
	if resp.StatusCode >= 500 {
		wk.errors.Add(1)
		px.rt.metrics.UpstreamErrors.WithLabelValues(wk.Name).Inc()
	}
	// An SSE answer is passed on whole events at a time, so that a stream
	// cut mid-event can still end with an error event a client parses.
	// Workers flush whole events, so this holds nothing back in practice.
	// The scanner reads each read first, since it knows where the last
	// event ended, whatever the line ends; the first content token is
	// noted once the event carrying it has gone out.
	sse := resp.StatusCode/100 == 2 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var pending []byte
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			had := sc.content
			sc.Write(buf[:n])
			out := buf[:n]
			if sse {
				pending = append(pending, out...)
				// After a pass-on below, the event in progress may have
				// started before pending does.
				cut := max(len(pending)-sc.Partial(), 0)
				if len(pending)-cut > maxSSELine {
					cut = len(pending) // not SSE as we know it; pass it on
				}
				out = pending[:cut]
			}
			if len(out) > 0 {
				if _, werr := w.Write(out); werr != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
			}
			if sse {
				pending = append(pending[:0], pending[len(out):]...)
			}
			if sc.content && !had {
				firstToken()
			}
		}
		if err == io.EOF {
			if len(pending) > 0 {
				w.Write(pending)
			}
			had := sc.content
			sc.Close()
			if sc.content && !had {
				firstToken()
			}
			wk.actualHit.Add(int64(sc.cached))
			if b != nil && sc.hasCached && resp.StatusCode/100 == 2 {
				px.rt.ObserveCache(b, sc.cached)
			}
			return
		}
		if r.Context().Err() != nil {
			return
		}
		if err != nil {
			// The worker's stream broke after its headers reached the
			// client, so it is never retried.
			wk.errors.Add(1)
			px.rt.metrics.UpstreamErrors.WithLabelValues(wk.Name).Inc()
			if !sse {
				// Abort ours too, so the client sees a cut body instead
				// of a clean but truncated answer.
				panic(http.ErrAbortHandler)
			}
			// An SSE client reads an error event and stops, as OpenAI's
			// SDKs do on a data line holding "error"; a bare end of
			// stream would read as a short but complete answer. The
			// event that was cut midway is dropped.
			w.Write(apierror.Event(http.StatusBadGateway, fmt.Sprintf("router: worker %s's stream broke mid-answer: %s", wk.Name, oneLine(err))))
			if flusher != nil {
				flusher.Flush()
			}
			return
		}
	}
}

// hopByHop are the headers that describe one connection, not the answer
// (RFC 9110, section 7.6.1), and Content-Length, which the proxy's own
// framing sets: none of them is passed on to the client.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true,
}

// copyHeader passes a worker's answer headers on to the client, Retry-After
// and request ids among them, except the hop-by-hop ones and those the
// worker's Connection header names.
func copyHeader(dst, src http.Header) {
	named := map[string]bool{}
	for _, v := range src.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			named[http.CanonicalHeaderKey(strings.TrimSpace(f))] = true
		}
	}
	for k, vs := range src {
		if hopByHop[k] || named[k] {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

// writeError answers in the OpenAI error shape, which every OpenAI client
// turns into a readable message.
func writeError(w http.ResponseWriter, status int, msg string) {
	apierror.Write(w, status, msg)
}
