package kvevents

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// shortHandshakes shortens handshakeTimeout for one test.
func shortHandshakes(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
}

// TestASilentPeerDoesNotHoldOffPublishers: go-zeromq runs each handshake
// in its accept loop, so a peer that connected to a bound subscriber and
// sent nothing held off every publisher after it, for good.
func TestASilentPeerDoesNotHoldOffPublishers(t *testing.T) {
	shortHandshakes(t)
	addr := freeAddr(t)
	_, u := newSub(t, Endpoint{Addr: addr, Bind: true})
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // silent, and never gone
	p := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "w"}, nil)
	warm(t, p.Publish, u, "w")
}

// TestAFailedHandshakeClosesItsConnection: go-zeromq leaves a connection
// whose handshake failed open, holding a descriptor until the garbage
// collector finds it, and counted as connected.
func TestAFailedHandshakeClosesItsConnection(t *testing.T) {
	shortHandshakes(t)
	tests := []struct {
		name string
		send []byte // what the peer sends, and then it waits
	}{
		{"a peer that sends HTTP instead of a greeting", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 64))},
		{"a peer that sends nothing", nil},
		{"a peer that greets and sends no READY", zmtpGreetingNull()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := freeAddr(t)
			var open atomic.Int64
			newSub(t, Endpoint{Addr: addr, Bind: true, OnConn: func(o bool) {
				if o {
					open.Add(1)
				} else {
					open.Add(-1)
				}
			}})
			c, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(tt.send)
			c.SetReadDeadline(time.Now().Add(wait))
			buf := make([]byte, 256)
			for {
				if _, err := c.Read(buf); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						t.Fatalf("the subscriber kept the connection open for %s", wait)
					}
					break // the subscriber closed the connection
				}
			}
			for end := time.Now().Add(wait); open.Load() != 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("%d connections still counted open", open.Load())
				}
			}
		})
	}
}

// TestABoundSocketHoldsAtMostMaxPeers: past maxPeers connections a bound
// subscriber accepts no more until one closes; then the waiting publisher
// gets through. Before, a bound socket took every connection that came.
func TestABoundSocketHoldsAtMostMaxPeers(t *testing.T) {
	old := maxPeers
	maxPeers = 2
	t.Cleanup(func() { maxPeers = old })
	addr := freeAddr(t)
	_, u := newSub(t, Endpoint{Addr: addr, Bind: true})
	a := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "a"}, nil)
	warm(t, a.Publish, u, "a")
	b := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "b"}, nil)
	warm(t, b.Publish, u, "b")

	c := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "c"}, nil)
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		if err := c.Publish(Batch{TS: -1}); err != nil {
			t.Fatal(err)
		}
		select {
		case up := <-u:
			if up.Topic == "c" {
				t.Fatal("a third publisher got through to a subscriber that holds 2")
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	a.Close()
	warm(t, c.Publish, u, "c")
}
