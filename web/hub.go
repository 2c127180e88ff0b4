package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlens/kvlens/access"
)

const (
	// tickEvery is the push rate: 1 Hz, like the original demo.
	tickEvery = time.Second
	// closeWait bounds the close frame sent to every browser at shutdown.
	closeWait = time.Second
	// releaseAfter is how many viewers must have left, the last of them
	// more than a tick ago, before the hub hands freed memory back to the
	// kernel: kvlens runs with GOGC=400 (loadgen.TuneGC), so after a crowd
	// the heap would otherwise keep its peak for minutes.
	releaseAfter = 200
	// releaseEvery is the least time between two such returns, each a full
	// garbage collection.
	releaseEvery = 10 * time.Second
	// readLimit is the largest message a browser may send, in bytes; the
	// dashboard expects none.
	readLimit = 4096
)

// DefaultMaxViewers is how many browsers may watch at once unless told
// otherwise: a conference hall of phones. Each costs two goroutines, about
// 3.5 KB/s on the wire with the A/B demo's two fleets (14 KB/s of frames,
// compressed; BenchmarkHub100Browsers has the ratio) and about 50 KB of RSS
// at kvlens's GOGC=400 (BenchmarkNonReadingViewers), so 500 is 14 Mbit/s,
// more than booth Wi-Fi carries, and 25 MB.
const DefaultMaxViewers = 500

// DefaultMaxPerAddress is how many of those places one address may hold
// unless told otherwise: a visitor's phone and laptop with a few tabs each,
// or a few colleagues behind one NAT. It takes 32 addresses to fill
// DefaultMaxViewers, so one client opening websockets that never read
// cannot lock every other viewer out (an audit held all 500 from one
// address). Behind a proxy or gateway every viewer has the proxy's address:
// raise it to MaxViewers there.
const DefaultMaxPerAddress = 16

// Reasons a viewer is dropped or refused, as the
// kvlens_web_viewer_drops_total metric labels them.
const (
	dropCap     = "cap"         // refused: MaxViewers were already watching
	dropAddress = "address"     // refused: its address already held MaxPerAddress
	dropIdle    = "idle"        // sent nothing, not even a pong, for IdleTimeout
	dropBacklog = "backlog"     // its oldest unsent frame waited past MaxBacklog, or its queue outgrew MaxQueueBytes
	dropWrite   = "write_error" // a write or ping failed
)

// HubLimits bounds what the dashboard's viewers may cost, so that no visitor,
// slow or hostile, can exhaust the server. A zero field takes its default.
type HubLimits struct {
	// MaxViewers is how many websockets may be open at once; past it a new
	// one is refused with 503 before the upgrade. Default DefaultMaxViewers.
	MaxViewers int
	// MaxPerAddress is how many of them one address may hold at once, an
	// IPv6 address counted with the rest of its /64 (what one host is
	// usually given); past it a new one is refused with 429 before the
	// upgrade. Loopback counts like any other address: on a booth machine
	// it is where a stray local program connects from, and the operator's
	// own browser needs one or two. Default DefaultMaxPerAddress.
	MaxPerAddress int
	// PingEvery is how often each viewer is pinged. Default 10 s.
	PingEvery time.Duration
	// IdleTimeout closes a viewer that has sent nothing, not even the pong
	// its browser answers every ping with, for this long. Default 25 s, so
	// a client that never reads is gone within 30 s.
	IdleTimeout time.Duration
	// MaxBacklog drops a viewer whose oldest unsent frame has waited longer
	// than this. Default 5 s: five ticks.
	MaxBacklog time.Duration
	// MaxQueueBytes drops a viewer whose unsent frames hold more than this
	// many bytes. Default 4 MiB.
	MaxQueueBytes int
	// WriteTimeout bounds one websocket write. Default 5 s.
	WriteTimeout time.Duration
}

func (l HubLimits) withDefaults() HubLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if l.MaxViewers <= 0 {
		l.MaxViewers = DefaultMaxViewers
	}
	if l.MaxPerAddress <= 0 {
		l.MaxPerAddress = DefaultMaxPerAddress
	}
	if l.MaxQueueBytes <= 0 {
		l.MaxQueueBytes = 4 << 20
	}
	def(&l.PingEvery, 10*time.Second)
	def(&l.IdleTimeout, 25*time.Second)
	def(&l.MaxBacklog, 5*time.Second)
	def(&l.WriteTimeout, 5*time.Second)
	return l
}

// hubMetrics are the hub's Prometheus series.
type hubMetrics struct {
	viewers prometheus.Gauge
	drops   *prometheus.CounterVec
}

func newHubMetrics(reg prometheus.Registerer) *hubMetrics {
	m := &hubMetrics{
		viewers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvlens_web_viewers", Help: "Browsers connected to the dashboard's websocket.",
		}),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvlens_web_viewer_drops_total", Help: "Websockets refused (cap, address) or closed by the server (idle, backlog, write_error), by reason.",
		}, []string{"reason"}),
	}
	for _, r := range []string{dropCap, dropAddress, dropIdle, dropBacklog, dropWrite} {
		m.drops.WithLabelValues(r) // every reason is exported from the start, at 0
	}
	if reg != nil {
		reg.MustRegister(m.viewers, m.drops)
	}
	return m
}

// Hub pushes frames to every connected browser at 1 Hz.
type Hub struct {
	tick  func() [][]byte // frames for everyone, built once per tick
	hello func() [][]byte // frames for a browser that just connected

	lim      HubLimits
	metrics  *hubMetrics
	upgrader websocket.Upgrader
	mu       sync.Mutex
	clients  map[*client]struct{}
	pending  int                  // upgrades under way, counted against MaxViewers
	held     map[netip.Prefix]int // viewers and upgrades under way by address, counted against MaxPerAddress
	greeting []frame              // hello's frames since the last tick; nil: not built
	left     int                  // viewers gone since memory was last handed back
	leftNow  bool                 // a viewer went during this tick
	released time.Time
	closed   bool
}

// client is one browser. The hub appends frames to its queue; its writer
// goroutine sends them, oldest first, and pings; its reader goroutine
// notices pongs and departures.
type client struct {
	conn *websocket.Conn
	addr netip.Prefix  // where it connected from, as held counts it
	wake chan struct{} // capacity 1: the queue has grown
	gone chan struct{} // closed once the hub has let the client go

	mu    sync.Mutex
	queue []queued // unsent frames, oldest first
	bytes int      // bytes in queue
	// shutdown is set when the hub itself ends: the writer says goodbye
	// with a close frame that tells the browser to come back.
	shutdown bool
	stopped  bool
}

// queued is a frame and when the hub queued it, to measure backlog in time.
type queued struct {
	at time.Time
	frame
}

// frame is one message for every browser, encoded once whoever receives it:
// compressed for those that negotiated it, plain for the others.
type frame struct {
	msg  *websocket.PreparedMessage
	size int // bytes before compression, counted against MaxQueueBytes
}

// prepare makes frames of messages built once per tick.
func prepare(msgs [][]byte) []frame {
	frames := make([]frame, 0, len(msgs))
	for _, m := range msgs {
		pm, err := websocket.NewPreparedMessage(websocket.TextMessage, m)
		if err != nil {
			slog.Error("websocket frame dropped", "err", err)
			continue
		}
		frames = append(frames, frame{msg: pm, size: len(m)})
	}
	return frames
}

// NewHub returns a hub that sends tick's frames every second, and hello's to
// each new browser, within lim; reg, when not nil, receives its metrics.
func NewHub(tick, hello func() [][]byte, lim HubLimits, reg prometheus.Registerer) *Hub {
	h := &Hub{tick: tick, hello: hello, clients: map[*client]struct{}{}, held: map[netip.Prefix]int{}}
	h.lim = lim.withDefaults()
	h.metrics = newHubMetrics(reg)
	// Frames are mostly HTML and JSON, 14 KB a second with the A/B view's
	// six workers, and compress fourfold, to 3.5 KB a second
	// (permessage-deflate without context takeover, which is what
	// gorilla/websocket offers): what each phone in a hall on booth Wi-Fi
	// receives. A frame is compressed once per tick, not once per viewer.
	h.upgrader = websocket.Upgrader{CheckOrigin: sameOrigin, EnableCompression: true}
	// A write buffer is borrowed only while a frame is written, so a viewer
	// that waits costs none; reads reuse the HTTP server's 4 KB buffer.
	h.upgrader.WriteBufferPool = &sync.Pool{}
	return h
}

// sameOrigin refuses a websocket opened by a page of another origin, so
// that neither a foreign site nor another program on this host (a page at
// http://localhost:9999) can read the dashboard through a visitor's
// browser: the Origin's host and port must be the request's Host, with an
// absent port read as its scheme's default (80 for http, 443 for https) and
// the host compared as a browser does, without regard to case. Requests
// without an Origin (not from a browser) are allowed.
//
// A Host without a port is taken to be on the Origin's scheme's default
// port: behind an ingress that ends TLS, the page https://booth.example
// opens a websocket that arrives as plain HTTP with Host booth.example.
// Over TLS the Origin must be https.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	def, ok := defaultPorts[u.Scheme]
	if !ok || (r.TLS != nil && u.Scheme != "https") {
		return false
	}
	oh, op := splitHost(u.Host, def)
	rh, rp := splitHost(r.Host, def)
	return oh == rh && op == rp
}

// defaultPorts are the ports a browser leaves out of an Origin or a Host.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// splitHost splits a Host header or an Origin's host into the host, lower
// case and, for an address, in its canonical form, and the port, def when
// there is none.
func splitHost(hostport, def string) (host, port string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), def
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), port
	}
	return strings.ToLower(host), port
}

// Clients returns how many browsers are connected.
func (h *Hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// Run pushes frames every second until ctx ends, then disconnects everyone.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	defer h.closeAll()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.broadcast(h.tick())
			if h.crowdGone() {
				go debug.FreeOSMemory()
			}
		}
	}
}

// broadcast queues frames for every browser, and drops those too far
// behind rather than stall everyone else or hold their backlog.
func (h *Hub) broadcast(msgs [][]byte) {
	frames := prepare(msgs)
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if !c.push(now, frames, h.lim) {
			h.removeLocked(c, dropBacklog)
		}
	}
	h.greeting = nil // the history has moved on
}

// crowdGone reports, once per crowd, that at least releaseAfter viewers
// have left and none during the last tick.
func (h *Hub) crowdGone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	gone := h.left >= releaseAfter && !h.leftNow && time.Since(h.released) > releaseEvery
	if gone {
		h.left, h.released = 0, time.Now()
	}
	h.leftNow = false
	return gone
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		c.mu.Lock()
		c.shutdown = true
		c.mu.Unlock()
		h.removeLocked(c, "")
	}
}

// ServeWS upgrades a browser's request and registers it, unless its address
// already holds MaxPerAddress places or MaxViewers are already watching.
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request) {
	// Checked before the cap, so that a foreign page cannot use up places.
	if !h.upgrader.CheckOrigin(r) {
		http.Error(w, "websocket refused: origin "+r.Header.Get("Origin")+" is not this dashboard", http.StatusForbidden)
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "websocket refused: the dashboard is shutting down", http.StatusServiceUnavailable)
		return
	}
	addr := access.PeerPrefix(r.RemoteAddr)
	if h.held[addr] >= h.lim.MaxPerAddress {
		h.mu.Unlock()
		h.metrics.drops.WithLabelValues(dropAddress).Inc()
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("websocket refused: %s already has %d dashboards open, the most one address may (--max-viewers-per-address); close one and reload", access.PrefixName(addr), h.lim.MaxPerAddress), http.StatusTooManyRequests)
		return
	}
	if len(h.clients)+h.pending >= h.lim.MaxViewers {
		h.mu.Unlock()
		h.metrics.drops.WithLabelValues(dropCap).Inc()
		// The browser retries with backoff; a viewer leaving makes room.
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("websocket refused: the dashboard already has its limit of %d viewers (--max-viewers); try again later", h.lim.MaxViewers), http.StatusServiceUnavailable)
		return
	}
	h.pending++
	h.held[addr]++
	h.mu.Unlock()

	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		h.mu.Lock()
		h.pending--
		h.releaseLocked(addr)
		h.mu.Unlock()
		return // the upgrader has answered the client
	}
	c := &client{conn: conn, addr: addr, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	h.mu.Lock()
	h.pending--
	if h.closed {
		h.releaseLocked(addr)
		h.mu.Unlock()
		conn.Close()
		return
	}
	// Built once per tick and shared, so a crowd arriving together costs
	// one rendering; under h.mu, so no tick falls between the hello and
	// the registration. Queued whatever its size (the chart's history).
	if h.greeting == nil {
		h.greeting = prepare(h.hello())
	}
	c.push(time.Now(), h.greeting, HubLimits{MaxBacklog: time.Hour, MaxQueueBytes: math.MaxInt})
	h.clients[c] = struct{}{}
	h.metrics.viewers.Set(float64(len(h.clients)))
	h.mu.Unlock()
	go h.write(c)
	go h.read(c)
}

// releaseLocked gives back one of addr's places. h.mu must be held.
func (h *Hub) releaseLocked(addr netip.Prefix) {
	if h.held[addr] <= 1 {
		delete(h.held, addr) // the map holds only addresses with viewers
		return
	}
	h.held[addr]--
}

// push queues frames queued at now; false means the client is too far
// behind: its oldest unsent frame is older than lim.MaxBacklog, or its
// queue would hold more than lim.MaxQueueBytes.
func (c *client) push(now time.Time, frames []frame, lim HubLimits) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) > 0 && now.Sub(c.queue[0].at) > lim.MaxBacklog {
		return false
	}
	for _, f := range frames {
		c.queue = append(c.queue, queued{at: now, frame: f})
		c.bytes += f.size
	}
	if c.bytes > lim.MaxQueueBytes {
		return false
	}
	select {
	case c.wake <- struct{}{}:
	default: // already woken
	}
	return true
}

// next returns the oldest unsent frame, which stays queued (and counts
// toward the backlog) until done is called.
func (c *client) next() (*websocket.PreparedMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 || c.stopped {
		return nil, false
	}
	return c.queue[0].msg, true
}

func (c *client) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) > 0 {
		c.bytes -= c.queue[0].size
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
	}
}

// removeLocked lets c go; reason, when not empty, counts it as dropped and
// hangs up at once. The first removal wins. h.mu must be held.
func (h *Hub) removeLocked(c *client, reason string) {
	if _, ok := h.clients[c]; !ok {
		return
	}
	delete(h.clients, c)
	h.releaseLocked(c.addr)
	h.metrics.viewers.Set(float64(len(h.clients)))
	h.left++
	h.leftNow = true
	c.mu.Lock()
	c.stopped = true
	c.queue, c.bytes = nil, 0
	shutdown := c.shutdown
	c.mu.Unlock()
	close(c.gone)
	if reason == "" {
		if !shutdown {
			c.conn.Close() // the browser left
		}
		return // at shutdown the writer says goodbye
	}
	h.metrics.drops.WithLabelValues(reason).Inc()
	slog.Debug("websocket viewer dropped", "reason", reason, "remote", c.conn.RemoteAddr())
	hangUp(c.conn)
}

func (h *Hub) remove(c *client, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(c, reason)
}

// hangUp closes a connection that is not keeping up. It resets rather than
// lingers: unsent bytes would otherwise keep the socket in the kernel for
// minutes. The browser sees code 1006 and reconnects. The connection is a
// *net.TCPConn, or one of connlimit's, which keeps its methods.
func hangUp(conn *websocket.Conn) {
	if tcp, ok := conn.NetConn().(interface{ SetLinger(sec int) error }); ok {
		tcp.SetLinger(0)
	}
	conn.Close()
}

// write sends queued frames and pings until the client is let go.
func (h *Hub) write(c *client) {
	ping := time.NewTicker(h.lim.PingEvery)
	defer ping.Stop()
	for {
		select {
		case <-c.gone:
			c.mu.Lock()
			shutdown := c.shutdown
			c.mu.Unlock()
			if shutdown {
				// 1012 (service restart) makes htmx's ws extension reconnect
				// once kvlens is back.
				msg := websocket.FormatCloseMessage(websocket.CloseServiceRestart, "kvlens is stopping")
				c.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeWait))
				c.conn.Close()
			}
			return
		case <-ping.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(h.lim.WriteTimeout)); err != nil {
				h.remove(c, dropWrite)
			}
		case <-c.wake:
			for {
				f, ok := c.next()
				if !ok {
					break
				}
				c.conn.SetWriteDeadline(time.Now().Add(h.lim.WriteTimeout))
				if err := c.conn.WritePreparedMessage(f); err != nil {
					h.remove(c, dropWrite)
					break
				}
				c.done()
			}
		}
	}
}

// read discards what the browser sends, and notices pongs, silence and
// departures.
func (h *Hub) read(c *client) {
	c.conn.SetReadLimit(readLimit)
	alive := func() { c.conn.SetReadDeadline(time.Now().Add(h.lim.IdleTimeout)) }
	alive()
	c.conn.SetPongHandler(func(string) error { alive(); return nil })
	for {
		_, msg, err := c.conn.NextReader()
		if err == nil {
			// The read limit counts the bytes on the wire, and a message
			// compressed with permessage-deflate may inflate a thousandfold
			// (4 KB sent, 4 MB held), so what it inflates to is limited too,
			// and streamed away rather than held.
			var n int64
			n, err = io.Copy(io.Discard, io.LimitReader(msg, readLimit+1))
			if err == nil && n > readLimit {
				c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseMessageTooBig, "the dashboard expects no messages"), time.Now().Add(time.Second))
				err = websocket.ErrReadLimit
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				h.remove(c, dropIdle)
			} else {
				h.remove(c, "")
			}
			return
		}
		alive()
	}
}
