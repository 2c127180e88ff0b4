// Package web serves the dashboard: the page, its controls, the websocket
// that pushes live figures, the Prometheus endpoint and the OpenAI proxy.
package web

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/dynamo"
	"github.com/kvlens/kvlens/loadgen"
)

//go:embed static
var staticFiles embed.FS

// Loadgen is what the dashboard drives and reads.
type Loadgen interface {
	Start()
	Stop()
	SetConcurrency(n int) error
	Snapshot() loadgen.Snapshot
}

// Router tells the dashboard which routing policy is live.
type Router interface {
	// PolicyName is the active policy's identifier, such as round_robin.
	PolicyName() string
}

// Options configures the dashboard.
type Options struct {
	// Workers describes the fleet in plain words.
	Workers string
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
	// Access decides who may change the demo.
	Access Access
	// PublicURL is the address visitors' phones can open (shown as a QR
	// code); empty hides the code.
	PublicURL string
	// Frontend, when set, is a Dynamo frontend whose own figures the state
	// reports beside the load generator's.
	Frontend interface{ Stats() dynamo.Stats }
	// Ready reports why the demo cannot serve load yet, such as no healthy
	// worker; nil means ready. A nil Ready is always ready.
	Ready func() error
}

// Server is the dashboard's HTTP side.
type Server struct {
	gen  Loadgen
	rt   Router
	opts Options
	hub  *Hub
	// history holds the chart's last 5 minutes, for browsers that connect late.
	history history
}

// New returns a dashboard over gen and rt.
func New(gen Loadgen, rt Router, opts Options) *Server {
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.Describe == nil {
		opts.Describe = func(s string) string { return s }
	}
	s := &Server{gen: gen, rt: rt, opts: opts}
	s.hub = NewHub(s.frames, s.hello)
	return s
}

// Hub returns the websocket hub, which the caller runs and closes.
func (s *Server) Hub() *Hub { return s.hub }

// Handler returns the dashboard's routes.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Get("/", s.page)
	r.Get("/ws", s.hub.ServeWS)
	r.Post("/api/login", s.opts.Access.login)
	r.Group(func(r chi.Router) {
		r.Use(s.opts.Access.requireOperator)
		r.Post("/api/start", s.start)
		r.Post("/api/stop", s.stop)
		r.Post("/api/concurrency", s.concurrency)
	})
	r.Get("/qr.png", s.qr)
	r.Get("/api/state", s.state)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	r.Get("/readyz", s.ready)
	r.Handle("/metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	static, _ := fs.Sub(staticFiles, "static")
	r.Handle("/static/*", http.StripPrefix("/static/", http.FileServerFS(static)))
	if s.opts.API != nil {
		r.Handle("/v1/*", s.opts.API)
	}
	return r
}

func (s *Server) tiles(snap loadgen.Snapshot) components.TilesData {
	w := snap.Window
	return components.TilesData{
		Live: snap.Live, Target: snap.Target,
		TTFTp50: w.TTFT.P50, TTFTp95: w.TTFT.P95, TTFTCount: w.TTFT.Count,
		TPOTp50: w.TPOT.P50, TPOTp95: w.TPOT.P95, TPOTCount: w.TPOT.Count,
		OutputTokensPerSec: w.OutputTokensPerSec,
		Errors:             w.Errors, ErrorRate: w.ErrorRate,
		SLOTTFTms: ms(s.opts.SLOTTFT), SLOTPOTms: ms(s.opts.SLOTPOT),
	}
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	snap := s.gen.Snapshot()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	components.Page(components.PageData{
		Mode:       s.opts.Describe(s.rt.PolicyName()),
		Workers:    s.opts.Workers,
		Running:    snap.Running,
		SliderMin:  s.opts.SliderMin,
		SliderMax:  s.opts.SliderMax,
		SliderStep: s.opts.SliderStep,
		Target:     snap.Target,
		SLOTTFTms:  ms(s.opts.SLOTTFT),
		SLOTPOTms:  ms(s.opts.SLOTPOT),
		Tiles:      s.tiles(snap),
		Operator:   s.opts.Access.IsOperator(r),
		CanLogin:   s.opts.Access.Token != "",
		QR:         s.opts.PublicURL != "",
		PublicURL:  s.opts.PublicURL,
		How:        components.HowData{Workers: s.opts.Workers, Model: s.opts.Model, BlockSize: s.opts.BlockSize},
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

// stateJSON is the body of GET /api/state.
type stateJSON struct {
	Mode     string           `json:"mode"`
	Snapshot loadgen.Snapshot `json:"snapshot"`
	// Frontend is the Dynamo frontend's own view, when kvlens reads one.
	Frontend *dynamo.Stats `json:"frontend,omitempty"`
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	st := stateJSON{Mode: s.rt.PolicyName(), Snapshot: s.gen.Snapshot()}
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
	io.WriteString(w, "ready\n")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
