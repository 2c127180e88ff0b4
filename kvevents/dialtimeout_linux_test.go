package kvevents

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4/transport"
	"golang.org/x/sys/unix"
)

// TestAConnectThatGetsNoAnswerGivesUpAfterDialTimeout: a connect whose
// SYNs go unanswered, as to a host that vanished, waited on the kernel's
// SYN retransmissions (go-zeromq's dialer allows 5 minutes) until the
// 20 s TCP_USER_TIMEOUT ended it; the transport now gives up after
// dialTimeout, and the dial loop tries again with a fresh SYN. The SYNs
// go unanswered because they reach a listener whose accept queue is
// full, which Linux drops them at.
func TestAConnectThatGetsNoAnswerGivesUpAfterDialTimeout(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil { // an accept queue of one
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}).String()
	// Fill the queue; nothing accepts. Later connects get no SYN-ACK.
	for filled := 0; ; filled++ {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			if filled == 0 {
				t.Fatalf("the first connect failed: %v", err)
			}
			break
		}
		defer c.Close()
		if filled > 8 {
			t.Skip("the kernel answers past a full accept queue (syncookies?); nothing to measure")
		}
	}
	const slack = 2 * time.Second // a busy machine
	start := time.Now()
	go0 := &net.Dialer{Timeout: 5 * time.Minute} // go-zeromq's default dialer
	c, err := closingTCP{transport.New("tcp")}.Dial(context.Background(), go0, addr)
	took := time.Since(start)
	if err == nil {
		c.Close()
		t.Fatal("the connect got through a full accept queue")
	}
	if took < dialTimeout-100*time.Millisecond || took > dialTimeout+slack {
		t.Fatalf("the connect gave up after %s (%v), want %s", took.Round(time.Millisecond), err, dialTimeout)
	}
	t.Logf("gave up after %s: %v", took.Round(time.Millisecond), err)
}
