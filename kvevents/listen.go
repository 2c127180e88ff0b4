package kvevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"

	"github.com/kvlens/kvlens/internal/connlimit"
)

// go-zeromq closes a socket's connections before its listener, and its
// accept loop checks for shutdown only between accepts. A peer that redials
// the moment its connection drops (as ours do) can therefore be accepted into
// a socket that is closing, and stay connected to nothing, never redialing
// the socket that replaces it. Every socket this package binds uses
// closingTCP, whose listener refuses connections once the socket's context
// has ended; go-zeromq cancels that context before it closes anything.

// closingScheme is the zmq4 transport name bound endpoints are rewritten to.
const closingScheme = "kvevents-tcp"

func init() {
	if err := zmq4.RegisterTransport(closingScheme, closingTCP{transport.New("tcp")}); err != nil {
		panic(err) // only if the name is taken, which is a programming error
	}
}

// closingTCP is TCP whose listener refuses connections after its socket's
// context ends.
type closingTCP struct{ transport.Transport }

func (t closingTCP) Listen(ctx context.Context, addr string) (net.Listener, error) {
	// As go-zeromq's tcp transport listens (net.Listen), with the
	// keepalive and user timeout of deadPeerTimeout on every connection
	// accepted.
	lc := net.ListenConfig{KeepAliveConfig: keepAlive, Control: setUserTimeout}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &ctxListener{Listener: connlimit.Limit(l, maxPeers), ctx: ctx}, nil
}

// A host that vanishes without closing its connections (power lost, a
// cable pulled, Wi-Fi gone, as booth networks do) sends no FIN or RST: its
// peer hears silence, and only TCP itself can end the connection. With
// Go's defaults (keepalive probes after 15 s idle, then 15 s apart, and
// Linux's 9 of them) a subscriber took 151 s to notice a vanished
// publisher, and a bound publisher with data unacknowledged by a vanished
// subscriber had not noticed after 200 s (it retransmits for some 15
// minutes, Linux's tcp_retries2, since keepalive waits while data is in
// flight); with these, both took 20.4 s, as
// TestAVanishedHostIsNoticedWithinTheBound measures. Until then the stream
// reads "connected" to nothing, and no redial starts.
const (
	// keepAliveIdle is how long a connection may be silent before the
	// first probe. A publisher's engine may publish nothing for minutes
	// when idle; a probe costs one empty segment each way.
	keepAliveIdle = 5 * time.Second
	// keepAliveInterval is the time between unanswered probes.
	keepAliveInterval = 5 * time.Second
	// keepAliveCount is how many probes go unanswered before the
	// connection fails: three, so that a lost packet or two on a flaky
	// Wi-Fi does not end it.
	keepAliveCount = 3
	// deadPeerTimeout is how long, at most, a connection to or from a host
	// that vanished stays open, in seconds of silence: keepAliveIdle, then
	// keepAliveCount probes keepAliveInterval apart, 20 s. On Linux it is
	// also the connection's TCP_USER_TIMEOUT, which ends one whose sent
	// data has gone unacknowledged that long, as a busy publisher's does.
	// A connection ended by mistake costs a reconnection, which keeps the
	// worker's index when the publisher's seq goes on (see receive).
	deadPeerTimeout = keepAliveIdle + keepAliveCount*keepAliveInterval
)

// keepAlive is the keepalive of every connection closingTCP dials or
// accepts.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount}

// maxPeers is how many connections a bound socket holds at once; later
// ones wait in the kernel's accept queue until one closes. A fleet's
// engines publishing to a bound subscriber, or the routers subscribing to
// a bound publisher, are tens. Each connection costs a descriptor, and
// go-zeromq goroutines and buffers for it (a publisher copies every batch
// to each), so a peer opening connections by the thousand would otherwise
// take the descriptors the dashboard and the router need. A variable so
// that tests can shorten it.
var maxPeers = connlimit.Floor

// dialTimeout bounds a TCP connect, in seconds of SYNs unanswered, as to
// a host that vanished. A connect sends SYNs 1, 2, 4, 8 ... s apart, and
// a host back meanwhile is reached only at the next SYN. go-zeromq's
// dialer allows 5 minutes; on Linux deadPeerTimeout's TCP_USER_TIMEOUT
// ended the connect after 20 s (SYNs at 0, 1, 3, 7 and 15 s: a host back
// at 7.1 s was reached at 15 s), and elsewhere the kernel's own limit
// did (75 s on macOS, 127 s on Linux without it). With 5 s, each connect
// sends SYNs at 0, 1 and 3 s and the next starts 100 ms after it gives
// up (dialOptions), so a host back is reached within about 2.1 s. A
// connect over loopback or a LAN takes milliseconds, and a lossy link
// still gets 3 SYNs. TestAConnectThatGetsNoAnswerGivesUpAfterDialTimeout
// measures it: 20.0 s before, 5.0 s now.
const dialTimeout = 5 * time.Second

// Dial dials as TCP does, within dialTimeout, with the keepalive and user
// timeout of deadPeerTimeout, and reports the connection to the socket's
// connection hook, if it has one, and to its redialer. The handshake
// must be over within handshakeTimeout, as an accepted connection's: a
// peer that accepts and says nothing (a port-forward whose far end is
// gone) held the dial, and the socket, for good.
func (t closingTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	var nd net.Dialer
	if zd, ok := d.(*net.Dialer); ok {
		nd = *zd // go-zeromq's, with its WithDialerTimeout
	}
	if nd.Timeout == 0 || nd.Timeout > dialTimeout {
		nd.Timeout = dialTimeout
	}
	nd.KeepAliveConfig, nd.Control = keepAlive, setUserTimeout
	c, err := t.Transport.Dial(ctx, &nd, addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	g := guard(c)
	g.handshake = true
	tc := track(ctx, g)
	if r, ok := ctx.Value(redialKey{}).(*redialer); ok {
		r.dialed(tc)
	}
	return tc, nil
}

// handshakeTimeout bounds the greeting and READY of a peer, dialed or
// accepted. go-zeromq runs each handshake of a bound socket in its accept
// loop, so one peer that connected and said nothing held off every later
// one, a publisher reconnecting to a bound subscriber included, for good.
// A variable so that tests can shorten it.
var handshakeTimeout = 10 * time.Second

// ctxListener is a bound socket's listener. go-zeromq calls its Accept from
// one goroutine, and again only once the previous connection's handshake
// is over.
type ctxListener struct {
	net.Listener
	ctx context.Context
	// last is the connection accepted last, and its guard, which says
	// whether its handshake got as far as the peer's READY.
	last      net.Conn
	lastGuard *frameGuard
}

func (l *ctxListener) Accept() (net.Conn, error) {
	// go-zeromq leaves a connection whose handshake failed open (until the
	// garbage collector finds it, counted by the connection hook as
	// open): close it. One whose peer sent READY got through, or failed
	// on what it said, which only a ZMTP peer could; it stays.
	if l.last != nil && !l.lastGuard.ready.Load() {
		l.last.Close()
	}
	l.last, l.lastGuard = nil, nil
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.ctx.Err() != nil {
		c.Close()
		return nil, net.ErrClosed
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	g := guard(c)
	g.handshake = true
	l.last, l.lastGuard = track(l.ctx, g), g
	return l.last, nil
}

// connHookKey carries, in a socket's context, the func its transport calls
// with true when a connection opens and false when it closes. go-zeromq
// gives its transports the socket's context, and tells its users nothing
// about connections; this is how a Subscriber learns that a publisher
// reconnected.
type connHookKey struct{}

func withConnHook(ctx context.Context, hook func(open bool)) context.Context {
	return context.WithValue(ctx, connHookKey{}, hook)
}

// peerCheckKey carries, in a socket's context, the socket types its peers
// may be and what to call when one is not. go-zeromq fails the handshake
// of such a peer and then neither closes the connection nor says why: a
// subscriber given vLLM's replay port (a ROUTER) for its publisher read as
// connected, and heard nothing, for ever.
type peerCheckKey struct{}

type peerCheck struct {
	want  []string          // the peer's socket types this socket can talk to
	wrong func(peer string) // told the type of a peer that is none of them
}

func withPeerCheck(ctx context.Context, want []string, wrong func(peer string)) context.Context {
	return context.WithValue(ctx, peerCheckKey{}, peerCheck{want, wrong})
}

// track reports g to ctx's connection hook: open once the peer's READY
// has come whole, closed at the first of Close and a Read or Write that
// fails. A TCP connection whose ZMTP handshake never got that far (a port
// scanner, or a publisher that was being killed as it accepted) is never
// reported, so it counts neither as connected nor as a reconnection.
func track(ctx context.Context, g *frameGuard) net.Conn {
	if pc, ok := ctx.Value(peerCheckKey{}).(peerCheck); ok {
		g.peers = pc
	}
	hook, _ := ctx.Value(connHookKey{}).(func(bool))
	if hook == nil {
		return g
	}
	c := &trackedConn{frameGuard: g, hook: hook}
	g.onReady = c.opened
	return c
}

// trackedConn is a connection reported to a socket's connection hook.
//
// It reports the connection closed as soon as a read or write on it fails,
// and closes it then. go-zeromq stops using a connection once one has
// failed, but closes it late or never: on a socket that dials with
// automatic reconnection, the goroutine that reads a connection redials
// when its read fails, and only closes the dead connection once the redial
// got through (socket.scheduleRmConn, zmq4 v0.17.0). While a killed
// publisher stayed away, its connection was counted open, and kvlens said
// "connected" to nothing. A connection whose handshake fails go-zeromq
// never closes.
type trackedConn struct {
	*frameGuard
	hook func(bool)

	mu         sync.Mutex // serializes the hook's calls for this connection
	open, done bool
}

// opened reports the connection open, once, unless it is over already.
func (c *trackedConn) opened() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open && !c.done {
		c.open = true
		c.hook(true)
	}
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.frameGuard.Read(p)
	if err != nil {
		c.Close()
	}
	return n, err
}

func (c *trackedConn) Write(p []byte) (int, error) {
	n, err := c.frameGuard.Write(p)
	if err != nil {
		c.Close()
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.mu.Lock()
	if !c.done {
		c.done = true
		if c.open {
			c.hook(false)
		}
	}
	c.mu.Unlock()
	return c.frameGuard.Close()
}

// listen binds sock to endpoint, through closingTCP for a tcp:// endpoint.
func listen(sock zmq4.Socket, endpoint string) error {
	if err := sock.Listen(hooked(endpoint)); err != nil {
		return fmt.Errorf("listen on %s: %w", endpoint, err)
	}
	return nil
}

// hooked rewrites a tcp:// endpoint to go through closingTCP, as every
// socket this package opens must, for frameGuard.
func hooked(endpoint string) string {
	if rest, ok := strings.CutPrefix(endpoint, "tcp://"); ok {
		return closingScheme + "://" + rest
	}
	return endpoint
}

// checkEndpoint rejects an endpoint zmq4 could never dial or bind, so a
// typo fails at startup rather than in a retry loop.
func checkEndpoint(endpoint string) error {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok || rest == "" {
		return fmt.Errorf("endpoint %q is not of the form tcp://host:port", endpoint)
	}
	if !slices.Contains(zmq4.Transports(), scheme) {
		return fmt.Errorf("endpoint %q: unknown transport %q", endpoint, scheme)
	}
	return nil
}

// MaxFrame is the largest ZMTP frame a peer may send, in bytes. go-zeromq
// allocates a frame's declared size before reading it, so one header that
// declares 2^62 bytes would crash the process (makeslice) and one that
// declares a gigabyte would take a gigabyte. An engine's KV-event batch is
// kilobytes; a replay answer is one batch a frame.
const MaxFrame = 64 << 20

// errFrameTooLarge ends a connection whose peer declared a frame over
// MaxFrame.
var errFrameTooLarge = fmt.Errorf("kvevents: a peer declared a ZMTP frame over %d bytes", MaxFrame)

// guard wraps c in a frameGuard.
func guard(c net.Conn) *frameGuard { return &frameGuard{Conn: c, greeting: zmtpGreeting} }

// zmtpGreeting is the length of ZMTP 3's greeting, in bytes; frames follow.
const zmtpGreeting = 64

// frameGuard follows the ZMTP framing of what a peer sends (the greeting,
// then frames of a flags byte, a size of 1 or, with the LONG flag, 8 bytes,
// and a body) and fails the read that brings a frame header over MaxFrame,
// before go-zeromq sees it. Everything else passes through unchanged.
type frameGuard struct {
	net.Conn
	greeting int     // greeting bytes still to come
	body     uint64  // body bytes of the current frame still to come
	hdr      [9]byte // the frame header read so far
	hdrN     int     // its length so far
	// handshake says the connection has a deadline for its handshake,
	// lifted once ready.
	handshake bool
	// ready is set once the peer's first frame after the greeting (its
	// READY command) has come whole: the handshake's reads are over.
	ready atomic.Bool
	// onReady, when set, is called as ready is set, from Read.
	onReady func()
	// peers, when set, judges the peer's socket type from its READY,
	// whose body first holds, up to maxReady bytes.
	peers     peerCheck
	first     []byte
	wrongPeer string // the peer's type when peers refused it
}

// maxReady bounds the READY command kept to read the peer's socket type;
// a READY carries the type, and perhaps an identity of up to 255 bytes.
const maxReady = 1024

func (g *frameGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if ferr := g.scan(p[:n]); ferr != nil {
		g.Conn.Close()
		return 0, ferr
	}
	return n, err
}

// scan follows the framing over b, the next bytes the peer sent.
func (g *frameGuard) scan(b []byte) error {
	for len(b) > 0 {
		switch {
		case g.greeting > 0:
			k := min(g.greeting, len(b))
			g.greeting -= k
			b = b[k:]
		case g.body > 0:
			k := int(min(g.body, uint64(len(b))))
			if g.peers.want != nil && !g.ready.Load() && len(g.first)+k <= maxReady {
				g.first = append(g.first, b[:k]...)
			}
			g.body -= uint64(k)
			b = b[k:]
			if g.body == 0 {
				if err := g.frameDone(); err != nil {
					return err
				}
			}
		default:
			g.hdr[g.hdrN] = b[0]
			g.hdrN++
			b = b[1:]
			need := 2
			if g.hdr[0]&0x02 != 0 { // LONG: an 8-byte size
				need = 9
			}
			if g.hdrN < need {
				continue
			}
			size := uint64(g.hdr[1])
			if need == 9 {
				size = binary.BigEndian.Uint64(g.hdr[1:9])
			}
			if size > MaxFrame {
				return errFrameTooLarge
			}
			g.body, g.hdrN = size, 0
			if size == 0 {
				if err := g.frameDone(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// frameDone notes that a frame has come whole; the first ends the
// handshake's reads, and lifts its deadline. When the socket checks its
// peers and this one's READY names a type it cannot talk to, it fails.
func (g *frameGuard) frameDone() error {
	if g.ready.Swap(true) {
		return nil
	}
	if g.peers.want != nil {
		if t := readyType(g.first); t != "" && !slices.Contains(g.peers.want, t) {
			g.wrongPeer, g.first = t, nil
			g.peers.wrong(t)
			return fmt.Errorf("kvevents: the peer is a %s socket, not %s", t, strings.Join(g.peers.want, " or "))
		}
		g.first = nil
	}
	if g.handshake {
		g.Conn.SetDeadline(time.Time{})
	}
	if g.onReady != nil {
		g.onReady()
	}
	return nil
}

// readyType reads the Socket-Type property of a ZMTP 3 READY command's
// body (a name of 1 byte of length, then properties each of a name of 1
// byte of length and a value of 4), or "" when body is no READY or has
// none.
func readyType(body []byte) string {
	name, rest, ok := lenPrefixed(body, 1)
	if !ok || !strings.EqualFold(string(name), "READY") {
		return ""
	}
	for len(rest) > 0 {
		var key, val []byte
		if key, rest, ok = lenPrefixed(rest, 1); !ok {
			return ""
		}
		if val, rest, ok = lenPrefixed(rest, 4); !ok {
			return ""
		}
		if strings.EqualFold(string(key), "Socket-Type") {
			return socketType(val)
		}
	}
	return ""
}

// maxSocketType bounds a peer's socket type as kvlens repeats it, in bytes;
// ZMTP's longest is 6 ("DEALER", "ROUTER").
const maxSocketType = 32

// socketType is a READY's Socket-Type as kvlens names it: upper case, cut
// at maxSocketType bytes, and every byte that is not printable ASCII a '?'.
// A peer that is no ZMQ socket may send anything there, and the type goes
// into one-line warnings and the dashboard's reasons; strings.ToUpper made
// each invalid byte a 3-byte U+FFFD.
func socketType(val []byte) string {
	b := slices.Clone(val[:min(len(val), maxSocketType)])
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c < ' ' || c > '~':
			b[i] = '?'
		}
	}
	return string(b)
}

// lenPrefixed splits b after a length of n bytes (1 or 4, big-endian) and
// that many bytes.
func lenPrefixed(b []byte, n int) (field, rest []byte, ok bool) {
	if len(b) < n {
		return nil, nil, false
	}
	size := uint64(b[0])
	if n == 4 {
		size = uint64(binary.BigEndian.Uint32(b))
	}
	b = b[n:]
	if uint64(len(b)) < size {
		return nil, nil, false
	}
	return b[:size], b[size:], true
}
