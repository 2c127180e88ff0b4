package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/internal/connlimit"
	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/reqbody"
	"github.com/kvlens/kvlens/tokenizer"
)

// FleetConfig describes a fleet of simulated workers.
type FleetConfig struct {
	// Count is the number of workers.
	Count int
	// Profile is every worker's profile; the zero value means the default.
	Profile Profile
	// Model overrides the profile's model name when set.
	Model string
	// Host is the address the workers listen on; empty means 127.0.0.1.
	Host string
	// Ports are the workers' ports, one each; empty means ephemeral ports,
	// or consecutive ports from BasePort when it is set.
	Ports []int
	// BasePort, when set and Ports is empty, gives worker i port BasePort+i.
	BasePort int
	// Faults are injected in every worker from the start.
	Faults Faults
	// Events, when set, returns the KV event sink of worker i. It takes
	// precedence over EventsBind and EventsConnect.
	Events func(i int) EventSink
	// EventsBind, when set, makes each worker publish its KV events on a ZMQ
	// PUB socket bound here, as vLLM does: worker i binds the port plus i
	// (port 0 means any free port). Fleet.EventEndpoints says where.
	EventsBind string
	// EventsConnect, when set, makes each worker dial this ZMQ endpoint (a
	// router that binds) and publish under its own name as the topic. With
	// EventsConnectEach, worker i dials the port plus i instead, as vLLM
	// offsets its endpoint by data-parallel rank, so a router can bind one
	// port per worker.
	EventsConnect     string
	EventsConnectEach bool
	// EventsReplay, when set with EventsBind or EventsConnect, makes worker
	// i also bind a replay (ROUTER) socket at this port plus i, answering
	// vLLM's replay requests from its last ReplaySize messages.
	EventsReplay string
	// ReplaySize is how many messages each worker's replay socket keeps;
	// zero means the kvevents default.
	ReplaySize int
	// EventsFor, when set, overrides the publisher of worker i: it gets the
	// config StartFleet would use and returns the one to use, so one fleet
	// can mix workers that bind and workers that connect.
	EventsFor func(i int, cfg kvevents.PublisherConfig) kvevents.PublisherConfig
	// Seed makes output lengths and faults reproducible; worker i uses Seed+i.
	Seed uint64
	// Access guards every worker's PUT /admin/faults; the zero rule allows
	// changes from this machine only. Server.SetFaults needs none.
	Access access.Rule
	// Tokenizer is every worker's tokenizer and chat template; nil means the
	// embedded one (see ServerOptions.Tokenizer).
	Tokenizer *tokenizer.Engine
	// NoCachedTokens answers as vLLM's default does, with no cached-token
	// counts (see ServerOptions.NoCachedTokens).
	NoCachedTokens bool
	// Clock is every worker's clock (ServerOptions.Clock); nil means the
	// wall clock.
	Clock clock.Clock
	// MaxConns is how many connections each worker's listener holds open at
	// once; past it, new ones wait in the kernel's accept queue. 0 means
	// connlimit.Default(Count): the workers split one group's share of the
	// process's descriptors.
	MaxConns int
}

// Fleet is a set of simulated workers, each on its own HTTP port, reachable
// exactly as remote workers would be.
type Fleet struct {
	// URLs holds each worker's base URL, such as http://127.0.0.1:41234.
	URLs []string
	// Workers are the workers, in the order of URLs.
	Workers []*Server
	// EventEndpoints holds each worker's KV-event endpoint, in the order of
	// URLs, when the fleet publishes over ZMQ.
	EventEndpoints []string
	// ReplayEndpoints holds each worker's replay endpoint, in the order of
	// URLs, when it has one; "" when not.
	ReplayEndpoints []string
	// Publishers are the workers' KV-event publishers, in the order of URLs,
	// when the fleet publishes over ZMQ.
	Publishers []*kvevents.Publisher
	servers    []*http.Server
	listeners  []*connlimit.Listener // the workers', each capped at FleetConfig.MaxConns
	publishers []*kvevents.Publisher
	wg         sync.WaitGroup
}

// StartFleet starts the workers cfg describes.
func StartFleet(cfg FleetConfig) (*Fleet, error) {
	prof := cfg.Profile
	if prof.Name == "" {
		prof = MustProfile(DefaultProfile)
	}
	if err := CheckFleet(cfg.Count, prof); err != nil {
		return nil, err
	}
	if len(cfg.Ports) > 0 && len(cfg.Ports) != cfg.Count {
		return nil, fmt.Errorf("sim: %d ports given for %d workers", len(cfg.Ports), cfg.Count)
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	maxConns := cfg.MaxConns
	if maxConns <= 0 {
		maxConns = connlimit.Default(cfg.Count)
	}
	f := &Fleet{}
	for i := range cfg.Count {
		port := 0
		switch {
		case len(cfg.Ports) > 0:
			port = cfg.Ports[i]
		case cfg.BasePort > 0:
			port = cfg.BasePort + i
		}
		opts := ServerOptions{
			Name: fmt.Sprintf("sim-%d", i), Profile: cfg.Profile, Model: cfg.Model,
			Faults: cfg.Faults, Seed: cfg.Seed + uint64(i), Access: cfg.Access,
			Tokenizer: cfg.Tokenizer, Clock: cfg.Clock, NoCachedTokens: cfg.NoCachedTokens,
		}
		switch {
		case cfg.Events != nil:
			opts.Events = cfg.Events(i)
		case cfg.EventsBind != "" || cfg.EventsConnect != "":
			pub, err := newPublisher(cfg, i, opts.Name)
			if err != nil {
				f.Close(context.Background())
				if ep, _ := offsetPort(cfg.EventsBind, i); cfg.EventsConnect == "" && inUse(err) {
					_, port, _ := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
					return nil, fmt.Errorf("sim: event port %s for worker %d is already in use: another program (or another kvlens) is listening there", port, i)
				}
				return nil, fmt.Errorf("sim: worker %d: %w", i, err)
			}
			f.publishers = append(f.publishers, pub)
			f.Publishers = f.publishers
			f.EventEndpoints = append(f.EventEndpoints, pub.Endpoint())
			f.ReplayEndpoints = append(f.ReplayEndpoints, pub.ReplayEndpoint())
			opts.Events = func(b kvevents.Batch) { pub.Publish(b) } // queues; a full queue leaves a seq gap
		}
		w, err := NewServer(opts)
		if err != nil {
			f.Close(context.Background())
			return nil, err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			w.Close()
			f.Close(context.Background())
			if inUse(err) {
				return nil, fmt.Errorf("sim: port %d for worker %d is already in use: another program (or another kvlens) is listening there", port, i)
			}
			return nil, fmt.Errorf("sim: listen for worker %d: %w", i, err)
		}
		srv := &http.Server{Handler: reqbody.Paced(w), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		capped := connlimit.Limit(ln, maxConns)
		f.Workers = append(f.Workers, w)
		f.servers = append(f.servers, srv)
		f.listeners = append(f.listeners, capped)
		f.URLs = append(f.URLs, "http://"+ln.Addr().String())
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			srv.Serve(capped)
		}()
	}
	return f, nil
}

// inUse says whether err is a bind to an address another socket holds. The
// ZMQ library keeps the system's error only as text.
func inUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// closeGrace bounds how long Close lets open requests finish. net/http's
// Shutdown counts a connection that was opened but never sent a request as
// busy for 5 s, and a client's transport may hold such spares; the streams
// that matter were cancelled by their clients before the fleet closes.
const closeGrace = 500 * time.Millisecond

// Close stops every worker, cutting open streams once ctx expires or
// closeGrace has passed. The servers shut down side by side, so a fleet
// waits closeGrace at most once, not once a worker.
func (f *Fleet) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, closeGrace)
	defer cancel()
	errs := make([]error, len(f.servers))
	var wg sync.WaitGroup
	for i, srv := range f.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					errs[i] = err
				}
			}
		}()
	}
	wg.Wait()
	for _, w := range f.Workers {
		w.Close()
	}
	for _, p := range f.publishers {
		p.Close()
	}
	f.wg.Wait()
	return errors.Join(errs...)
}

// newPublisher makes worker i's KV-event publisher: bound at EventsBind with
// the port offset by i, or dialing EventsConnect with the worker's name as
// the topic so a shared subscriber can tell the workers apart; with a
// replay socket at EventsReplay's port plus i when that is set.
func newPublisher(cfg FleetConfig, i int, name string) (*kvevents.Publisher, error) {
	var pc kvevents.PublisherConfig
	if cfg.EventsConnect != "" {
		ep := cfg.EventsConnect
		if cfg.EventsConnectEach {
			var err error
			if ep, err = offsetPort(ep, i); err != nil {
				return nil, err
			}
		}
		pc = kvevents.PublisherConfig{Endpoint: ep, Connect: true, Topic: name}
	} else {
		ep, err := offsetPort(cfg.EventsBind, i)
		if err != nil {
			return nil, err
		}
		pc = kvevents.PublisherConfig{Endpoint: ep}
	}
	if cfg.EventsReplay != "" {
		ep, err := offsetPort(cfg.EventsReplay, i)
		if err != nil {
			return nil, err
		}
		pc.ReplayEndpoint, pc.ReplaySize = ep, cfg.ReplaySize
	}
	if cfg.EventsFor != nil {
		pc = cfg.EventsFor(i, pc)
	}
	return kvevents.NewPublisher(pc)
}

// offsetPort adds i to the port of a tcp://host:port endpoint, as vLLM
// offsets its event port by data-parallel rank; port 0 stays 0.
func offsetPort(endpoint string, i int) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", fmt.Errorf("events endpoint %q is not tcp://host:port", endpoint)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("events endpoint %q: %w", endpoint, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("events endpoint %q: bad port", endpoint)
	}
	if n > 0 {
		n += i
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// PortPlan pins a fleet's ports: worker i serves HTTP on HTTP+i and
// publishes KV events on Events+i. The zero value leaves both to the
// system, which picks free ports.
type PortPlan struct {
	// HTTP is worker 0's HTTP port; 0 means any free ports.
	HTTP int
	// Events is worker 0's KV-event port; 0 means the port after the last
	// worker's HTTP port.
	Events int
}

// ParsePortPlan reads "P" (HTTP ports from P, then the event ports) or
// "P,E" (HTTP ports from P, event ports from E), as --sim-ports takes them.
// Whether the ranges fit a fleet is Check's to say.
func ParsePortPlan(s string) (PortPlan, error) {
	first, second, two := strings.Cut(s, ",")
	var p PortPlan
	var err error
	if p.HTTP, err = parsePort(first); err != nil {
		return PortPlan{}, err
	}
	if two {
		if p.Events, err = parsePort(second); err != nil {
			return PortPlan{}, err
		}
	}
	return p, nil
}

func parsePort(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("sim: port %q is not a number from 1 to 65535 (want PORT, or HTTP_PORT,EVENTS_PORT)", s)
	}
	return n, nil
}

// EventsFrom is worker 0's event port in a fleet of count workers.
func (p PortPlan) EventsFrom(count int) int {
	if p.Events == 0 && p.HTTP > 0 {
		return p.HTTP + count
	}
	return p.Events
}

// Check refuses a plan whose ports run past 65535 or overlap, for a fleet
// of count workers.
func (p PortPlan) Check(count int) error {
	if p.HTTP == 0 {
		return nil
	}
	ev := p.EventsFrom(count)
	switch {
	case p.HTTP+count-1 > 65535:
		return fmt.Errorf("sim: %d workers' HTTP ports from %d run past 65535", count, p.HTTP)
	case ev+count-1 > 65535:
		return fmt.Errorf("sim: %d workers' event ports from %d run past 65535", count, ev)
	case ev <= p.HTTP+count-1 && p.HTTP <= ev+count-1:
		return fmt.Errorf("sim: HTTP ports %d-%d and event ports %d-%d overlap", p.HTTP, p.HTTP+count-1, ev, ev+count-1)
	}
	return nil
}

// String writes the plan as ParsePortPlan reads it.
func (p PortPlan) String() string {
	if p.Events == 0 {
		return strconv.Itoa(p.HTTP)
	}
	return fmt.Sprintf("%d,%d", p.HTTP, p.Events)
}

// MaxWorkers is the most workers one simulated fleet may have.
const MaxWorkers = 1024

// maxFleetBlocks bounds the KV blocks of a whole fleet, which it allocates
// at start, about 50 bytes each: 16,777,216 blocks are about 800 MB, and
// 1,024 H200 workers hold 12.6 million.
const maxFleetBlocks = 1 << 24

// CheckFleet reports, in one line, a fleet of workers of profile p that
// this machine should not try to build: fewer than one worker, more than
// MaxWorkers, or more KV blocks in all than memory should hold.
func CheckFleet(workers int, p Profile) error {
	switch {
	case workers < 1:
		return fmt.Errorf("sim: a fleet needs at least 1 worker, got %d", workers)
	case workers > MaxWorkers:
		return fmt.Errorf("sim: a fleet of %d workers: at most %d", workers, MaxWorkers)
	case workers*p.KVBlocks > maxFleetBlocks:
		return fmt.Errorf("sim: %d workers of %d KV blocks each hold %d blocks, more than the %d (about 800 MB) a fleet may allocate", workers, p.KVBlocks, workers*p.KVBlocks, maxFleetBlocks)
	}
	return nil
}
