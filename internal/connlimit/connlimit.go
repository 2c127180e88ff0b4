// Package connlimit caps how many connections an HTTP server's listener
// holds open at once.
//
// Every open connection costs the process a file descriptor, and a
// net/http server accepts as many as arrive: an audit filled kvlens's
// 20,000 descriptors with 19,668 idle connections, after which nothing
// could connect, the dashboard's own browsers and the router's requests to
// its workers included. Behind a cap, a flood waits in the kernel's accept
// queue while the process keeps descriptors for its own connections, files
// and sockets; each connection that closes (net/http drops one that sends
// no request within its ReadHeaderTimeout) lets the next in the queue
// through, the operator's among them.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener is a net.Listener that holds at most a fixed number of accepted
// connections open at once: past it, Accept waits for one to close.
//
// It does what golang.org/x/net/netutil.LimitListener does, except that a
// TCP connection it accepts keeps the methods of the *net.TCPConn under it
// (SetLinger, ReadFrom, CloseWrite), which LimitListener's wrapper hides:
// the dashboard resets a websocket it hangs up on with SetLinger(0), so that
// the kernel does not keep a stalled viewer's unsent frames for minutes, and
// net/http sends files with ReadFrom.
type Listener struct {
	net.Listener
	sem     chan struct{} // a token per open connection
	done    chan struct{} // closed by Close
	once    sync.Once
	waiting atomic.Int32 // Accept calls waiting for a connection to close
}

// Limit returns ln holding at most n connections open at once; n must be
// at least 1.
func Limit(ln net.Listener, n int) *Listener {
	return &Listener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits until fewer than the cap's connections are open, then
// accepts the next one.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.waiting.Add(1)
		select {
		case l.sem <- struct{}{}:
			l.waiting.Add(-1)
		case <-l.done:
			l.waiting.Add(-1)
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	release := sync.OnceFunc(func() { <-l.sem })
	if tc, ok := c.(*net.TCPConn); ok {
		return &tcpConn{TCPConn: tc, release: release}, nil
	}
	return &conn{Conn: c, release: release}, nil
}

// Close closes the listener; an Accept waiting for room returns at once.
// Connections already accepted stay open.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// Cap returns how many connections the listener holds open at most.
func (l *Listener) Cap() int { return cap(l.sem) }

// Open returns how many of the connections it accepted are open.
func (l *Listener) Open() int { return len(l.sem) }

// Full reports whether an Accept is waiting for a connection to close.
func (l *Listener) Full() bool { return l.waiting.Load() > 0 }

// tcpConn is an accepted TCP connection that gives its place back when it
// closes.
type tcpConn struct {
	*net.TCPConn
	release func()
}

func (c *tcpConn) Close() error {
	err := c.TCPConn.Close()
	c.release()
	return err
}

// conn is any other accepted connection that gives its place back when it
// closes.
type conn struct {
	net.Conn
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
