package kvevents

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

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
	return c, nil
}

// listen binds sock to endpoint, through closingTCP for a tcp:// endpoint.
func listen(sock zmq4.Socket, endpoint string) error {
	ep := endpoint
	if rest, ok := strings.CutPrefix(endpoint, "tcp://"); ok {
		ep = closingScheme + "://" + rest
	}
	if err := sock.Listen(ep); err != nil {
		return fmt.Errorf("listen on %s: %w", endpoint, err)
	}
	return nil
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
