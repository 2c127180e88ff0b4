package kvevents

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
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
	l, err := t.Transport.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return ctxListener{Listener: l, ctx: ctx}, nil
}

// Dial dials as TCP does, and reports the connection to the socket's
// connection hook, if it has one.
func (t closingTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return track(ctx, c), nil
}

type ctxListener struct {
	net.Listener
	ctx context.Context
}

func (l ctxListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.ctx.Err() != nil {
		c.Close()
		return nil, net.ErrClosed
	}
	return track(l.ctx, c), nil
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

// track reports c to ctx's connection hook, now and when c closes.
func track(ctx context.Context, c net.Conn) net.Conn {
	hook, _ := ctx.Value(connHookKey{}).(func(bool))
	if hook == nil {
		return c
	}
	hook(true)
	return &trackedConn{Conn: c, hook: hook}
}

type trackedConn struct {
	net.Conn
	hook func(bool)
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.hook(false) })
	return c.Conn.Close()
}

// listen binds sock to endpoint, through closingTCP for a tcp:// endpoint.
func listen(sock zmq4.Socket, endpoint string) error {
	if err := sock.Listen(hooked(endpoint)); err != nil {
		return fmt.Errorf("listen on %s: %w", endpoint, err)
	}
	return nil
}

// hooked rewrites a tcp:// endpoint to go through closingTCP.
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
