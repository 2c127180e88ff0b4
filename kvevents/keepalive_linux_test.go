package kvevents

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/go-zeromq/zmq4/transport"
	"golang.org/x/sys/unix"
)

// rawOf reaches the socket under the wrappers this package puts on a
// connection.
func rawOf(t *testing.T, c net.Conn) syscall.RawConn {
	t.Helper()
	for {
		switch v := c.(type) {
		case *trackedConn:
			c = v.frameGuard.Conn
		case *frameGuard:
			c = v.Conn
		case interface {
			SyscallConn() (syscall.RawConn, error)
		}:
			rc, err := v.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			return rc
		default:
			t.Fatalf("cannot reach the socket of a %T", c)
		}
	}
}

// Every connection the package dials or accepts carries the keepalive and
// the user timeout that bound how long a host that vanished goes
// unnoticed (deadPeerTimeout, 20 s); with Go's defaults, a subscriber took
// 150 s (TestAVanishedHostIsNoticedWithinTheBound measures both).
func TestConnectionsCarryTheDeadPeerTimeout(t *testing.T) {
	tr := closingTCP{transport.New("tcp")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := tr.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	dialed, err := tr.Dial(ctx, &net.Dialer{}, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	acc := <-accepted
	defer acc.Close()
	want := []struct {
		name       string
		level, opt int
		value      int
	}{
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE (s)", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, int(keepAliveIdle.Seconds())},
		{"TCP_KEEPINTVL (s)", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, int(keepAliveInterval.Seconds())},
		{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepAliveCount},
		{"TCP_USER_TIMEOUT (ms)", unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(deadPeerTimeout.Milliseconds())},
	}
	for side, c := range map[string]net.Conn{"dialed": dialed, "accepted": acc} {
		rc := rawOf(t, c)
		for _, w := range want {
			var got int
			var gerr error
			if err := rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), w.level, w.opt) }); err != nil {
				t.Fatal(err)
			}
			if gerr != nil || got != w.value {
				t.Errorf("%s connection: %s = %d (%v), want %d", side, w.name, got, gerr, w.value)
			}
		}
	}
}
