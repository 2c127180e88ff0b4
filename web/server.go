// Package web serves the dashboard: the page, its controls, the websocket
// that pushes live figures, the Prometheus endpoint and the OpenAI proxy.
package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/dynamo"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/tour"
)

// Loadgen is what the dashboard drives and reads.
type Loadgen interface {
	Start()
	Stop()
	SetConcurrency(n int) error
	Snapshot() loadgen.Snapshot
	// Target is Snapshot's Target alone, read every tick without the
	// window's figures.
	Target() int
	// BeginWindow empties the metrics window, whose per-request figures
	// then count only requests sent from now on, so that none mixes what
	// came before a change with what came after (loadgen.Window.Begin).
	BeginWindow()
	// Conversations lists live and recent conversations, newest first.
	Conversations() []loadgen.ConversationSummary
	// Conversation returns one conversation's log.
	Conversation(id uint64) (loadgen.ConversationLog, bool)
}

// Options configures the dashboard.
type Options struct {
	// Lanes are more lanes beside the first (New's gen and rt): the A/B
	// view's lane B, an identical fleet fed the same conversations.
	Lanes []Lane
	// Alternate, when set, makes the single lane an A/B comparison in time:
	// its policies take turns (for a fleet that cannot be split in two).
	Alternate *Alternation
	// Source says where the live figures come from, as names end: such as
	// "simulated"; empty says "live".
	Source string
	// Workers describes the fleet in plain words.
	Workers string
	// Profile is the workers' engine profile, or their endpoints.
	Profile string
	// ProfileName is the simulated workers' profile's name (--sim-profile),
	// shown on hover beside Profile; "" when Profile is the name itself.
	ProfileName string
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
	// PolicyCurves, when not nil, holds a stored simulated curve per
	// policy for this very fleet and load; the overlay chart draws each
	// lane's policy's curve under its live point.
	PolicyCurves *baselines.Set
	// Gauges, when not nil, returns the first lane's workers' own queue and
	// KV-cache figures by worker name; GaugeSource says where every lane's
	// come from.
	Gauges      func() map[string]Gauge
	GaugeSource string
	// Faults, when set, injects faults into the simulated fleet.
	Faults FaultInjector
	// Simulator, when set, runs "simulate this curve" from the dashboard.
	Simulator Simulator
	// Record, when set, receives the session's recording, as JSON of each
	// kind: every 1 Hz chart frame ("snapshot", with the marks made since
	// the last one), followed by the headline and tiles of the same second
	// ("panels"), and the baseline compared with ("baseline") before the
	// first frame and whenever it changes.
	Record func(kind string, body []byte)
	// Recordings, when not nil, is the store the Recordings page lists and
	// replays; nil shows the page saying recordings are off, and why
	// (RecordingsOff).
	Recordings    Recordings
	RecordingsOff string
	// NotRecording, when not empty, says why this session is not recorded
	// while earlier ones are listed (--record=false, or a recording that
	// could not start).
	NotRecording string
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
	// Tour, when set, is the script PlayTour plays (--tour), through the
	// operator's own controls; CheckTour checks it against these options.
	Tour *tour.Script
	// TourSpeed plays the tour this many times faster than written, for
	// rehearsals and tests; 0 means 1.
	TourSpeed float64
	// Warm, when set, is the clock of the simulated lanes' warm-up
	// (--warm): until it meets the wall clock the page shows no figures,
	// the controls answer 409 and the tour waits (RunWarmUp ends it).
	Warm *clock.Warp
	// WarmBehind, checked when the warm-up ends, says why its windows
	// cannot be trusted, such as a fleet that fell behind its modelled
	// pace; "" keeps them. Nil keeps them.
	WarmBehind func() string
}

// Server is the dashboard's HTTP side.
type Server struct {
	// lanes are the fleets shown: one, or A and B.
	lanes []Lane
	// alt alternates the single lane's policies; nil without Alternate.
	alt  *alternator
	seen seen
	opts Options
	hub  *Hub
	// rule is Options.Access with the dashboard's hosts: who may change it.
	rule access.Rule
	// history holds the charts' last 10 minutes, for browsers that connect late.
	history history
	// fault is the fault in force, as /api/fault takes it; "" means none.
	faultInForce atomic.Pointer[string]
	// baseline is the set the tiles and the overlay compare with; it starts
	// as Options.Baseline and changes when a simulated curve is put in use.
	baseline atomic.Pointer[baselines.Set]
	// tour plays Options.Tour; nil without one.
	tour *tour.Player
	// recorded is the baseline last handed to Options.Record, as JSON.
	recorded struct {
		sync.Mutex
		base []byte
	}
	// warmed is closed once the warm-up is over, or at once without one;
	// behind is why its windows were dropped ("" when kept).
	warmed chan struct{}
	behind atomic.Pointer[string]
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
	s := &Server{lanes: append([]Lane{{Gen: gen, Router: rt, Gauges: opts.Gauges}}, opts.Lanes...), opts: opts, rule: opts.Access}
	if opts.Alternate != nil && len(s.lanes) == 1 {
		s.alt = newAlternator(*opts.Alternate)
	}
	if s.rule.Hosts == nil {
		s.rule.Hosts = opts.Hosts
	}
	s.baseline.Store(opts.Baseline)
	s.warmed = make(chan struct{})
	if opts.Warm == nil {
		close(s.warmed)
	}
	if opts.Tour != nil {
		s.tour = tour.NewPlayer(opts.Tour, clock.Real, opts.TourSpeed, s.tourStep)
	}
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
		r.Get("/ws", s.hub.ServeWS)
		r.Group(s.pages)
	})
	return r
}

// pages are the dashboard's pages, files and controls, compressed for the
// browsers that accept it.
func (s *Server) pages(r chi.Router) {
	r.Use(compressed)
	r.Get("/", s.page)
	r.Post("/api/login", s.login)
	r.Group(func(r chi.Router) {
		r.Use(s.rule.Require, smallForms)
		r.Group(func(r chi.Router) {
			// The live demo's controls wait for the warm-up; a
			// simulated curve would take its CPU.
			r.Use(s.afterWarmUp)
			r.Post("/api/start", s.start)
			r.Post("/api/stop", s.stop)
			r.Post("/api/concurrency", s.concurrency)
			r.Post("/api/simulate", s.simulate)
			r.Post("/api/fault", s.fault)
			r.Post("/api/mode", s.mode)
			r.Post("/api/reset", s.reset)
			r.Post("/api/tour/pause", s.pauseTour)
			r.Post("/api/tour/resume", s.resumeTour)
		})
		r.Post("/api/simulate/use", s.useSimulated)
		r.Post("/recordings/{id}/delete", s.deleteRecording)
	})
	r.Get("/recordings", s.recordingsPage)
	r.Get("/recordings/{id}", s.replayPage)
	r.Get("/recordings/{id}/frames", s.recordingFrames)
	r.Get("/recordings/{id}/frames/{seq}/panels", s.recordedPanels)
	r.Get("/recordings/{id}/export.csv", s.exportRecording("csv"))
	r.Get("/recordings/{id}/export.json", s.exportRecording("json"))
	r.Get("/how", s.how)
	r.Get("/conversations", s.conversationList)
	r.Get("/conversations/{id}", s.conversationLog)
	r.Get("/qr.png", s.qr)
	r.Get("/api/state", s.state)
	r.Handle("/static/*", http.StripPrefix("/static/", staticHandler()))
	// Pages link /static/favicon.svg, but some clients ask for
	// /favicon.ico whatever a page links.
	r.Get("/favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "max-age=86400")
		http.ServeFileFS(w, r, staticFS, "favicon.svg")
	})
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	snaps := s.snapshots()
	operator := s.rule.IsOperator(r)
	slo := baselines.SLO{TTFT: s.opts.SLOTTFT, TPOT: s.opts.SLOTPOT}
	name := "no stored baseline"
	if b := s.base(); b != nil {
		name = "Stored curves: " + b.Name
	}
	sides := s.sides(time.Now(), snaps)
	d := components.PageData{
		Blind:        s.blind(),
		Mode:         s.opts.Describe(s.lanes[0].Router.PolicyName()),
		Workers:      s.opts.Workers,
		Profile:      s.opts.Profile,
		ProfileName:  s.opts.ProfileName,
		Running:      snaps[0].Running,
		SliderMin:    s.opts.SliderMin,
		SliderMax:    s.opts.SliderMax,
		SliderStep:   s.opts.SliderStep,
		Target:       snaps[0].Target,
		SLOTTFTms:    ms(s.opts.SLOTTFT),
		SLOTPOTms:    ms(s.opts.SLOTPOT),
		Headline:     s.headline(sides),
		Tiles:        s.tiles(sides),
		Live:         liveCounts(snaps),
		Modes:        s.modes(operator),
		Faults:       s.faultOptions(),
		WorkerPanel:  s.workers(snaps),
		Baseline:     s.baselineData(),
		Sim:          s.simStatusData(operator),
		BaselineName: name,
		Caveat:       HardwareCaveat(s.base(), s.opts.Faults != nil),
		Envelope:     EnvelopeSentence(s.base(), slo),
		Operator:     operator,
		CanLogin:     s.rule.Token != "",
		QR:           s.opts.PublicURL != "",
		PublicURL:    s.opts.PublicURL,
		Tour:         s.tourData(operator),
		How:          components.HowData{Workers: s.opts.Workers + " (" + s.opts.Profile + ")", Model: s.opts.Model, BlockSize: s.opts.BlockSize, LoadTokens: router.LoadTokens, QueuedShare: strconv.FormatFloat(router.QueuedShare, 'f', -1, 64), Example: s.costExample(), Policies: s.policyRules()},
	}
	if s.ab() {
		d.Pair, d.PairText = s.pair(operator), s.pairNames()
	}
	render(w, r, components.Page(d))
}

// laneNames name the lanes the time charts draw, for the legend above the
// tiles: each lane's router and source; none when the charts draw one.
func (s *Server) laneNames() []string {
	if len(s.lanes) < 2 {
		return nil
	}
	var out []string
	for _, l := range s.lanes {
		out = append(out, s.laneName(l.Router.PolicyName()))
	}
	return out
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	s.operatorTakes()
	s.startLoad()
	render(w, r, components.RunState(true, true))
}

// startLoad starts every lane's load generator, beginning a new window.
func (s *Server) startLoad() {
	s.change(Mark{Kind: "start", Label: "start"}, func() error {
		for _, l := range s.lanes {
			l.Gen.Start()
		}
		return nil
	})
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	s.operatorTakes()
	for _, l := range s.lanes {
		l.Gen.Stop()
	}
	s.history.mark(Mark{T: time.Now().Unix(), Kind: "stop", Label: "stop"})
	render(w, r, components.RunState(false, true))
}

// ParseConcurrency checks a slider value against the slider's scale.
func (o Options) ParseConcurrency(raw string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("concurrency %.20q is outside %d..%d", raw, o.SliderMin, o.SliderMax)
	}
	if err != nil {
		return 0, fmt.Errorf("concurrency %.20q is not a whole number", raw)
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
		s.operatorTakes()
		err = s.setConcurrency(n)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	render(w, r, components.Target(n))
	s.renderPanels(r.Context(), w)
}

// setConcurrency sets every lane to n conversations: each runs the same
// number.
func (s *Server) setConcurrency(n int) error {
	return s.change(Mark{Kind: "concurrency", Label: fmt.Sprintf("→ %d", n)}, func() error {
		for _, l := range s.lanes {
			if err := l.Gen.SetConcurrency(n); err != nil {
				return err
			}
		}
		return nil
	})
}

// renderPanels appends the headline and tiles to a control's answer, as
// out-of-band swaps, so the page shows the new window at once rather than
// at the next tick.
func (s *Server) renderPanels(ctx context.Context, w io.Writer) {
	p := s.panels(time.Now(), s.snapshots())
	if p.Headline != nil {
		components.Headline(*p.Headline).Render(ctx, w)
	}
	components.Tiles(p.Tiles).Render(ctx, w)
}

// mode switches a lane's routing policy: form field mode, and lane ("a" or
// "b"; the first lane when absent). In the alternating view it sets one
// side of the pair. Requests in flight keep their worker.
func (s *Server) mode(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.FormValue("mode"))
	if !slices.Contains(router.Policies, name) {
		http.Error(w, fmt.Sprintf("routing mode %q is unknown (available: %s)", name, strings.Join(router.Policies, ", ")), http.StatusBadRequest)
		return
	}
	i, err := s.laneIndex(strings.TrimSpace(r.FormValue("lane")))
	if err == nil && s.alt != nil && i > 1 {
		err = fmt.Errorf("lane %q is unknown (the pair is a and b)", r.FormValue("lane"))
	}
	if err != nil {
		http.Error(w, "routing mode: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.operatorTakes()
	if err := s.setMode(i, name); err != nil {
		http.Error(w, "routing mode: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s.ab() {
		render(w, r, components.PairSwitch(s.pair(true)))
		render(w, r, components.PairNames(s.pairNames()))
	} else {
		render(w, r, components.ModeSwitch(s.modes(true)))
		render(w, r, components.ModeName(s.opts.Describe(name)))
	}
	s.renderPanels(r.Context(), w)
}

// setMode makes name lane i's routing policy; in the alternating view it
// sets one side of the pair.
func (s *Server) setMode(i int, name string) error {
	return s.change(s.laneMark(i, "mode", s.opts.Describe(name)), func() error {
		if s.alt != nil {
			rt := s.lanes[0].Router
			if run := s.alt.setPair(i, name, rt.PolicyName()); run != rt.PolicyName() {
				return rt.SwitchPolicy(run)
			}
			return nil
		}
		return s.lanes[i].Router.SwitchPolicy(name)
	})
}

// pairNames are the policies compared, in plain words, for the header.
func (s *Server) pairNames() []string {
	var out []string
	for _, p := range s.pairPolicies() {
		out = append(out, s.opts.Describe(p))
	}
	return out
}

// reset drops the workers' prefix caches, the routers' indexes and the
// metrics windows, so the next minute shows a cold start.
func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	s.operatorTakes()
	n, err := s.resetCaches(r.Context())
	if err != nil {
		fmt.Fprintf(w, "Caches reset, except: %v", err)
		return
	}
	fmt.Fprintf(w, "Caches reset on %d workers; index and window cleared.", n)
}

// resetCaches resets every lane's workers and router, and says on how
// many workers, or which failed and why.
func (s *Server) resetCaches(ctx context.Context) (int, error) {
	res := map[string]string{}
	s.change(Mark{Kind: "reset", Label: "reset"}, func() error {
		for _, l := range s.lanes {
			maps.Copy(res, l.Router.Reset(ctx))
		}
		return nil
	})
	names := slices.Sorted(maps.Keys(res))
	var failed []string
	for _, n := range names {
		if res[n] != "ok" {
			failed = append(failed, res[n])
		}
	}
	if len(failed) > 0 {
		return len(names), errors.New(strings.Join(failed, "; "))
	}
	return len(names), nil
}

func (s *Server) howData() components.HowData {
	workers := s.opts.Workers
	if s.opts.Profile != "" {
		workers += " (" + s.opts.Profile + ")"
	}
	return components.HowData{Workers: workers, Model: s.opts.Model, BlockSize: s.opts.BlockSize, LoadTokens: router.LoadTokens, QueuedShare: strconv.FormatFloat(router.QueuedShare, 'f', -1, 64), Example: s.costExample(), Policies: s.policyRules()}
}

// how is the "How it works" panel with the router's latest decision.
// render writes c as HTML. A fragment such as <section> is not among what
// net/http sniffs as HTML, and would go out as text/plain.
func render(w http.ResponseWriter, r *http.Request, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	c.Render(r.Context(), w)
}

func (s *Server) how(w http.ResponseWriter, r *http.Request) {
	render(w, r, components.HowItWorks(s.howData()))
}

func (s *Server) conversationList(w http.ResponseWriter, r *http.Request) {
	render(w, r, components.Conversations(s.conversations()))
}

func (s *Server) conversationLog(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("conversation %q: not a number", chi.URLParam(r, "id")), http.StatusBadRequest)
		return
	}
	lane, err := s.laneIndex(r.URL.Query().Get("lane"))
	if err != nil {
		http.Error(w, "conversation: "+err.Error(), http.StatusBadRequest)
		return
	}
	c, ok := s.lanes[lane].Gen.Conversation(id)
	if !ok {
		http.Error(w, fmt.Sprintf("conversation %d is not in the log (it keeps the last %d)", id, loadgen.LogSize), http.StatusNotFound)
		return
	}
	d := conversation(c, "", s.now())
	if len(s.lanes) > 1 {
		d.Lane = upper(laneID(lane)) + " · " + s.laneName(s.lanes[lane].Router.PolicyName())
	}
	render(w, r, components.Conversation(d))
}

// stateJSON is the body of GET /api/state.
type stateJSON struct {
	// Mode and Snapshot are the first lane's (lane A's in the A/B view).
	Mode string `json:"mode"`
	// Fault is the fault the dashboard injected into the simulated fleet,
	// as /api/fault takes it ("none", "503:10", "slow:2"); empty for real
	// workers.
	Fault    string           `json:"fault,omitempty"`
	Snapshot loadgen.Snapshot `json:"snapshot"`
	// Pair are the policies the A/B view compares, A then B; absent in the
	// single view.
	Pair []string `json:"pair,omitempty"`
	// Alternating says the pair takes turns on one fleet, each turn this
	// many seconds; absent when each has its own fleet.
	Alternating float64 `json:"alternating_turn_seconds,omitempty"`
	// Lanes are the comparison's sides, A then B; absent in the single view.
	Lanes []laneState `json:"lanes,omitempty"`
	// Frontend is the Dynamo frontend's own view, when kvlens reads one.
	Frontend *dynamo.Stats `json:"frontend,omitempty"`
	// Tour is the tour's state; absent without --tour.
	Tour *tourState `json:"tour,omitempty"`
	// Warmup is the warm-up's state; absent without --warm.
	Warmup *warmState `json:"warmup,omitempty"`
	// Baseline names the stored set the tiles and the baseline chart
	// compare with (--baseline, or a simulated curve put in use); absent
	// without one.
	Baseline string `json:"baseline,omitempty"`
}

// laneState is one side of the A/B comparison in /api/state.
type laneState struct {
	Lane   string `json:"lane"`
	Policy string `json:"policy"`
	// Name is the side's router and source, as the page names it.
	Name string `json:"name"`
	// Settling says why the window's TTFT cannot be compared yet,
	// AnswersSettling why its figures read at an answer's end cannot, and
	// RatesSettling why its rates cannot; each absent once they can.
	Settling        string `json:"settling,omitempty"`
	AnswersSettling string `json:"answers_settling,omitempty"`
	RatesSettling   string `json:"rates_settling,omitempty"`
	// Ago is a kept window's age, in the alternating view.
	Ago string `json:"ago,omitempty"`
	// Window is the side's window, absent when it has none yet.
	Window *loadgen.Stats `json:"window,omitempty"`
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	snaps := s.snapshots()
	st := stateJSON{Mode: s.lanes[0].Router.PolicyName(), Snapshot: snaps[0]}
	if b := s.base(); b != nil {
		st.Baseline = b.Name
	}
	if s.ab() {
		st.Pair = s.pairPolicies()
		if s.alt != nil {
			st.Alternating = s.alt.every.Seconds()
		}
		for i, sd := range s.sides(time.Now(), snaps) {
			ls := laneState{Lane: laneID(i), Policy: sd.policy, Name: s.laneName(sd.policy), Settling: sd.settling, AnswersSettling: sd.answering, RatesSettling: sd.rates, Ago: sd.ago}
			if !sd.none {
				ls.Window = &sd.window
			}
			st.Lanes = append(st.Lanes, ls)
		}
	}
	if s.opts.Faults != nil {
		st.Fault = s.currentFault()
	}
	if s.opts.Frontend != nil {
		f := s.opts.Frontend.Stats()
		st.Frontend = &f
	}
	st.Tour = s.tourState()
	st.Warmup = s.warmState()
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
