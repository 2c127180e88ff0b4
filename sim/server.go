// Package sim is a simulated inference worker. Its Engine is a faithful
// stand-in for one GPU running vLLM or TensorRT-LLM: continuous batching,
// chunked prefill, a paged KV cache with prefix caching and LRU eviction,
// and step times from a roofline model of the profiled GPU. Its Server
// exposes the engine the way a real worker does: the OpenAI API, /tokenize,
// vLLM's /metrics, KV events, and fault injection for demos of failure.
package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/apierror"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/reqbody"
	"github.com/kvlens/kvlens/tokenizer"
)

// DefaultModel is the model name simulated workers report.
const DefaultModel = "meta-llama/Llama-3.1-70B-Instruct-FP8"

// largeBodies is the budget of large request bodies this process reads,
// parses and tokenizes at once: 8 MiB, four bodies at the cap of a 16k-token
// model (see package reqbody).
var largeBodies = reqbody.NewBudget(8 << 20)

// readBody reads a request body of at most limit bytes within largeBodies,
// with the status to answer when it fails: 413 for a body over limit, 400
// for one that could not be read, 503 for a client that left while it
// waited. Its error is one line, fit to show a client.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, release func(), status int, err error) {
	body, release, err = largeBodies.Read(w, r, limit)
	var tooLarge *reqbody.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the request body is larger than %d bytes, the most a prompt within this model's maximum context length can need", limit)
	case errors.Is(err, reqbody.ErrGone):
		return nil, nil, http.StatusServiceUnavailable, errors.New("the client went away while its request waited to be read")
	case err != nil:
		return nil, nil, http.StatusBadRequest, fmt.Errorf("read the request body: %s", oneLine(err))
	}
	return body, release, 0, nil
}

// bodyLimit is the largest request body the worker reads, in bytes.
func (s *Server) bodyLimit() int64 { return tokenizer.BodyLimit(s.prof.MaxModelLen) }

// ServerOptions configure a Server.
type ServerOptions struct {
	// Name names the worker in response ids, such as sim-0.
	Name string
	// Profile is the engine's profile; the zero value means the default.
	Profile Profile
	// Model overrides the profile's model name when set.
	Model string
	// Clock is the runner's clock; nil means the wall clock.
	Clock clock.Clock
	// Events receives each step's KV events; nil drops them.
	Events EventSink
	// Faults are the faults injected from the start.
	Faults Faults
	// Seed makes output lengths and injected faults reproducible.
	Seed uint64
	// Access guards PUT /admin/faults; the zero rule allows changes from
	// this machine only.
	Access access.Rule
	// Tokenizer is the engine's tokenizer and chat template; nil means the
	// embedded one the router uses by default. Another one makes a foreign
	// engine: its prompts, /tokenize answers and KV events carry its own ids.
	Tokenizer *tokenizer.Engine
	// NoCachedTokens leaves prompt_tokens_details out of usage, as vLLM
	// does by default (without --enable-prompt-tokens-details): clients
	// then cannot tell how much of a prompt was cached.
	NoCachedTokens bool
}

// Server is one simulated worker's HTTP API over its own engine.
type Server struct {
	name   string
	model  string
	prof   Profile
	runner *Runner
	faults *faultState
	reg    *prometheus.Registry
	mux    *http.ServeMux
	clk    clock.Clock
	tok    *tokenizer.Engine
	// noCached: see ServerOptions.NoCachedTokens.
	noCached bool

	answerMu  sync.Mutex
	answerRNG *rand.Rand // where sampled answers start (answer.go)
}

// NewServer returns a worker with a fresh engine, running.
func NewServer(opts ServerOptions) (*Server, error) {
	p := opts.Profile
	if p.Name == "" {
		p = MustProfile(DefaultProfile)
	}
	model := opts.Model
	if model == "" {
		model = p.Model
	}
	eng, err := NewEngine(p, Options{Seed: opts.Seed})
	if err != nil {
		return nil, err
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real
	}
	if err := opts.Faults.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		name:     opts.Name,
		model:    model,
		prof:     p,
		runner:   NewRunner(eng, clk, opts.Events),
		reg:      prometheus.NewRegistry(),
		clk:      clk,
		tok:      opts.Tokenizer,
		noCached: opts.NoCachedTokens,
		// Answers draw their own stream, so faults draw theirs unchanged.
		answerRNG: rand.New(rand.NewPCG(opts.Seed, 0x616e73)),
	}
	if s.tok == nil {
		s.tok = tokenizer.Embedded
	}
	s.faults = newFaultState(opts.Seed)
	s.applyFaults(opts.Faults)
	s.runner.obs = newMetrics(s.reg, model, s.runner)

	mux := http.NewServeMux()
	// allowed is the methods each path serves, for the 405 of any other.
	allowed := map[string][]string{}
	handle := func(method, path string, h http.HandlerFunc) {
		mux.Handle(method+" "+path, h)
		allowed[path] = append(allowed[path], method)
	}
	handle("GET", "/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`)
	})
	handle("GET", "/v1/models", s.models)
	handle("POST", "/v1/chat/completions", s.completions(true))
	handle("POST", "/v1/completions", s.completions(false))
	handle("POST", "/tokenize", s.tokenize)
	// vLLM's reset is open to any client, and so is this one, the router
	// among them, wherever it runs; but not to a web page in a browser on
	// the booth machine, which could otherwise wipe the demo's caches.
	handle("POST", "/reset_prefix_cache", access.CrossOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.runner.ResetPrefixCache()
		w.WriteHeader(http.StatusOK)
	})).ServeHTTP)
	handle("GET", "/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP)
	handle("GET", "/inference/v1/config", s.inferenceConfig)
	handle("GET", "/get_server_info", s.serverInfo)
	handle("GET", "/admin/faults", s.getFaults)
	handle("PUT", "/admin/faults", opts.Access.Require(http.HandlerFunc(s.putFaults)).ServeHTTP)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if methods := allowed[r.URL.Path]; methods != nil {
			methodNotAllowed(w, r, methods)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	s.mux = mux
	return s, nil
}

// methodNotAllowed answers a request for a path that serves other methods
// as vLLM does: FastAPI's router refuses it with 405 and an Allow header,
// and vLLM's handler of HTTP exceptions writes the error JSON. A path
// served for GET is served for HEAD too, as FastAPI's and Go's routers
// both do.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, methods []string) {
	allow := make([]string, 0, len(methods)+1)
	for _, m := range methods {
		allow = append(allow, m)
		if m == http.MethodGet {
			allow = append(allow, http.MethodHead)
		}
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("Method Not Allowed: %s takes %s, not %s", r.URL.Path, strings.Join(methods, " or "), r.Method))
}

// models answers as vLLM's GET /v1/models does.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{"list", []modelCard{{ID: s.model, Object: "model", Created: s.clk.Now().Unix(), OwnedBy: "kvlens-sim", Root: s.model, MaxModelLen: s.prof.MaxModelLen}}})
}

// inferenceConfig answers as vLLM's GET /inference/v1/config does, with the
// fields the simulated engine has: scheduler.max_num_seqs is its batch
// capacity, which a router reads.
func (s *Server) inferenceConfig(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ServedModelNames []string `json:"served_model_names"`
		MaxModelLen      int      `json:"max_model_len"`
	}
	type kvCache struct {
		NumGPUBlocks        int  `json:"num_gpu_blocks"`
		EnablePrefixCaching bool `json:"enable_prefix_caching"`
	}
	type scheduler struct {
		MaxNumSeqs           int  `json:"max_num_seqs"`
		MaxNumBatchedTokens  int  `json:"max_num_batched_tokens"`
		EnableChunkedPrefill bool `json:"enable_chunked_prefill"`
	}
	writeJSON(w, http.StatusOK, struct {
		Model     model     `json:"model"`
		KVCache   kvCache   `json:"kv_cache"`
		Scheduler scheduler `json:"scheduler"`
	}{
		model{[]string{s.model}, s.prof.MaxModelLen},
		kvCache{s.prof.KVBlocks, true},
		scheduler{s.prof.MaxBatchSize, s.prof.MaxNumTokens, true},
	})
}

// serverInfo answers as SGLang's GET /get_server_info does, with the server
// arguments the simulated engine has: max_running_requests is its batch
// capacity, which a router reads.
func (s *Server) serverInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		ModelPath          string `json:"model_path"`
		ServedModelName    string `json:"served_model_name"`
		ContextLength      int    `json:"context_length"`
		PageSize           int    `json:"page_size"`
		MaxRunningRequests int    `json:"max_running_requests"`
		ChunkedPrefillSize int    `json:"chunked_prefill_size"`
		MaxTotalNumTokens  int    `json:"max_total_num_tokens"`
	}{
		s.model, s.model, s.prof.MaxModelLen, s.prof.BlockSize,
		s.prof.MaxBatchSize, s.prof.MaxNumTokens, s.prof.KVBlocks * s.prof.BlockSize,
	})
}

// Runner returns the worker's engine runner.
func (s *Server) Runner() *Runner { return s.runner }

// Close stops the worker's engine.
func (s *Server) Close() { s.runner.Close() }

// ServeHTTP routes the worker's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// genRequest is a parsed generation request, chat or plain completion.
type genRequest struct {
	ids       []uint32 // the prompt's tokens
	maxTokens int
	stream    bool
	usage     bool // stream_options.include_usage
	ignoreEOS bool // vLLM's sampling option: run to max_tokens
	greedy    bool // temperature 0: one prompt, one answer
	n         int  // choices, each its own sequence in the engine
	// answers holds, for each choice, the tokens its answer is made of,
	// drawn from the chat's text (answer.go), and pieces their texts as
	// the worker streams them; both nil for the prose ring.
	answers [][]uint32
	pieces  [][]string
}

// chatRequest is the subset of an OpenAI chat request the worker reads.
type chatRequest struct {
	Model               string                `json:"model"`
	Messages            []tokenizer.Message   `json:"messages"`
	MaxTokens           *int                  `json:"max_tokens"`
	MaxCompletionTokens *int                  `json:"max_completion_tokens"`
	Stream              bool                  `json:"stream"`
	StreamOptions       *openai.StreamOptions `json:"stream_options"`
	IgnoreEOS           bool                  `json:"ignore_eos"`
	// Temperature 0 decodes greedily; absent, the engine samples, as
	// OpenAI's default of 1 says.
	Temperature *float64 `json:"temperature"`
	// N is how many choices to answer with; absent or null is 1.
	N *int `json:"n"`
	// UseBeamSearch asks vLLM for beam search, which the worker refuses.
	UseBeamSearch bool `json:"use_beam_search"`

	// maxTokens is the answer's cap in force (see resolveMaxTokens), or
	// restOfContext when the request sets none.
	maxTokens int
	// n is the number of choices (see checkChoices).
	n int
}

// parseChatRequest decodes and checks a chat request body. Its errors are one
// line, fit to show a client.
func parseChatRequest(body []byte) (*chatRequest, error) {
	var req chatRequest
	if err := decodeBody(bytes.NewReader(body), &req, false); err != nil {
		return nil, placeMessageError(body, err)
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("messages must hold at least one message")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "developer", "tool":
		default:
			return nil, fmt.Errorf("messages[%d].role %q is not a chat role", i, m.Role)
		}
	}
	// vLLM reads max_completion_tokens, OpenAI's newer name, whenever it
	// is given, and the deprecated max_tokens only otherwise.
	limit := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		limit = req.MaxCompletionTokens
	}
	var err error
	if req.maxTokens, err = resolveMaxTokens(limit, restOfContext); err != nil {
		return nil, err
	}
	if err := checkTemperature(req.Temperature); err != nil {
		return nil, err
	}
	if req.n, err = checkChoices(req.N, req.Temperature, req.UseBeamSearch); err != nil {
		return nil, err
	}
	if err := checkStreamOptions(body, req.Stream, req.StreamOptions != nil); err != nil {
		return nil, err
	}
	return &req, nil
}

// completionRequest is the subset of an OpenAI completion request the worker reads.
type completionRequest struct {
	Model         string                `json:"model"`
	Prompt        json.RawMessage       `json:"prompt"`
	MaxTokens     *int                  `json:"max_tokens"`
	Stream        bool                  `json:"stream"`
	StreamOptions *openai.StreamOptions `json:"stream_options"`
	IgnoreEOS     bool                  `json:"ignore_eos"`
	Temperature   *float64              `json:"temperature"`
	N             *int                  `json:"n"`
	UseBeamSearch bool                  `json:"use_beam_search"`

	// text is the prompt given as text; ids the prompt given as token
	// ids, nil for text.
	text string
	ids  []uint32
	// maxTokens is the answer's cap in force (see resolveMaxTokens).
	maxTokens int
	// n is the number of choices (see checkChoices).
	n int
}

// parseCompletionRequest decodes and checks a completion request body; the
// prompt is one prompt in any of the OpenAI API's shapes (see promptOf).
func parseCompletionRequest(body []byte) (*completionRequest, error) {
	var req completionRequest
	if err := decodeBody(bytes.NewReader(body), &req, false); err != nil {
		return nil, err
	}
	var err error
	if req.text, req.ids, err = promptOf(req.Prompt); err != nil {
		return nil, err
	}
	def := completionMaxTokens
	if req.MaxTokens == nil && nullMaxTokens(body) {
		def = restOfContext
	}
	if req.maxTokens, err = resolveMaxTokens(req.MaxTokens, def); err != nil {
		return nil, err
	}
	if err := checkTemperature(req.Temperature); err != nil {
		return nil, err
	}
	if req.n, err = checkChoices(req.N, req.Temperature, req.UseBeamSearch); err != nil {
		return nil, err
	}
	if err := checkStreamOptions(body, req.Stream, req.StreamOptions != nil); err != nil {
		return nil, err
	}
	return &req, nil
}

// promptOf reads a completion's prompt as vLLM does: a string, a list of
// token ids, or a list holding one of either (tokenizer.CompletionPrompt).
// ids is nil for a text prompt. A batch of several prompts is refused: a
// simulated worker answers one prompt per request, where vLLM would answer
// n choices for each prompt.
func promptOf(raw json.RawMessage) (text string, ids []uint32, err error) {
	text, ids, ok := tokenizer.CompletionPrompt(raw)
	switch {
	case ok && ids != nil:
		return "", ids, nil
	case ok && text != "":
		return text, nil, nil
	case ok:
		return "", nil, errors.New("prompt must not be empty")
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		switch {
		case len(list) > 1 && (list[0][0] == '"' || list[0][0] == '['):
			return "", nil, fmt.Errorf("prompt is a batch of %d prompts; a simulated worker answers one prompt per request", len(list))
		case len(list) == 0 || string(list[0]) == "[]":
			return "", nil, errors.New("prompt must not be empty")
		}
	}
	return "", nil, errors.New("prompt must be a non-empty string, a list of token ids (whole numbers from 0), or a list of one of either")
}

// completionMaxTokens is the cap on a completion whose request has no
// max_tokens, in tokens: vLLM's CompletionRequest defaults the field to 16,
// as OpenAI's legacy completions API does. A max_tokens given as null
// replaces that default with None, and vLLM's get_max_tokens then caps the
// answer at the rest of the context, as a chat's (restOfContext).
const completionMaxTokens = 16

// nullMaxTokens reports whether body, a JSON object, gives max_tokens as
// null rather than leaving it out; it copies nothing else of the body.
func nullMaxTokens(body []byte) bool {
	var f struct {
		MaxTokens json.RawMessage `json:"max_tokens"`
	}
	return json.Unmarshal(body, &f) == nil && string(f.MaxTokens) == "null"
}

// restOfContext stands for a chat's cap when the request sets neither
// max_tokens nor max_completion_tokens: vLLM then lets the answer run to
// the end of the context, max_model_len less the prompt's tokens, which
// only the tokenized prompt tells (see contextLeft).
const restOfContext = 0

// resolveMaxTokens returns the cap on an answer's length: n, or def when n
// is absent or null. A cap below 1 is refused, in vLLM's words: its
// SamplingParams refuses any max_tokens under 1, 0 among them, with a 400
// (vllm/sampling_params.py, _verify_args).
func resolveMaxTokens(n *int, def int) (int, error) {
	switch {
	case n == nil:
		return def, nil
	case *n < 1:
		return 0, tooFewTokens(*n)
	}
	return *n, nil
}

// tooFewTokens is SamplingParams' refusal of a cap under 1, which names
// max_tokens whichever field set it.
func tooFewTokens(n int) error {
	return &validationError{fmt.Sprintf("max_tokens must be at least 1, got %d.", n), "max_tokens", strconv.Itoa(n)}
}

// contextLeft is a chat's cap when it set none: what the prompt of
// promptLen tokens leaves of the model's context. vLLM takes the cap so,
// and a prompt that fills the context leaves a cap of 0, which its
// SamplingParams refuses as any max_tokens of 0.
func contextLeft(maxModelLen, promptLen int) (int, error) {
	if left := maxModelLen - promptLen; left >= 1 {
		return left, nil
	}
	return 0, tooFewTokens(maxModelLen - promptLen)
}

// checkTemperature refuses a temperature outside [0, 2], in vLLM's words
// (its SamplingParams checks the same range, and prints the number as
// Python prints a float); absent is OpenAI's default.
func checkTemperature(t *float64) error {
	switch {
	case t == nil:
		return nil
	case *t < 0:
		v := pyFloat(*t)
		return &validationError{"temperature must be non-negative, got " + v + ".", "temperature", v}
	case *t > 2:
		v := pyFloat(*t)
		return &validationError{"temperature must be in [0, 2], got " + v + ".", "temperature", v}
	}
	return nil
}

// maxChoices is the most choices (n) one request may ask a worker for.
// vLLM's limit is VLLM_MAX_N_SEQUENCES, 16384 by default; a simulated
// worker holds each choice's copy of the prompt, up to 64 KiB at its
// 16k-token context, and a smaller cap keeps one request from holding
// gigabytes of a booth machine's memory. A deployment may set vLLM's
// limit as low.
const maxChoices = 128

// checkChoices returns how many choices a request asks for, 1 when n is
// absent or null. It refuses as vLLM's SamplingParams does, in its words:
// an n under 1, and more than one choice with greedy decoding
// (temperature 0), which would answer one prompt with n copies of one
// answer; and beyond vLLM, an n past maxChoices, and beam search, which
// the worker does not run: answering sampled choices as beams would pass
// off another workload, one of many short steps per beam, as vLLM's.
func checkChoices(n *int, temperature *float64, beam bool) (int, error) {
	if beam {
		return 0, errors.New("use_beam_search: a simulated worker does not run beam search; leave it out or false")
	}
	if n == nil {
		return 1, nil
	}
	switch {
	case *n < 1:
		return 0, fmt.Errorf("n must be at least 1, got %d.", *n)
	case *n > maxChoices:
		return 0, fmt.Errorf("n must be at most %d, got %d: a simulated worker's limit, where vLLM's is VLLM_MAX_N_SEQUENCES, 16384 by default.", maxChoices, *n)
	case *n > 1 && isZero(temperature):
		return 0, fmt.Errorf("n must be 1 when using greedy sampling, got %d.", *n)
	}
	return *n, nil
}

// checkStreamOptions refuses stream_options on a request that does not
// stream, in vLLM's words (its request models' validate_stream_options).
// vLLM tests the options as Python tests a dict, so an empty object passes
// as null does; given says the body's stream_options are neither absent
// nor null. Learning whether they are empty decodes the body again, which
// only a request that gives options without streaming pays.
func checkStreamOptions(body []byte, stream, given bool) error {
	if stream || !given {
		return nil
	}
	var raw struct {
		StreamOptions map[string]json.RawMessage `json:"stream_options"`
	}
	if json.Unmarshal(body, &raw) == nil && len(raw.StreamOptions) == 0 {
		return nil
	}
	return &validationError{msg: "Stream options can only be defined when `stream=True`.", param: "stream_options"}
}

// isZero says whether an optional number was given as 0.
func isZero(v *float64) bool { return v != nil && *v == 0 }

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// completions serves /v1/chat/completions (chat) or /v1/completions.
func (s *Server) completions(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g, status, err := s.parseGen(w, r, chat)
		if err != nil {
			writeErr(w, status, err)
			return
		}
		fault := s.faults.draw()
		switch fault {
		case fault503:
			writeError(w, http.StatusServiceUnavailable, "injected fault: the worker is overloaded, please retry later")
			return
		case fault429:
			writeError(w, http.StatusTooManyRequests, "injected fault: too many requests")
			return
		case fault500:
			writeError(w, http.StatusInternalServerError, "injected fault: internal engine error")
			return
		}
		// As vLLM does, each choice is a request of its own in the engine,
		// with one prompt: the engine reads it and never writes it, and
		// its prefix cache serves each choice what the others computed.
		// wake is told whenever any choice has tokens or ends.
		wake := make(chan struct{}, 1)
		notify := func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		sts := make([]*Stream, 0, g.n)
		for i := range g.n {
			req := Request{Prompt: g.ids, MaxTokens: g.maxTokens, Greedy: g.greedy}
			if i < len(g.answers) {
				req.Answer = g.answers[i]
			}
			if g.ignoreEOS {
				req.OutputTokens = g.maxTokens
			}
			st, err := s.runner.SubmitNotify(req, notify)
			if err != nil {
				for _, st := range sts {
					s.runner.Cancel(st.ID)
				}
				writeError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), "sim: "))
				return
			}
			sts = append(sts, st)
		}
		g.ids = nil // the engine owns them now
		s.serveStream(w, r, sts, wake, g, chat, fault == faultCut)
	}
}

// parseGen reads, checks and tokenizes a generation request, with the
// error's status: 413 for a body over bodyLimit, 400 for anything else
// wrong, among them a prompt longer than the model's maximum context
// length, which is refused on its bytes when it can be and otherwise as
// soon as tokenizing passes the limit, so that it costs at most
// max_model_len tokens of work. The body, the decoded messages and the
// rendered prompt are dropped before it returns: only token ids go on.
func (s *Server) parseGen(w http.ResponseWriter, r *http.Request, chat bool) (genRequest, int, error) {
	body, release, status, err := readBody(w, r, s.bodyLimit())
	if err != nil {
		return genRequest{}, status, err
	}
	defer release()
	limit := s.prof.MaxModelLen
	var g genRequest
	var prompt string
	var msgs []tokenizer.Message
	// maxOut is the answer's cap the request set, 0 for none: as in vLLM,
	// the prompt may then fill the context less that cap, maxIn tokens.
	var maxOut, maxIn int
	// capOf checks the cap, set by the field named param, against the
	// context before any prompt is read, as vLLM's renderer does.
	capOf := func(maxTokens int, param string) error {
		if maxOut = maxTokens; maxOut > limit {
			return tooManyOutputTokens(param, maxOut, limit)
		}
		maxIn = limit - maxOut
		return nil
	}
	if chat {
		if err := tokenizer.CheckPieces(body, limit); err != nil {
			return genRequest{}, http.StatusBadRequest, err
		}
		req, err := parseChatRequest(body)
		if err != nil {
			return genRequest{}, http.StatusBadRequest, err
		}
		param := "max_tokens"
		if req.MaxCompletionTokens != nil {
			param = "max_completion_tokens"
		}
		if err := capOf(req.maxTokens, param); err != nil { // restOfContext is 0
			return genRequest{}, http.StatusBadRequest, err
		}
		if err := tokenizer.CheckBytes(s.tok.RenderBytes(req.Messages), maxIn); err != nil {
			return genRequest{}, http.StatusBadRequest, contextError(err, maxOut, limit)
		}
		if err := s.checkModel(req.Model); err != nil {
			return genRequest{}, http.StatusNotFound, err
		}
		if prompt, err = s.tok.Render(req.Messages); err != nil {
			return genRequest{}, http.StatusBadRequest, err
		}
		g = genRequest{maxTokens: req.maxTokens, stream: req.Stream,
			usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage, ignoreEOS: req.IgnoreEOS,
			greedy: isZero(req.Temperature), n: req.n}
		msgs = req.Messages
	} else {
		req, err := parseCompletionRequest(body)
		if err != nil {
			return genRequest{}, http.StatusBadRequest, err
		}
		if err := s.checkModel(req.Model); err != nil {
			return genRequest{}, http.StatusNotFound, err
		}
		if err := capOf(req.maxTokens, "max_tokens"); err != nil {
			return genRequest{}, http.StatusBadRequest, err
		}
		prompt = req.text
		g = genRequest{maxTokens: req.maxTokens, stream: req.Stream,
			usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage, ignoreEOS: req.IgnoreEOS,
			greedy: isZero(req.Temperature), n: req.n}
		if req.ids != nil {
			// Token ids are the prompt as they are: vLLM neither tokenizes
			// them again nor adds special tokens, and refuses ids past its
			// tokenizer's vocabulary.
			if err := s.checkIDs(req.ids, maxIn); err != nil {
				return genRequest{}, http.StatusBadRequest, contextError(err, maxOut, limit)
			}
			g.ids = req.ids
			return g, 0, nil
		}
	}
	if chat {
		// The template wrote the special tokens; vLLM adds none.
		g.ids, err = s.tok.EncodeLimit(prompt, maxIn)
	} else {
		g.ids, err = s.tok.EncodePrompt(prompt, maxIn)
	}
	if err != nil {
		return genRequest{}, http.StatusBadRequest, contextError(err, maxOut, limit)
	}
	if g.maxTokens == restOfContext {
		if g.maxTokens, err = contextLeft(limit, len(g.ids)); err != nil {
			return genRequest{}, http.StatusBadRequest, err
		}
	}
	// Each sampled choice draws where its answer starts, as each of vLLM's
	// does its own tokens; a chat with no text to draw from leaves them all
	// to the prose ring.
	for range g.n {
		text := answerText(msgs, g.maxTokens, s.pick(), g.greedy)
		if text == "" {
			break
		}
		answer := s.tok.Encode(text)
		pieces := make([]string, len(answer))
		for i := range answer {
			pieces[i] = s.tok.Decode(answer[i : i+1])
		}
		g.answers = append(g.answers, answer)
		g.pieces = append(g.pieces, pieces)
	}
	return g, 0, nil
}

// checkIDs refuses a prompt of token ids as vLLM does: longer than
// maxIn, what the context leaves the prompt, or holding an id larger than
// the tokenizer's largest, in its words ("Token id N is out of
// vocabulary").
func (s *Server) checkIDs(ids []uint32, maxIn int) error {
	if err := tokenizer.CheckIDs(ids, maxIn); err != nil {
		return err
	}
	if top, most := slices.Max(ids), s.tok.MaxTokenID(); top > most {
		return fmt.Errorf("Token id %d is out of vocabulary (this model's largest is %d)", top, most)
	}
	return nil
}

// pick draws where a sampled answer starts.
func (s *Server) pick() uint64 {
	s.answerMu.Lock()
	defer s.answerMu.Unlock()
	return s.answerRNG.Uint64()
}

// checkModel refuses a request for a model the worker does not serve, as
// vLLM does (404, "The model `x` does not exist."). A request that names
// no model gets the served one, as vLLM's does.
func (s *Server) checkModel(name string) error {
	if name == "" || name == s.model {
		return nil
	}
	return fmt.Errorf("The model `%s` does not exist.", name)
}

// serveStream waits for the engine's tokens of each choice's stream, sts
// in index order, and writes them out, as SSE chunks or one response at the
// end; wake is told whenever any of them has news. cut aborts the
// connection halfway.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, sts []*Stream, wake <-chan struct{}, g genRequest, chat, cut bool) {
	id := fmt.Sprintf("cmpl-%s-%d", s.name, sts[0].ID)
	if chat {
		id = "chat" + id
	}
	created := s.clk.Now().Unix()
	cutAt := -1
	if cut {
		// Cut before a token the answer surely reaches: its natural length
		// is at least the profile's OutputMin.
		limit := g.maxTokens
		if p := s.runner.Profile(); p.OutputMin > 0 && !g.ignoreEOS {
			limit = min(limit, p.OutputMin)
		}
		cutAt = s.faults.intN(limit)
	}
	cancel := func() {
		for _, st := range sts {
			s.runner.Cancel(st.ID)
		}
	}
	enc := newChunkWriter(w, id, s.model, created, chat)
	if g.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
	}
	texts := make([]strings.Builder, len(sts))
	fins := make([]*Finished, len(sts))
	var toks []Token
	sent, ended := 0, 0
	opened := false // a chat stream's role chunks are out
	for ended < len(sts) {
		select {
		case <-r.Context().Done():
			cancel()
			return
		case <-wake:
		}
		for i, st := range sts {
			if fins[i] != nil {
				continue
			}
			var fin *Finished
			toks, fin = st.Take(toks[:0])
			if g.stream && chat && !opened && len(toks) > 0 {
				// vLLM opens a chat stream when the engine's first output
				// is out: a chunk with the role for each choice, then the
				// tokens, in one go.
				for j := range sts {
					enc.role(j)
				}
				opened = true
			}
			for k, t := range toks {
				if sent == cutAt {
					// An injected stream cut: the connection dies
					// mid-answer, as when a worker crashes.
					cancel()
					if g.stream {
						enc.flush()
					}
					panic(http.ErrAbortHandler)
				}
				piece := pieceText(t.Token)
				if i < len(g.pieces) && len(g.pieces[i]) > 0 {
					piece = g.pieces[i][t.Index%len(g.pieces[i])]
				}
				if g.stream {
					reason := ""
					if fin != nil && k == len(toks)-1 {
						reason = finishReason(fin)
					}
					enc.token(i, piece, reason)
				} else {
					texts[i].WriteString(piece)
				}
				sent++
			}
			if fin == nil {
				continue
			}
			fins[i] = fin
			ended++
			if g.stream && len(toks) == 0 {
				enc.finish(i, finishReason(fin))
			}
		}
		if g.stream {
			enc.flush()
		}
	}
	// Usage counts the one prompt once and every choice's tokens, as
	// vLLM's does; the cache's hits are those of the first choice.
	u := usage{PromptTokens: fins[0].PromptTokens}
	for _, f := range fins {
		u.CompletionTokens += f.CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if !s.noCached {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: fins[0].CachedTokens}
	}
	if !g.stream {
		s.writeWhole(w, id, created, chat, texts, fins, u)
		return
	}
	if g.usage {
		enc.usage(u)
	}
	enc.done()
}

// finishReason is an ended answer's finish_reason: length when it stopped
// at max_tokens, stop when it ended by itself.
func finishReason(f *Finished) string {
	if f.Length {
		return "length"
	}
	return "stop"
}

func (s *Server) writeWhole(w http.ResponseWriter, id string, created int64, chat bool, texts []strings.Builder, fins []*Finished, u usage) {
	if chat {
		choices := make([]chatChoice, len(fins))
		for i, f := range fins {
			choices[i] = chatChoice{Index: i, Message: chatMessage{Role: "assistant", Content: texts[i].String(), ToolCalls: []any{}}, FinishReason: finishReason(f)}
		}
		writeJSON(w, http.StatusOK, chatAnswer{
			ID: id, Object: "chat.completion", Created: created, Model: s.model,
			Choices: choices, Usage: u,
		})
		return
	}
	choices := make([]textChoice, len(fins))
	for i, f := range fins {
		choices[i] = textChoice{Index: i, Text: texts[i].String(), FinishReason: finishReason(f)}
	}
	writeJSON(w, http.StatusOK, textAnswer{
		ID: id, Object: "text_completion", Created: created, Model: s.model,
		Choices: choices, Usage: u,
	})
}

// chunkWriter writes SSE chunks by hand: a worker streams thousands of them
// a second, and the fixed parts of each are formatted once per request.
// Each chunk holds one choice, by its index, as vLLM's do.
type chunkWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	head    string // `data: {"id":...,"choices":[{"index":`
	chat    bool
	buf     []byte
}

// openChunk is the tail of a chunk whose choice goes on.
const openChunk = `"finish_reason":null}]}` + "\n\n"

func newChunkWriter(w http.ResponseWriter, id, model string, created int64, chat bool) *chunkWriter {
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	f, _ := w.(http.Flusher)
	return &chunkWriter{
		w: w, flusher: f, chat: chat,
		head: fmt.Sprintf(`data: {"id":%s,"object":%q,"created":%d,"model":%s,"choices":[{"index":`, jsonString(id), object, created, jsonString(model)),
	}
}

// start begins a chunk of choice i.
func (c *chunkWriter) start(i int) {
	c.buf = append(c.buf, c.head...)
	c.buf = strconv.AppendInt(c.buf, int64(i), 10)
	c.buf = append(c.buf, ',')
}

// end closes a chunk: reason is the choice's finish_reason, or "" while
// it goes on.
func (c *chunkWriter) end(reason string) {
	if reason == "" {
		c.buf = append(c.buf, openChunk...)
		return
	}
	// Reasons are the engine's own words (stop, length): nothing to escape.
	c.buf = append(c.buf, `"finish_reason":"`...)
	c.buf = append(c.buf, reason...)
	c.buf = append(c.buf, "\"}]}\n\n"...)
}

// role writes a chat's opening chunk for choice i, as vLLM sends one for
// every choice when the first tokens are out and before them: the
// assistant's role and empty content.
func (c *chunkWriter) role(i int) {
	c.start(i)
	c.buf = append(c.buf, `"delta":{"role":"assistant","content":""},`...)
	c.buf = append(c.buf, openChunk...)
}

// token writes a piece of choice i's text; reason is its finish_reason
// when the piece is the choice's last, as vLLM puts the end on the chunk
// with the last token, or "" when more follow.
func (c *chunkWriter) token(i int, piece, reason string) {
	c.start(i)
	if c.chat {
		c.buf = append(c.buf, `"delta":{"content":`...)
	} else {
		c.buf = append(c.buf, `"text":`...)
	}
	c.buf = append(c.buf, jsonString(piece)...)
	if c.chat {
		c.buf = append(c.buf, '}')
	}
	c.buf = append(c.buf, ',')
	c.end(reason)
}

// finish ends choice i with reason in a chunk with no text, for an end
// that comes after its last token was written: the runner hands a
// request's last token and its end over together, so this is a fallback.
func (c *chunkWriter) finish(i int, reason string) {
	c.start(i)
	if c.chat {
		c.buf = append(c.buf, `"delta":{},`...)
	} else {
		c.buf = append(c.buf, `"text":"",`...)
	}
	c.end(reason)
}

func (c *chunkWriter) usage(u usage) {
	head, _, _ := strings.Cut(c.head, `"choices":`)
	b, _ := json.Marshal(u)
	c.buf = append(c.buf, head...)
	c.buf = append(c.buf, `"choices":[],"usage":`...)
	c.buf = append(c.buf, b...)
	c.buf = append(c.buf, "}\n\n"...)
}

func (c *chunkWriter) done() {
	c.buf = append(c.buf, "data: [DONE]\n\n"...)
	c.flush()
}

func (c *chunkWriter) flush() {
	if len(c.buf) == 0 {
		return
	}
	c.w.Write(c.buf)
	c.buf = c.buf[:0]
	if c.flusher != nil {
		c.flusher.Flush()
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tokenizeRequest is vLLM's /tokenize body: a prompt or chat messages.
type tokenizeRequest struct {
	Model    string              `json:"model"`
	Prompt   *string             `json:"prompt"`
	Messages []tokenizer.Message `json:"messages"`
	// AddGenerationPrompt ends rendered messages with the assistant's
	// header; vLLM's default is true.
	AddGenerationPrompt *bool `json:"add_generation_prompt"`
	// AddSpecialTokens adds the tokenizer's BOS (a model's own tokenizer's);
	// vLLM's default is true for a prompt, false for messages, whose
	// template writes its own.
	AddSpecialTokens *bool `json:"add_special_tokens"`
}

// parseTokenizeRequestWith decodes a /tokenize body and returns the text
// to tokenize: the prompt, or the messages rendered with eng's chat
// template; special says whether to add special tokens.
func parseTokenizeRequestWith(body []byte, eng *tokenizer.Engine) (text string, special bool, err error) {
	var req tokenizeRequest
	if err := decodeBody(bytes.NewReader(body), &req, false); err != nil {
		return "", false, placeMessageError(body, err)
	}
	orDefault := func(b *bool, def bool) bool {
		if b == nil {
			return def
		}
		return *b
	}
	switch {
	case req.Prompt != nil && len(req.Messages) > 0:
		return "", false, errors.New("give either prompt or messages, not both")
	case req.Prompt != nil:
		return *req.Prompt, orDefault(req.AddSpecialTokens, true), nil
	case len(req.Messages) > 0:
		text, err := eng.Apply(req.Messages, orDefault(req.AddGenerationPrompt, true))
		return text, orDefault(req.AddSpecialTokens, false), err
	}
	return "", false, errors.New("give a prompt or messages to tokenize")
}

// tokenize serves vLLM's POST /tokenize. Like vLLM it refuses a prompt
// longer than the model's maximum context length, here without tokenizing
// more than that.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	body, release, status, err := readBody(w, r, s.bodyLimit())
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	defer release()
	if err := tokenizer.CheckPieces(body, s.prof.MaxModelLen); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	text, special, err := parseTokenizeRequestWith(body, s.tok)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	encode := s.tok.EncodeLimit
	if special {
		encode = s.tok.EncodePrompt
	}
	ids, err := encode(text, s.prof.MaxModelLen)
	if err != nil {
		// vLLM's /tokenize checks the prompt as a generation asking for
		// no output tokens.
		writeErr(w, http.StatusBadRequest, contextError(err, 0, s.prof.MaxModelLen))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"tokens": ids, "count": len(ids), "max_model_len": s.runner.Profile().MaxModelLen,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers in the OpenAI error shape, which every OpenAI client
// turns into a readable message.
func writeError(w http.ResponseWriter, status int, msg string) {
	apierror.Write(w, status, msg)
}
