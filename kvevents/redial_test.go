package kvevents

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recoveryBound is how long a dialing socket may take to be heard again
// once a real peer is back on a port that something else answered for a
// while: the longest pause between failed dials (redialPauseMax), and 2 s
// for a busy machine (2 cores, the race detector, CI beside it).
const recoveryBound = redialPauseMax + 2*time.Second

// An impostor holds a port for something that accepts TCP connections and
// is no ZMTP peer, as answers a publisher's or a subscriber's port while
// the engine behind it restarts: a service-mesh sidecar (Envoy answers
// "no healthy upstream" or closes), a Kubernetes port-forward, another
// process that took the port.
type impostor struct {
	ln       net.Listener
	accepted atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// impostorAnswers are the ways an impostor answers each connection.
var impostorAnswers = []struct {
	name   string
	answer func(net.Conn) // returns when done with the connection, which it may leave open
}{
	{"closes each connection at once", func(c net.Conn) { c.Close() }},
	{"answers HTTP 503 and closes", func(c net.Conn) {
		// Envoy's answer when its upstream is gone; over 64 bytes, so
		// go-zeromq reads a whole greeting that is none.
		c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 19\r\ncontent-type: text/plain\r\n\r\nno healthy upstream"))
		c.Close()
	}},
	{"sends a short banner and closes", func(c net.Conn) {
		c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n")) // under a greeting's 64 bytes
		c.Close()
	}},
	{"stays silent", func(net.Conn) {}}, // the handshake times out
}

func startImpostor(t *testing.T, addr string, answer func(net.Conn)) *impostor {
	t.Helper()
	ln, err := net.Listen("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	im := &impostor{ln: ln}
	im.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			im.mu.Lock()
			im.conns = append(im.conns, c)
			im.mu.Unlock()
			im.accepted.Add(1)
			answer(c)
		}
	})
	t.Cleanup(im.stop)
	return im
}

// waitAccepted waits until the impostor has taken n connections.
func (im *impostor) waitAccepted(t *testing.T, n int64) {
	t.Helper()
	for end := time.Now().Add(wait); im.accepted.Load() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the impostor took %d connections in %s, want %d", im.accepted.Load(), wait, n)
		}
	}
}

// stop frees the port and closes every connection the impostor took.
func (im *impostor) stop() {
	im.ln.Close()
	im.wg.Wait()
	im.mu.Lock()
	defer im.mu.Unlock()
	for _, c := range im.conns {
		c.Close()
	}
	im.conns = nil
}

// connCounter counts an Endpoint's connection reports: how many opened in
// all, how many are open, and the most that were open at once.
type connCounter struct {
	mu                   sync.Mutex
	opened, open, atOnce int
}

func (c *connCounter) onConn(open bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if open {
		c.opened++
		c.open++
		c.atOnce = max(c.atOnce, c.open)
	} else {
		c.open--
	}
}

func (c *connCounter) counts() (opened, open, atOnce int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.open, c.atOnce
}

// heardWithin publishes warm-up batches until the subscriber has one from
// topic, and fails unless that took at most bound; it returns how long it
// took.
func heardWithin(t *testing.T, publish func(Batch) error, u updates, topic string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < bound+wait {
		if err := publish(Batch{TS: -1}); err != nil {
			t.Fatal(err)
		}
		select {
		case up := <-u:
			if up.Batch.TS == -1 && up.Topic == topic {
				took := time.Since(start)
				if took > bound {
					t.Fatalf("heard again after %s, want at most %s", took.Round(time.Millisecond), bound)
				}
				drainWarmUp(u)
				return took
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("not heard again within %s (the socket gave up dialing)", bound+wait)
	return 0
}

// onceEach publishes n batches and fails unless each arrives exactly once,
// in seq order: a socket with two connections to one peer would hand each
// over twice.
func onceEach(t *testing.T, p *Publisher, u updates, n int) {
	t.Helper()
	for i := range n {
		if err := p.Publish(stored(float64(i), uint64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	var prev uint64
	for i := range n {
		up := u.next(t)
		if up.Batch.TS != float64(i) || (i > 0 && up.Seq != prev+1) {
			t.Fatalf("update %d: ts %v seq %d after seq %d, want ts %d, the next seq", i, up.Batch.TS, up.Seq, prev, i)
		}
		prev = up.Seq
	}
	select {
	case up := <-u:
		t.Fatalf("an update after the last one published: ts %v seq %d (a copy?)", up.Batch.TS, up.Seq)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestASubscriberRedialsAfterAFailedHandshake: go-zeromq redials a dialed
// peer that went away once, and gives up for good when that dial connects
// and its ZMTP handshake fails (socket.scheduleRmConn ignores Dial's
// error), as it does against whatever answers the publisher's port while
// the engine restarts; the first dial, in NewSubscriber, had the same
// hole. The stream read "connecting" and the router routed blind until
// kvlens restarted. Now the subscriber redials until a publisher answers,
// and is heard within recoveryBound of one binding the port again, over
// exactly one connection.
func TestASubscriberRedialsAfterAFailedHandshake(t *testing.T) {
	shortHandshakes(t)
	for _, ans := range impostorAnswers {
		for _, first := range []bool{false, true} {
			name := ans.name + ", after a connection"
			if first {
				name = ans.name + ", at the first dial"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel() // each on its own port, mostly waiting
				impostorThenPublisher(t, ans.answer, first, 500*time.Millisecond)
			})
		}
	}
}

// TestASubscriberIsHeardWithinTheBoundAfterALongFailure: an impostor that
// answers long enough for the pause between dials to reach
// redialPauseMax, the slowest case.
func TestASubscriberIsHeardWithinTheBoundAfterALongFailure(t *testing.T) {
	impostorThenPublisher(t, impostorAnswers[1].answer, false, 5*time.Second)
}

// impostorThenPublisher runs a subscriber dialing a port that answer holds
// for hold, from its first dial (first) or after a publisher it heard
// went away, and then a publisher binds the port again.
func impostorThenPublisher(t *testing.T, answer func(net.Conn), first bool, hold time.Duration) {
	addr := freeAddr(t)
	var conns connCounter
	var u updates
	if !first {
		p1 := newPub(t, PublisherConfig{Endpoint: addr}, nil)
		_, u = newSub(t, Endpoint{Worker: "w", Addr: addr, OnConn: conns.onConn})
		warm(t, p1.Publish, u, "")
		p1.Close()
		waitOpen(t, &conns, 0)
	}
	im := startImpostor(t, addr, answer)
	if first {
		_, u = newSub(t, Endpoint{Worker: "w", Addr: addr, OnConn: conns.onConn})
	}
	im.waitAccepted(t, 1)
	time.Sleep(hold)
	im.stop()

	p2 := newPub(t, PublisherConfig{Endpoint: addr}, nil)
	took := heardWithin(t, p2.Publish, u, "", recoveryBound)
	t.Logf("heard again %s after the publisher bound; the impostor took %d connections in %s", took.Round(time.Millisecond), im.accepted.Load(), hold)
	// A second dial loop would have connected by now.
	time.Sleep(redialPauseMax + 500*time.Millisecond)
	onceEach(t, p2, u, 20)
	want := 2
	if first {
		want = 1
	}
	if opened, open, atOnce := conns.counts(); opened != want || open != 1 || atOnce != 1 {
		t.Errorf("%d connections opened, %d open, at most %d at once; want %d, 1, 1", opened, open, atOnce, want)
	}
}

// TestAPublisherRedialsAfterAFailedHandshake: the same hole for a
// publisher that dials a bound subscriber (Connect): an impostor on the
// subscriber's port while it restarts left the publisher dialing no more.
func TestAPublisherRedialsAfterAFailedHandshake(t *testing.T) {
	shortHandshakes(t)
	for _, ans := range impostorAnswers {
		t.Run(ans.name, func(t *testing.T) {
			t.Parallel() // each on its own port, mostly waiting
			addr := freeAddr(t)
			im := startImpostor(t, addr, ans.answer)
			p := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "w"}, nil)
			im.waitAccepted(t, 1)
			time.Sleep(500 * time.Millisecond)
			im.stop()

			var conns connCounter
			_, u := newSub(t, Endpoint{Addr: addr, Bind: true, OnConn: conns.onConn})
			took := heardWithin(t, p.Publish, u, "w", recoveryBound)
			t.Logf("heard %s after the subscriber bound; the impostor took %d connections", took.Round(time.Millisecond), im.accepted.Load())
			time.Sleep(redialPauseMax + 500*time.Millisecond)
			onceEach(t, p, u, 20)
			if opened, open, atOnce := conns.counts(); opened != 1 || open != 1 || atOnce != 1 {
				t.Errorf("%d connections opened, %d open, at most %d at once; want 1 each", opened, open, atOnce)
			}
		})
	}
}

// waitOpen waits until c counts n connections open.
func waitOpen(t *testing.T, c *connCounter, n int) {
	t.Helper()
	for end := time.Now().Add(wait); ; time.Sleep(5 * time.Millisecond) {
		if _, open, _ := c.counts(); open == n {
			return
		}
		if time.Now().After(end) {
			_, open, _ := c.counts()
			t.Fatalf("%d connections open after %s, want %d", open, wait, n)
		}
	}
}
