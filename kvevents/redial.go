package kvevents

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// go-zeromq's own reconnection (WithAutomaticReconnect) redials from
// socket.scheduleRmConn when a connection fails, and ignores what that
// Dial returns (zmq4 v0.17.0). Dial retries a refused TCP connect, but
// when the connect succeeds and the ZMTP handshake then fails, it returns
// an error nobody sees, and the socket dials no more. Whatever answered
// the peer's port for a moment while it restarted (a service-mesh sidecar
// answering "no healthy upstream", a port-forward, another process) left
// a subscriber deaf to its publisher, or a publisher to its subscriber,
// until kvlens restarted. When the handshake failure was an I/O error
// instead (a port that closed every connection at once), the failing
// handshake redialed from inside Dial, recursively, without pause: over
// 4,000 connections in half a second. It also redials from whichever
// goroutine saw the failure, a PUB's sender among them, which holds the
// lock addConn then waits for: a deadlock.
//
// So every socket this package dials leaves it off, and a redialer is the
// one caller of the socket's Dial: it dials, and when the connection it
// made is over (reported by the transport, see trackedConn) it dials
// again; when a dial fails it pauses, redialPauseMin doubling up to
// redialPauseMax, and dials again. One goroutine dialing in turn can never
// run two dial loops for one socket at once, which would connect a SUB
// twice to one PUB and hand every message over twice.

const (
	// redialPauseMin is the first pause after a failed dial, as long as
	// go-zeromq waits between refused connects (dialOptions): a publisher
	// killed during a handshake is redialed at once.
	redialPauseMin = 100 * time.Millisecond
	// redialPauseMax is the longest pause between failed dials: after
	// pauses of 0.1, 0.2, 0.4, 0.8 and 1.6 s, a port that something else
	// answers costs a connection every 2 s, and a peer back on it is
	// dialed within 2 s.
	redialPauseMax = 2 * time.Second
)

// redialKey carries, in a dialing socket's context, its redialer, which
// the transport tells of each connection it dials.
type redialKey struct{}

// redialer keeps one dialing socket connected to one endpoint.
type redialer struct {
	sock     zmq4.Socket
	endpoint string                               // as the socket dials it (hooked)
	failed   func(err error, pause time.Duration) // told of each failed dial, and the pause before the next

	open atomic.Int64  // connections open: the peer's READY came, and no close since
	gone chan struct{} // kicked each time open falls to 0

	mu   sync.Mutex
	last net.Conn // what the transport dialed last; nil before
}

func newRedialer(endpoint string, failed func(error, time.Duration)) *redialer {
	return &redialer{endpoint: hooked(endpoint), failed: failed, gone: make(chan struct{}, 1)}
}

// context returns ctx carrying r and the connection hook that counts r's
// connections open before calling inner (nil for none): a socket made
// with it reports to r.
func (r *redialer) context(ctx context.Context, inner func(open bool)) context.Context {
	ctx = context.WithValue(ctx, redialKey{}, r)
	return withConnHook(ctx, func(open bool) {
		if open {
			r.open.Add(1)
		}
		if inner != nil {
			inner(open)
		}
		// After inner, so that a redial's connection is reported open only
		// after this one is reported closed.
		if !open && r.open.Add(-1) == 0 {
			select {
			case r.gone <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	})
}

// dialed notes the connection the transport dialed for r's socket.
func (r *redialer) dialed(c net.Conn) {
	r.mu.Lock()
	r.last = c
	r.mu.Unlock()
}

// run dials until ctx ends, and again each time the connection is over.
// It must be the socket's only caller of Dial.
func (r *redialer) run(ctx context.Context) {
	pause := redialPauseMin
	for ctx.Err() == nil {
		r.dialed(nil)
		err := r.sock.Dial(r.endpoint)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// The TCP connect got through (Dial retries it for ever) and
			// the handshake failed. go-zeromq leaves that connection open
			// (until the garbage collector finds it): close it, as the
			// listener does a failed accepted one (ctxListener.Accept).
			r.mu.Lock()
			if r.last != nil {
				r.last.Close()
			}
			r.mu.Unlock()
			r.failed(err, pause)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, redialPauseMax)
			continue
		}
		pause = redialPauseMin
		for r.open.Load() > 0 {
			select {
			case <-ctx.Done():
				return
			case <-r.gone:
			}
		}
	}
}
