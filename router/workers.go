package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlens/kvlens/clock"
)

// DefaultCapacity is a worker's batch capacity (max_batch_size) when nothing
// else says: TensorRT-LLM's default, and the seeds' deployment.
const DefaultCapacity = 64

// DNSRefresh is how often a dns:// worker source is resolved again.
const DNSRefresh = 10 * time.Second

// Worker is one inference worker behind the proxy.
type Worker struct {
	// Name identifies the worker in headers and on the dashboard.
	Name string
	// URL is the worker's base URL, without the /v1 suffix.
	URL *url.URL
	// Events is the worker's KV-event endpoint, such as tcp://host:5557;
	// empty when it publishes none.
	Events string
	// EventsBind says kvlens binds Events and the worker's publisher
	// connects to it, instead of kvlens dialing the worker: an events=
	// endpoint whose host is * (tcp://*:5557), or a bind= one.
	EventsBind bool
	// Replay is the worker's replay (ROUTER) endpoint, such as
	// tcp://host:5558; empty when it offers none. kvlens dials it to fill
	// gaps and to catch up on what was published before it joined.
	Replay string
	// Parent0 says what a parent block hash of 0 means in the worker's
	// events: one of Parent0Modes; empty means Parent0Auto.
	Parent0 string
	// stream is the worker's KV-event stream state, kept by a Feed.
	stream atomic.Pointer[eventStream]
	// Capacity is the batch capacity (max_batch_size) that the worker's
	// capacity= option set, in requests; 0 means it set none, and the
	// router's flag, then what the worker reports, then DefaultCapacity
	// apply. BatchCapacity says which one does.
	Capacity int

	unhealthy atomic.Bool
	// flagCapacity is the router's --max-batch-size, 0 when unset.
	flagCapacity atomic.Int64
	// learn is what the worker reported about its batch capacity.
	learn learnState
	// autoProbe is what --tokenizer auto's probes of the worker found.
	autoProbe probeState
	// maxModelLen is the max_model_len the worker reported, in tokens; 0
	// before it has reported one.
	maxModelLen atomic.Int64
	// load is guarded by the Router's lock.
	load load
	// Counters for the admin API.
	routed, predictedHit, actualHit, errors atomic.Int64
}

// Where a worker's batch capacity came from, as BatchCapacity and the admin
// API say.
const (
	// CapacityFlag is a capacity= worker option or the router's
	// --max-batch-size flag.
	CapacityFlag = "flag"
	// CapacityWorker is what the worker itself reports.
	CapacityWorker = "worker"
	// CapacityDefault is DefaultCapacity: nothing else said.
	CapacityDefault = "default"
)

// BatchCapacity returns the worker's batch capacity in requests and where it
// came from. An explicit setting wins over what the worker reports, which
// wins over DefaultCapacity: the operator can always correct a worker.
func (w *Worker) BatchCapacity() (int, string) {
	switch {
	case w.Capacity > 0:
		return w.Capacity, CapacityFlag
	case w.flagCapacity.Load() > 0:
		return int(w.flagCapacity.Load()), CapacityFlag
	case w.learn.reported.Load() > 0:
		return int(w.learn.reported.Load()), CapacityWorker
	}
	return DefaultCapacity, CapacityDefault
}

// Healthy reports whether the worker may get new requests.
func (w *Worker) Healthy() bool { return !w.unhealthy.Load() }

// SetHealthy marks the worker fit or unfit for new requests.
func (w *Worker) SetHealthy(ok bool) { w.unhealthy.Store(!ok) }

// DNSSource is a dns://service:port worker source: every address service
// resolves to is a worker at http://address:port.
type DNSSource struct {
	// Service is the host name to resolve, such as a Kubernetes headless
	// Service.
	Service string
	// Port is the workers' HTTP port.
	Port string
	// EventsPort, when set, is each worker's KV-event port.
	EventsPort string
	// ReplayPort, when set, is each worker's replay (ROUTER) port.
	ReplayPort string
}

// Fleet is a parsed --workers list.
type Fleet struct {
	// Static are the workers named outright.
	Static []*Worker
	// DNS are the sources resolved at run time.
	DNS []DNSSource
}

// SplitWorkerList splits a comma-separated --workers value into worker
// specs; a piece such as events=… or capacity=… belongs to the spec before it.
func SplitWorkerList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if k, _, ok := strings.Cut(p, "="); ok && len(out) > 0 && slices.Contains(workerOptions, k) {
			out[len(out)-1] += "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}

// workerOptions are the keys a worker spec may add after its URL.
// MaxCapacity bounds a worker's batch capacity as kvlens is told it
// (capacity=, --max-batch-size), in requests: no engine batches that many
// sequences at once (vLLM's max_num_seqs defaults to 256 to 1,024), so a
// larger number is a typo, and with it no worker would ever read as busy.
const MaxCapacity = 1 << 16

var workerOptions = []string{"events", "bind", "replay", "parent0", "capacity"}

// ParseFleet parses worker specs, each one of:
//
//	http://host:port                                   named w<i>
//	name=http://host:port[,events=tcp://host:port][,replay=tcp://host:port][,parent0=auto|none|hash][,capacity=N]
//	dns://service:port[?events=PORT][&replay=PORT]
//
// events= is where the worker's KV events come from. With a host, kvlens
// connects to the worker's PUB socket, as to vLLM's default tcp://*:5557.
// With * as the host (events=tcp://*:5557), or as bind=tcp://host:port,
// kvlens binds that port and the worker's publisher connects to it.
func ParseFleet(specs []string) (Fleet, error) {
	var f Fleet
	seen := map[string]bool{}
	for i, spec := range specs {
		if rest, ok := strings.CutPrefix(spec, "dns://"); ok {
			src, err := parseDNS(rest)
			if err != nil {
				return Fleet{}, fmt.Errorf("worker %d: %q: %w", i, spec, err)
			}
			f.DNS = append(f.DNS, src)
			continue
		}
		w, err := parseWorker(i, spec)
		if err != nil {
			return Fleet{}, fmt.Errorf("worker %d: %w", i, err)
		}
		if seen[w.Name] {
			return Fleet{}, fmt.Errorf("worker %d: name %q is used twice", i, w.Name)
		}
		seen[w.Name] = true
		f.Static = append(f.Static, w)
	}
	if len(f.Static) == 0 && len(f.DNS) == 0 {
		return Fleet{}, errors.New("no workers given")
	}
	return f, nil
}

func parseDNS(rest string) (DNSSource, error) {
	hostport, query, _ := strings.Cut(rest, "?")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return DNSSource{}, errors.New("want dns://service:port")
	}
	src := DNSSource{Service: host, Port: port}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return DNSSource{}, fmt.Errorf("bad query: %w", err)
		}
		for k, v := range q {
			switch {
			case k != "events" && k != "replay":
				// A misspelt key would leave the workers without events.
				return DNSSource{}, fmt.Errorf("unknown option %q: want events=PORT or replay=PORT", k)
			case len(v) != 1 || v[0] == "":
				return DNSSource{}, fmt.Errorf("%s= wants one port", k)
			}
		}
		src.EventsPort = q.Get("events")
		src.ReplayPort = q.Get("replay")
	}
	for _, p := range []string{src.Port, src.EventsPort, src.ReplayPort} {
		if n, err := strconv.Atoi(p); p != "" && (err != nil || n < 1 || n > 65535) {
			return DNSSource{}, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
	}
	return src, nil
}

func parseWorker(i int, spec string) (*Worker, error) {
	parts := strings.Split(spec, ",")
	w := &Worker{Name: fmt.Sprintf("w%d", i)}
	raw := parts[0]
	if name, u, ok := strings.Cut(raw, "="); ok && !strings.Contains(name, "/") {
		if name == "" {
			return nil, fmt.Errorf("%q has an empty name", spec)
		}
		w.Name, raw = name, u
	}
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) base URL", raw)
	}
	if strings.HasSuffix(u.Path, "/v1") {
		// kvlens adds /v1 itself: this one's health checks would all fail.
		return nil, fmt.Errorf("%q: give the worker's base URL, without /v1", raw)
	}
	w.URL = u
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "events", "bind":
			if w.Events != "" {
				return nil, fmt.Errorf("%q gives more than one events= or bind= endpoint", spec)
			}
			host, err := tcpEndpoint(k, v)
			if err != nil {
				return nil, err
			}
			w.Events, w.EventsBind = v, k == "bind" || host == "*"
		case "replay":
			host, err := tcpEndpoint(k, v)
			if err != nil {
				return nil, err
			}
			if host == "*" || net.ParseIP(host).IsUnspecified() {
				return nil, fmt.Errorf("replay %q: kvlens dials the worker's replay socket, so it needs the worker's host, not %s", v, host)
			}
			w.Replay = v
		case "parent0":
			if !slices.Contains(Parent0Modes, v) {
				return nil, fmt.Errorf("parent0 %q is not one of %s", v, strings.Join(Parent0Modes, ", "))
			}
			w.Parent0 = v
		case "capacity":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxCapacity {
				return nil, fmt.Errorf("capacity %q is not a whole number from 1 to %d", v, MaxCapacity)
			}
			w.Capacity = n
		default:
			return nil, fmt.Errorf("unknown worker option %q in %q (want one of %s)", k, spec, strings.Join(workerOptions, "=, ")+"=")
		}
	}
	if w.Replay != "" && w.Events == "" {
		return nil, fmt.Errorf("%q gives replay= without events= or bind=", spec)
	}
	return w, nil
}

// tcpEndpoint checks that v, the value of option k, is tcp://host:port
// with a port from 1 to 65535, and returns the host.
func tcpEndpoint(k, v string) (string, error) {
	rest, ok := strings.CutPrefix(v, "tcp://")
	if !ok {
		return "", fmt.Errorf("%s %q is not a tcp://host:port endpoint", k, v)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil || host == "" {
		return "", fmt.Errorf("%s %q is not a tcp://host:port endpoint", k, v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%s %q: port %q is not a number from 1 to 65535", k, v, port)
	}
	return host, nil
}

// ParseWorkers turns worker specs (base URLs, or name=url forms) into
// workers; a plain URL is named w<i>. It refuses dns:// sources, which need
// a Pool.
func ParseWorkers(specs []string) ([]*Worker, error) {
	f, err := ParseFleet(specs)
	if err != nil {
		return nil, err
	}
	if len(f.DNS) > 0 {
		return nil, errors.New("dns:// worker sources need a router Pool")
	}
	return f.Static, nil
}

// Resolver looks up host names; *net.Resolver is one.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Pool is the live set of workers: static ones, plus those DNS sources
// resolve to. It is safe for concurrent use.
type Pool struct {
	mu       sync.Mutex
	static   []*Worker
	dns      map[DNSSource][]*Worker
	all      atomic.Pointer[[]*Worker]
	onLeave  []func(*Worker)
	onHealth []func(w *Worker, healthy bool)
	capacity int // the router's --max-batch-size; 0 when unset
}

// NewPool returns a pool of the static workers.
func NewPool(static []*Worker) *Pool {
	p := &Pool{static: static, dns: map[DNSSource][]*Worker{}}
	p.publish()
	return p
}

// OnLeave registers f to run for every worker that leaves the pool.
func (p *Pool) OnLeave(f func(*Worker)) {
	p.mu.Lock()
	p.onLeave = append(p.onLeave, f)
	p.mu.Unlock()
}

// OnHealthChange registers f to run for every worker whose health check
// turns: healthy false when it fails after passing, true when it passes
// after failing (the worker is re-admitted).
func (p *Pool) OnHealthChange(f func(w *Worker, healthy bool)) {
	p.mu.Lock()
	p.onHealth = append(p.onHealth, f)
	p.mu.Unlock()
}

// Workers returns the current workers. The slice is shared: do not modify.
func (p *Pool) Workers() []*Worker { return *p.all.Load() }

// SetCapacity sets the router's --max-batch-size: the batch capacity of
// every worker whose own spec sets none, now and for workers that join
// later, whatever the workers report. n <= 0 unsets it, so that what each
// worker reports, or else DefaultCapacity, applies.
func (p *Pool) SetCapacity(n int) {
	n = max(n, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range *p.all.Load() {
		w.flagCapacity.Store(int64(n))
	}
	p.capacity = n
}

func (p *Pool) publish() {
	all := slices.Clone(p.static)
	srcs := make([]DNSSource, 0, len(p.dns))
	for s := range p.dns {
		srcs = append(srcs, s)
	}
	slices.SortFunc(srcs, func(a, b DNSSource) int { return strings.Compare(a.Service+a.Port, b.Service+b.Port) })
	for _, s := range srcs {
		all = append(all, p.dns[s]...)
	}
	p.all.Store(&all)
}

// Resolve resolves src once, adding workers for new addresses and removing
// those whose address went away.
func (p *Pool) Resolve(ctx context.Context, r Resolver, src DNSSource) error {
	addrs, err := r.LookupHost(ctx, src.Service)
	if err != nil {
		return fmt.Errorf("router: resolve %s: %w", src.Service, err)
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	p.mu.Lock()
	old := p.dns[src]
	byName := map[string]*Worker{}
	for _, w := range old {
		byName[w.Name] = w
	}
	var now, left []*Worker
	for _, a := range addrs {
		name := net.JoinHostPort(a, src.Port)
		if w, ok := byName[name]; ok {
			now = append(now, w)
			delete(byName, name)
			continue
		}
		w := &Worker{Name: name, URL: &url.URL{Scheme: "http", Host: name}}
		w.flagCapacity.Store(int64(p.capacity))
		if src.EventsPort != "" {
			w.Events = "tcp://" + net.JoinHostPort(a, src.EventsPort)
			if src.ReplayPort != "" {
				w.Replay = "tcp://" + net.JoinHostPort(a, src.ReplayPort)
			}
		}
		now = append(now, w)
	}
	for _, w := range old {
		if _, gone := byName[w.Name]; gone {
			left = append(left, w)
		}
	}
	p.dns[src] = now
	p.publish()
	hooks := slices.Clone(p.onLeave)
	p.mu.Unlock()
	for _, w := range left {
		w.SetHealthy(false)
		for _, f := range hooks {
			f(w)
		}
	}
	return nil
}

// Discover resolves src every DNSRefresh until ctx ends. A failed lookup
// keeps the workers it last found.
func (p *Pool) Discover(ctx context.Context, clk clock.Clock, r Resolver, src DNSSource, logf func(string, ...any)) {
	every(ctx, clk, DNSRefresh, func() {
		if err := p.Resolve(ctx, r, src); err != nil && logf != nil {
			logf("%v", err)
		}
	})
}

// CheckHealth asks every worker's GET /health once and marks it healthy on
// 200, unhealthy on anything else or no answer within timeout. A healthy
// worker is also asked its batch capacity when that is due (see
// CapacityRefresh).
func (p *Pool) CheckHealth(ctx context.Context, client *http.Client, timeout time.Duration) {
	p.checkHealth(ctx, clock.Real, client, timeout, nil)
}

func (p *Pool) checkHealth(ctx context.Context, clk clock.Clock, client *http.Client, timeout time.Duration, logf func(string, ...any)) {
	p.mu.Lock()
	hooks := slices.Clone(p.onHealth)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range p.Workers() {
		wg.Go(func() {
			ok := health(ctx, client, timeout, w)
			if wasUnhealthy := w.unhealthy.Swap(!ok); wasUnhealthy == ok {
				for _, f := range hooks {
					f(w, ok)
				}
			}
			if w.learn.due(clk.Now(), ok) {
				// Both asks share one timeout, so that a worker hanging on
				// them delays its health poll by at most that.
				ctx, cancel := context.WithTimeout(ctx, timeout)
				learnCapacity(ctx, client, timeout, w, logf)
				learnMaxModelLen(ctx, client, w, logf)
				cancel()
			}
		})
	}
	wg.Wait()
}

// health reports whether w's GET /health answers 200 within timeout.
func health(ctx context.Context, client *http.Client, timeout time.Duration, w *Worker) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL.JoinPath("/health").String(), nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// every runs f now and then every d until ctx ends, timed by clk.
func every(ctx context.Context, clk clock.Clock, d time.Duration, f func()) {
	for {
		f()
		tick := make(chan struct{})
		t := clk.AfterFunc(d, func() { close(tick) })
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
		}
	}
}

// Watch keeps the pool current until ctx ends: it asks every worker's
// /health every healthEvery (timing out after the same), with its batch
// capacity when due, and resolves each DNS source every DNSRefresh. A nil
// resolver means net.DefaultResolver.
func (p *Pool) Watch(ctx context.Context, clk clock.Clock, client *http.Client, dns []DNSSource, r Resolver, healthEvery time.Duration, logf func(string, ...any)) {
	if r == nil {
		r = net.DefaultResolver
	}
	var wg sync.WaitGroup
	for _, src := range dns {
		wg.Go(func() { p.Discover(ctx, clk, r, src, logf) })
	}
	wg.Go(func() {
		every(ctx, clk, healthEvery, func() { p.checkHealth(ctx, clk, client, healthEvery, logf) })
	})
	wg.Wait()
}
