// Package web serves the dashboard: the page, its controls, the websocket
// that pushes live figures, the Prometheus endpoint and the OpenAI proxy.
package web

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/dynamo"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
)

//go:embed static
var staticFiles embed.FS

// Loadgen is what the dashboard drives and reads.
type Loadgen interface {
	Start()
	Stop()
	SetConcurrency(n int) error
	Snapshot() loadgen.Snapshot
	// Reset empties the metrics window, so figures after a cache reset are
	// not mixed with those before.
	Reset()
	// Conversations lists live and recent conversations, newest first.
	Conversations() []loadgen.ConversationSummary
	// Conversation returns one conversation's log.
	Conversation(id uint64) (loadgen.ConversationLog, bool)
}

// Options configures the dashboard.
type Options struct {
	// Workers describes the fleet in plain words.
	Workers string
	// Profile is the workers' engine profile, or their endpoints.
	Profile string
	// Model is the model the workers serve.
	Model string
	// BlockSize is the workers' KV block size, in tokens.
	BlockSize int
	// SliderMin, SliderMax and SliderStep bound the concurrency slider; the
	// server refuses values off that scale.
	SliderMin, SliderMax, SliderStep int
	// SLOTTFT and SLOTPOT are the service-level objectives drawn and coloured.
	SLOTTFT, SLOTPOT time.Duration
	// Gatherer serves /metrics; nil means the default registry.
	Gatherer prometheus.Gatherer
	// API, when not nil, serves /v1/* (the router proxy).
	API http.Handler
	// Describe turns a policy name into plain words.
	Describe func(string) string
	// Access decides who may change the demo. Its Hosts, when nil, become
	// Hosts below.
	Access Access
	// Hosts are the names the dashboard answers to (its Host header must be
	// one); nil means this machine's names and PublicURL's host.
	Hosts *access.Hosts
	// PublicURL is the address visitors' phones can open (shown as a QR
	// code); empty hides the code.
	PublicURL string
	// Frontend, when set, is a Dynamo frontend whose own figures the state
	// reports beside the load generator's.
	Frontend interface{ Stats() dynamo.Stats }
	// Baseline is the stored set the tiles and the overlay chart compare
	// with; nil shows dashes.
	Baseline *baselines.Set
	// Gauges, when not nil, returns each worker's own queue and KV-cache
	// figures by worker name; GaugeSource says where they come from.
	Gauges      func() map[string]Gauge
	GaugeSource string
	// Faults, when set, injects faults into the simulated fleet.
	Faults FaultInjector
	// Simulator, when set, runs "simulate this curve" from the dashboard.
	Simulator Simulator
	// Record, when set, receives every 1 Hz chart frame (JSON, with the
	// marks made since the last one), for the session's recording.
	Record func(frame []byte)
	// Recordings, when not nil, is the store the Recordings page lists and
	// replays; nil shows the page saying recordings are off, and why
	// (RecordingsOff).
	Recordings    Recordings
	RecordingsOff string
	// CurrentRecording is this session's recording id (0 for none): it is
	// shown as recording now and cannot be deleted.
	CurrentRecording int64
	// Viewers bounds the dashboard's websocket viewers: how many, how idle
	// and how far behind; zero fields take their defaults.
	Viewers HubLimits
	// Registerer, when not nil, receives the dashboard's own metrics (the
	// websocket viewers).
	Registerer prometheus.Registerer
	// Ready reports why the demo cannot serve load yet, such as no healthy
	// worker; nil means ready. A nil Ready is always ready.
	Ready func() error
	// Blind says why KV routing cannot see the workers' caches (the
	// router's blindness detector); "" when it can. /readyz names it, and
	// the header shows it in red. Nil never warns.
	Blind func() string
}

// Server is the dashboard's HTTP side.
type Server struct {
	gen  Loadgen
	rt   Router
	opts Options
	hub  *Hub
	// rule is Options.Access with the dashboard's hosts: who may change it.
	rule access.Rule
	// history holds the chart's last 5 minutes, for browsers that connect late.
	history history
	// fault is the fault in force, as /api/fault takes it; "" means none.
	faultInForce atomic.Pointer[string]
	// baseline is the set the tiles and the overlay compare with; it starts
	// as Options.Baseline and changes when a simulated curve is put in use.
	baseline atomic.Pointer[baselines.Set]
}

// New returns a dashboard over gen and rt.
func New(gen Loadgen, rt Router, opts Options) *Server {
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.Describe == nil {
		opts.Describe = func(s string) string { return s }
	}
	if opts.Hosts == nil {
		// A public URL that does not parse adds no name; the dashboard
		// still answers on this machine's own.
		h, err := access.MachineHosts(opts.PublicURL)
		if err != nil {
			h, _ = access.MachineHosts()
		}
		opts.Hosts = h
	}
	s := &Server{gen: gen, rt: rt, opts: opts, rule: opts.Access}
	if s.rule.Hosts == nil {
		s.rule.Hosts = opts.Hosts
	}
	s.baseline.Store(opts.Baseline)
	s.hub = NewHub(s.frames, s.hello, opts.Viewers, opts.Registerer)
	s.hub.upgrader.CheckOrigin = s.wsOrigin
	return s
}

// Rule is who may change the demo, with the dashboard's hosts: the router's
// admin API and the simulated workers are guarded by the same.
func (s *Server) Rule() access.Rule { return s.rule }

// base returns the baseline set in use; nil when there is none.
func (s *Server) base() *baselines.Set { return s.baseline.Load() }

// Hub returns the websocket hub, which the caller runs and closes.
func (s *Server) Hub() *Hub { return s.hub }

// Handler returns the dashboard's routes. Every route a browser uses
// answers only to the dashboard's own hosts (DNS rebinding is refused) and
// takes changes only from its own origin; /v1, /metrics, /healthz and
// /readyz, which machines call under whatever name they know, are open.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	r.Get("/readyz", s.ready)
	r.Handle("/metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	if s.opts.API != nil {
		r.Handle("/v1/*", s.opts.API)
	}
	r.Group(func(r chi.Router) {
		r.Use(s.opts.Hosts.Guard, access.CrossOrigin)
		r.Get("/", s.page)
		r.Get("/ws", s.hub.ServeWS)
		r.Post("/api/login", s.login)
		r.Group(func(r chi.Router) {
			r.Use(s.rule.Require)
			r.Post("/api/start", s.start)
			r.Post("/api/stop", s.stop)
			r.Post("/api/concurrency", s.concurrency)
			r.Post("/api/simulate", s.simulate)
			r.Post("/api/fault", s.fault)
			r.Post("/api/simulate/use", s.useSimulated)
			r.Post("/api/mode", s.mode)
			r.Post("/api/reset", s.reset)
			r.Post("/recordings/{id}/delete", s.deleteRecording)
		})
		r.Get("/recordings", s.recordingsPage)
		r.Get("/recordings/{id}", s.replayPage)
		r.Get("/recordings/{id}/frames", s.recordingFrames)
		r.Get("/recordings/{id}/export.csv", s.exportRecording("csv"))
		r.Get("/recordings/{id}/export.json", s.exportRecording("json"))
		r.Get("/how", s.how)
		r.Get("/conversations", s.conversationList)
		r.Get("/conversations/{id}", s.conversationLog)
		r.Get("/qr.png", s.qr)
		r.Get("/api/state", s.state)
		static, _ := fs.Sub(staticFiles, "static")
		r.Handle("/static/*", http.StripPrefix("/static/", http.FileServerFS(static)))
		// Pages link /static/favicon.svg, but some clients ask for
		// /favicon.ico whatever a page links.
		r.Get("/favicon.ico", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "image/svg+xml")
			w.Header().Set("Cache-Control", "max-age=86400")
			http.ServeFileFS(w, r, static, "favicon.svg")
		})
	})
	return r
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	snap := s.gen.Snapshot()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	operator := s.rule.IsOperator(r)
	slo := baselines.SLO{TTFT: s.opts.SLOTTFT, TPOT: s.opts.SLOTPOT}
	name := "no stored baseline"
	if b := s.base(); b != nil {
		name = "Stored curves: " + b.Name
	}
	components.Page(components.PageData{
		Blind:        s.blind(),
		Mode:         s.opts.Describe(s.rt.PolicyName()),
		Workers:      s.opts.Workers,
		Profile:      s.opts.Profile,
		Running:      snap.Running,
		SliderMin:    s.opts.SliderMin,
		SliderMax:    s.opts.SliderMax,
		SliderStep:   s.opts.SliderStep,
		Target:       snap.Target,
		SLOTTFTms:    ms(s.opts.SLOTTFT),
		SLOTPOTms:    ms(s.opts.SLOTPOT),
		Tiles:        s.tiles(snap),
		Live:         snap.Live,
		Modes:        s.modes(operator),
		Faults:       s.faultOptions(),
		WorkerPanel:  s.workers(snap),
		Baseline:     s.baselineData(),
		Sim:          s.simStatusData(operator),
		BaselineName: name,
		Caveat:       HardwareCaveat(s.base(), s.opts.Faults != nil),
		Envelope:     EnvelopeSentence(s.base(), slo, s.opts.Describe),
		Operator:     operator,
		CanLogin:     s.rule.Token != "",
		QR:           s.opts.PublicURL != "",
		PublicURL:    s.opts.PublicURL,
		How:          components.HowData{Workers: s.opts.Workers + " (" + s.opts.Profile + ")", Model: s.opts.Model, BlockSize: s.opts.BlockSize, LoadTokens: router.LoadTokens, Example: s.costExample(), Policies: s.policyRules()},
	}).Render(r.Context(), w)
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	s.gen.Start()
	s.history.mark(Mark{T: time.Now().Unix(), Kind: "start", Label: "start"})
	components.RunState(true, true).Render(r.Context(), w)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	s.gen.Stop()
	s.history.mark(Mark{T: time.Now().Unix(), Kind: "stop", Label: "stop"})
	components.RunState(false, true).Render(r.Context(), w)
}

// ParseConcurrency checks a slider value against the slider's scale.
func (o Options) ParseConcurrency(raw string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil {
		return 0, fmt.Errorf("concurrency %q is not a whole number", raw)
	}
	if n < o.SliderMin || n > o.SliderMax {
		return 0, fmt.Errorf("concurrency %d is outside %d..%d", n, o.SliderMin, o.SliderMax)
	}
	if o.SliderStep > 0 && (n-o.SliderMin)%o.SliderStep != 0 {
		return 0, fmt.Errorf("concurrency %d is not on the slider's steps of %d from %d", n, o.SliderStep, o.SliderMin)
	}
	return n, nil
}

func (s *Server) concurrency(w http.ResponseWriter, r *http.Request) {
	n, err := s.opts.ParseConcurrency(r.FormValue("concurrency"))
	if err == nil {
		err = s.gen.SetConcurrency(n)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.history.mark(Mark{T: time.Now().Unix(), Kind: "concurrency", Label: fmt.Sprintf("→ %d", n)})
	components.Target(n).Render(r.Context(), w)
}

// mode switches the routing policy. Requests in flight keep their worker.
func (s *Server) mode(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.FormValue("mode"))
	if !slices.Contains(router.Policies, name) {
		http.Error(w, fmt.Sprintf("routing mode %q is unknown (available: %s)", name, strings.Join(router.Policies, ", ")), http.StatusBadRequest)
		return
	}
	if err := s.rt.SwitchPolicy(name); err != nil {
		http.Error(w, "routing mode: "+err.Error(), http.StatusBadRequest)
		return
	}
	text := s.opts.Describe(name)
	s.history.mark(Mark{T: time.Now().Unix(), Kind: "mode", Label: text})
	components.ModeSwitch(s.modes(true)).Render(r.Context(), w)
	components.ModeName(text).Render(r.Context(), w)
}

// reset drops the workers' prefix caches, the router's indexes and the
// metrics window, so the next minute shows a cold start.
func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	res := s.rt.Reset(r.Context())
	s.gen.Reset()
	s.history.mark(Mark{T: time.Now().Unix(), Kind: "reset", Label: "reset"})
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	slices.Sort(names)
	var failed []string
	for _, n := range names {
		if res[n] != "ok" {
			failed = append(failed, res[n])
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "Caches reset, except: %s", strings.Join(failed, "; "))
		return
	}
	fmt.Fprintf(w, "Caches reset on %d workers; index and window cleared.", len(names))
}

func (s *Server) howData() components.HowData {
	workers := s.opts.Workers
	if s.opts.Profile != "" {
		workers += " (" + s.opts.Profile + ")"
	}
	return components.HowData{Workers: workers, Model: s.opts.Model, BlockSize: s.opts.BlockSize, LoadTokens: router.LoadTokens, Example: s.costExample(), Policies: s.policyRules()}
}

// how is the "How it works" panel with the router's latest decision.
func (s *Server) how(w http.ResponseWriter, r *http.Request) {
	components.HowItWorks(s.howData()).Render(r.Context(), w)
}

func (s *Server) conversationList(w http.ResponseWriter, r *http.Request) {
	components.Conversations(s.conversations()).Render(r.Context(), w)
}

func (s *Server) conversationLog(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("conversation %q: not a number", chi.URLParam(r, "id")), http.StatusBadRequest)
		return
	}
	c, ok := s.gen.Conversation(id)
	if !ok {
		http.Error(w, fmt.Sprintf("conversation %d is not in the log (it keeps the last %d)", id, loadgen.LogSize), http.StatusNotFound)
		return
	}
	components.Conversation(conversation(c, "")).Render(r.Context(), w)
}

// stateJSON is the body of GET /api/state.
type stateJSON struct {
	Mode string `json:"mode"`
	// Fault is the fault the dashboard injected into the simulated fleet,
	// as /api/fault takes it ("none", "503:10", "slow:2"); empty for real
	// workers.
	Fault    string           `json:"fault,omitempty"`
	Snapshot loadgen.Snapshot `json:"snapshot"`
	// Frontend is the Dynamo frontend's own view, when kvlens reads one.
	Frontend *dynamo.Stats `json:"frontend,omitempty"`
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	st := stateJSON{Mode: s.rt.PolicyName(), Snapshot: s.gen.Snapshot()}
	if s.opts.Faults != nil {
		st.Fault = s.currentFault()
	}
	if s.opts.Frontend != nil {
		f := s.opts.Frontend.Stats()
		st.Frontend = &f
	}
	writeJSON(w, st)
}

// qr serves a QR code of the public URL, for visitors' phones.
func (s *Server) qr(w http.ResponseWriter, r *http.Request) {
	if s.opts.PublicURL == "" {
		http.Error(w, "no public URL: start kvlens with --public-url", http.StatusNotFound)
		return
	}
	png, err := qrcode.Encode(s.opts.PublicURL, qrcode.Medium, 256)
	if err != nil {
		http.Error(w, "encode QR code: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "max-age=3600")
	w.Write(png)
}

// ready answers the readiness probe: 200 when load can be served, else 503
// with the reason.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	// Blindness does not fail readiness: the workers still serve, only
	// without cache affinity, and taking the router out of rotation would
	// turn a slower service into none. The body names it for operators.
	if why := s.blind(); why != "" {
		io.WriteString(w, "ready, but KV routing is blind: "+why+"\n")
		return
	}
	io.WriteString(w, "ready\n")
}

// blind is Options.Blind, or "" when there is none.
func (s *Server) blind() string {
	if s.opts.Blind == nil {
		return ""
	}
	return s.opts.Blind()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// faultOptions are the fault presets the page offers, the one in force
// selected (and added when it is not a preset); none for real workers.
func (s *Server) faultOptions() []components.Option {
	if s.opts.Faults == nil {
		return nil
	}
	now := s.currentFault()
	var out []components.Option
	found := false
	for _, p := range FaultPresets {
		out = append(out, components.Option{Value: p[0], Label: p[1], Selected: p[0] == now})
		found = found || p[0] == now
	}
	if !found {
		kind, amount, _ := ParseFault(now)
		out = append(out, components.Option{Value: now, Label: faultLabel(kind, amount), Selected: true})
	}
	return out
}
