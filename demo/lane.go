package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/simulate"
	"github.com/kvlens/kvlens/web"
)

// lane is one fleet, the router in front of it and the load generator that
// drives it: the unit the A/B view runs twice, identically, side by side.
// Both lanes' workers, routers and generators share the configuration and
// the seed, so they play the same conversation script at the same time and
// differ only in their routing policy.
type lane struct {
	// id is the lane's name on the page and in metrics: a or b.
	id string
	// fleet is the lane's simulated workers; nil for real ones.
	fleet *sim.Fleet
	// first is the number of the lane's first simulated worker: lane B's
	// follow lane A's (sim-3 to sim-5 beside sim-0 to sim-2), so that every
	// worker has its own name in logs, conversations and metrics.
	first int
	// workerURLs are the workers as the router's --workers takes them.
	workerURLs []string
	routes     router.Fleet
	pool       *router.Pool
	proxy      *router.Proxy
	gen        *loadgen.Generator
	client     *loadgen.OpenAIClient
	// clk is the clock of the lane's simulated workers, router and load
	// (a warm-up's warp); nil is the wall clock.
	clk clock.Clock
}

// startFleet starts the lane's simulated workers, numbered from first, on
// the ports the plan pins or on free ones.
//
// The embedded workers publish KV events over loopback ZMQ, exactly as a
// vLLM fleet would, so the router has one path for both. Worker i draws
// output lengths from Load.Seed+i, as in virtual time, so a real-time and a
// virtual run with one seed start alike, and the two lanes' workers alike.
// Each worker also serves vLLM's replay socket (on a free loopback port), so
// the router catches up on events published before its subscription
// landed. The dashboard injects faults in process; over HTTP the workers
// take the operator's token, as a standalone sim does.
func (l *lane) startFleet(cfg Config, ports sim.PortPlan) error {
	fc := sim.FleetConfig{Count: cfg.SimWorkers, Model: cfg.Model, Profile: cfg.SimProfile,
		EventsBind: "tcp://127.0.0.1:0", EventsReplay: "tcp://127.0.0.1:0", Seed: cfg.Load.Seed,
		Access: access.Rule{Token: cfg.Dashboard.Access.Token}, Clock: l.clk}
	if ports.HTTP > 0 {
		fc.BasePort = ports.HTTP
		fc.EventsBind = fmt.Sprintf("tcp://127.0.0.1:%d", ports.EventsFrom(cfg.SimWorkers))
	}
	var err error
	l.fleet, err = sim.StartFleet(fc)
	if err != nil {
		if ports.HTTP > 0 {
			err = fmt.Errorf("--sim-ports %s: %w; choose other ports", ports, err)
		}
		return err
	}
	for i, u := range l.fleet.URLs {
		l.workerURLs = append(l.workerURLs, fmt.Sprintf("%s=%s,events=%s,replay=%s", l.workerName(i), u, l.fleet.EventEndpoints[i], l.fleet.ReplayEndpoints[i]))
	}
	return nil
}

// workerName is the name of the lane's simulated worker i.
func (l *lane) workerName(i int) string { return fmt.Sprintf("sim-%d", l.first+i) }

// startRouter builds the lane's router over its workers, with policy, its
// metrics registered with reg.
func (l *lane) startRouter(cfg Config, policy router.Policy, reg prometheus.Registerer) error {
	if len(l.workerURLs) > 0 {
		// With only a target, the router has no workers: it stays idle
		// and answers 503 to whoever calls it.
		var err error
		l.routes, err = router.ParseFleet(l.workerURLs)
		if err != nil {
			return fmt.Errorf("--workers: %w", err)
		}
	}
	l.pool = router.NewPool(l.routes.Static)
	if cfg.MaxBatchSize > 0 {
		l.pool.SetCapacity(cfg.MaxBatchSize)
	}
	rcfg := cfg.Router
	rcfg.Registerer = reg
	if l.fleet != nil {
		// The simulated workers' blocks are their profile's: an index of
		// another size drops every one as invalid, and kv routes blind.
		rcfg.BlockSize = cfg.SimProfile.BlockSize
	}
	if l.clk != nil {
		rcfg.Clock = l.clk // bookings and predictions age in the workers' time
	}
	l.proxy = router.NewProxy(router.NewRouter(l.pool, policy, rcfg))
	return nil
}

// startLoad builds the lane's load generator, sending to target (an OpenAI
// base URL), its metrics registered with reg. It does not start it. With
// inProcess, the turns a warm-up sends skip HTTP (warmTransport); the
// caller says so only when the router and the simulated workers tokenize
// alike, as the in-process path assumes.
func (l *lane) startLoad(cfg Config, load loadgen.Config, target string, reg prometheus.Registerer, inProcess bool) error {
	var err error
	l.client = loadgen.NewOpenAIClient(target, cfg.Model, "")
	var t loadgen.AsyncTransport = loadgen.Async(l.client)
	if l.clk != nil {
		// Pacing, think time, windows and every request's timing follow
		// the workers' time.
		load.Clock = l.clk
		l.client.SetClock(l.clk)
	}
	if warp, ok := l.clk.(*clock.Warp); ok && inProcess && l.fleet != nil {
		t = &warmTransport{warp: warp, inProcess: simulate.NewTransport(warp, l.proxy.Router(), l.runners()), http: t}
	}
	l.gen, err = loadgen.NewAsync(t, load, loadgen.NewMetrics(reg))
	return err
}

// runners are the lane's simulated workers' runners, by worker name.
func (l *lane) runners() map[string]*sim.Runner {
	out := make(map[string]*sim.Runner, len(l.fleet.Workers))
	for i, w := range l.fleet.Workers {
		out[l.workerName(i)] = w.Runner()
	}
	return out
}

// stop stops the lane's load, cancelling its streams in flight, and closes
// the connections it leaves idle, so that the dashboard's listener shuts
// down at once rather than wait for them.
func (l *lane) stop() {
	l.gen.Stop()
	l.client.CloseIdleConnections()
}

// run keeps the lane's router fed (KV events) and its pool's health up to
// date until ctx ends.
func (l *lane) run(ctx context.Context, wg *sync.WaitGroup, logf func(string, ...any)) {
	wg.Add(2)
	go func() { defer wg.Done(); router.NewFeed(l.proxy.Router(), logf).Run(ctx, clock.Real) }()
	go func() {
		defer wg.Done()
		l.pool.Watch(ctx, clock.Real, l.proxy.Client(), l.routes.DNS, nil, 2*time.Second, logf)
	}()
}

// gauges reads each simulated worker's queue and KV-cache usage from its
// engine, as its /metrics reports them (num_requests_waiting,
// kv_cache_usage_perc).
func (l *lane) gauges() map[string]web.Gauge {
	out := make(map[string]web.Gauge, len(l.fleet.Workers))
	for i, w := range l.fleet.Workers {
		st := w.Runner().Stats()
		out[l.workerName(i)] = web.Gauge{Queued: st.Waiting, KVUsage: st.KVUsage}
	}
	return out
}

// laneRegisterer is where lane id's router and load generator register
// their metrics: reg itself in the single view, and reg with a lane label
// in the A/B view, so that both lanes export the same series side by side.
func laneRegisterer(reg prometheus.Registerer, id string, ab bool) prometheus.Registerer {
	if !ab {
		return reg
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"lane": id}, reg)
}

// blind names, for each lane, why its KV routing cannot see its workers'
// caches; "" when every lane's can.
func blind(lanes []*lane) string {
	var out []string
	for _, l := range lanes {
		if b := router.BlindSummary(l.proxy.Router().Blind()); b != "" {
			if len(lanes) > 1 {
				b = "lane " + strings.ToUpper(l.id) + ": " + b
			}
			out = append(out, b)
		}
	}
	return strings.Join(out, "; ")
}

// ready fails while a lane has no healthy worker (none yet, or all down,
// or a DNS source that resolved to none), naming the lane's workers.
func ready(lanes []*lane) error {
	for _, l := range lanes {
		ws := l.proxy.Router().Workers()
		healthy := 0
		for _, w := range ws {
			if w.Healthy {
				healthy++
			}
		}
		if healthy > 0 {
			continue
		}
		what := fmt.Sprintf("no worker is healthy (0 of %d)", len(ws))
		if len(ws) == 0 {
			what = "the fleet has no workers (a DNS source resolves to none)"
		}
		if len(lanes) > 1 {
			return fmt.Errorf("lane %s: %s", strings.ToUpper(l.id), what)
		}
		return errors.New(what)
	}
	return nil
}
