package kvevents

import (
	"fmt"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// cutProxy forwards TCP connections to a target. down cuts every
// connection and refuses new ones, as a network that fails between a
// subscriber and a publisher that keeps running; up lets them through
// again on the same port.
type cutProxy struct {
	addr, target string // host:port each

	mu    sync.Mutex
	ln    net.Listener // nil while down
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

// endpoint is where a subscriber dials the proxy.
func (p *cutProxy) endpoint() string { return "tcp://" + p.addr }

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

// pipe forwards one connection both ways until either end closes or the
// proxy goes down, then closes both.
func (p *cutProxy) pipe(down net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		down.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		down.Close()
		up.Close()
		return
	}
	p.conns[down], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, down); done <- struct{}{} }()
	go func() { io.Copy(down, up); done <- struct{}{} }()
	<-done
	down.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, down)
	delete(p.conns, up)
	p.mu.Unlock()
}

// down closes the listener and every connection: the subscriber's redials
// are refused until up.
func (p *cutProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

func (p *cutProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}

// subscribers waits until p's PUB socket has a subscription (want) or none
// (!want): messages published with none are lost to the live stream, and
// with one reach the subscriber.
func subscribers(t *testing.T, p *Publisher, want bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for (len(p.sock.(zmq4.Topics).Topics()) > 0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("the publisher's subscriptions are still %q after %s", p.sock.(zmq4.Topics).Topics(), wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// told is what an update says of the stream, for comparing.
type told struct {
	Seq                                             uint64
	Missed                                          uint64
	First, Reset, Whole, Reconnected, Empty, Replay bool
}

func tell(u Update) told {
	return told{u.Seq, u.Missed, u.First, u.Reset, u.Whole, u.Reconnected, u.Empty, u.Replayed}
}

// A subscriber parted from its publisher, by a network that failed or by
// the engine restarting, keeps what it knew of the publisher's seq, and
// the first it hears after the new connection says which it was:
//   - the same publisher going on with nothing lost: Reconnected, and the
//     worker's index stands;
//   - the same publisher, with events lost while parted: Reconnected with
//     Missed, or, with replay, the lost events replayed;
//   - a restarted publisher, counting from 0 again: First and Reset.
//
// Before, all three were a First, which cleared the worker's index, and
// counted as a reconnection. The subscriber dials a proxy that the test
// cuts; the publisher restarts behind it while it is cut.
func TestAReconnectionIsToldFromARestart(t *testing.T) {
	// After the warm-up and 3 batches, the subscriber has heard up to seq
	// last (at least 3), and expects last+1.
	tests := []struct {
		name    string
		replay  bool
		restart bool
		// lost is how many batches the publisher (the new one, after a
		// restart) publishes while parted, lost to the live stream.
		lost func(last uint64) uint64
		// want is every update from the reconnection to the marker batch
		// published after it, which is seq marker.
		want func(last, marker uint64) []told
		// reconnects, restarts and gaps are the stats' counts after it.
		reconnects, restarts, gaps uint64
	}{
		{"a network failure that lost nothing keeps the index", false, false,
			func(uint64) uint64 { return 0 },
			func(last, m uint64) []told { return []told{{Seq: m, Reconnected: true}} },
			1, 0, 0},
		{"with replay, a network failure that lost nothing is told at once", true, false,
			func(uint64) uint64 { return 0 },
			func(last, m uint64) []told { return []told{{Seq: last + 1, Reconnected: true, Empty: true}, {Seq: m}} },
			1, 0, 0},
		{"a network failure that lost events is a gap", false, false,
			func(uint64) uint64 { return 3 },
			func(last, m uint64) []told { return []told{{Seq: m, Missed: 3, Reconnected: true}} },
			1, 0, 1},
		{"with replay, the events lost in a network failure are replayed", true, false,
			func(uint64) uint64 { return 3 },
			func(last, m uint64) []told {
				return []told{{Seq: last + 1, Reconnected: true, Replay: true}, {Seq: last + 2, Replay: true}, {Seq: last + 3, Replay: true}, {Seq: m}}
			},
			1, 0, 0},
		{"a restarted publisher counts from 0: a restart", false, true,
			func(uint64) uint64 { return 0 },
			func(last, m uint64) []told { return []told{{Seq: 0, First: true, Reset: true, Whole: true}} },
			0, 1, 0},
		{"with replay, a restart with nothing published yet is told at once", true, true,
			func(uint64) uint64 { return 0 },
			func(last, m uint64) []told {
				return []told{{First: true, Reset: true, Whole: true, Empty: true}, {Seq: 0}}
			},
			0, 1, 0},
		{"a restarted publisher heard from seq 2 is a restart, not whole", false, true,
			func(uint64) uint64 { return 2 },
			func(last, m uint64) []told { return []told{{Seq: 2, First: true, Reset: true}} },
			0, 1, 0},
		{"with replay, a restarted publisher's first batches are replayed", true, true,
			func(uint64) uint64 { return 2 },
			func(last, m uint64) []told {
				return []told{{Seq: 0, First: true, Reset: true, Whole: true, Replay: true}, {Seq: 1, Replay: true}, {Seq: 2}}
			},
			0, 1, 0},
		{"with replay, a restarted publisher past the old seq is told by its payload", true, true,
			func(last uint64) uint64 { return last + 3 },
			func(last, m uint64) []told {
				want := []told{{Seq: 0, First: true, Reset: true, Whole: true, Replay: true}}
				for s := uint64(1); s < m; s++ {
					want = append(want, told{Seq: s, Replay: true})
				}
				return append(want, told{Seq: m})
			},
			0, 1, 0},
		// Without replay nothing tells these apart; the index is cleared
		// for the gap all the same.
		{"without replay, a restarted publisher past the old seq shows as lost events", false, true,
			func(last uint64) uint64 { return last + 3 },
			func(last, m uint64) []told { return []told{{Seq: m, Missed: m - last - 1, Reconnected: true}} },
			1, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := freeAddr(t)
			cfg := PublisherConfig{Endpoint: target}
			if tt.replay {
				cfg.ReplayEndpoint = freeAddr(t)
			}
			p := newPub(t, cfg, nil)
			proxy := newCutProxy(t, target[len("tcp://"):])
			conns := make(chan bool, 16)
			s, u := newSub(t, Endpoint{Worker: "w0", Addr: proxy.endpoint(), Replay: cfg.ReplayEndpoint, OnConn: func(open bool) { conns <- open }})
			expect := func(want bool) { t.Helper(); expectConn(t, conns, want, "") }
			expect(true)
			warm(t, p.Publish, u, "")
			var last uint64
			for i := range 3 {
				if err := p.Publish(stored(float64(i), uint64(i))); err != nil {
					t.Fatal(err)
				}
				last = u.next(t).Seq
			}
			drainWarmUp(u)
			before := s.Stats()

			proxy.down()
			expect(false)
			subscribers(t, p, false)
			if tt.restart {
				p.Close()
				p = newPub(t, cfg, nil)
			}
			lost := tt.lost(last)
			for i := range lost {
				// TS tells the new publisher's payloads from the old one's.
				if err := p.Publish(stored(float64(500+i), uint64(500+i))); err != nil {
					t.Fatal(err)
				}
			}
			sent(t, p, lost)
			proxy.up(t)
			expect(true)
			subscribers(t, p, true)
			if tt.replay {
				// The replay socket tells at once; the marker must come
				// after, or the reader would tell from it instead.
				deadline := time.Now().Add(wait)
				for st := s.Stats(); st.Reconnects+st.Resets == before.Reconnects+before.Resets; st = s.Stats() {
					if time.Now().After(deadline) {
						t.Fatal("the replay socket never told of the reconnection")
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			const markerTS = 1000
			if err := p.Publish(stored(markerTS, markerTS)); err != nil {
				t.Fatal(err)
			}
			var got []told
			marker := ^uint64(0)
			for marker == ^uint64(0) {
				up := u.next(t)
				got = append(got, tell(up))
				if up.Batch.TS == markerTS && !up.Empty {
					marker = up.Seq
				}
			}
			if want := tt.want(last, marker); !reflect.DeepEqual(got, want) {
				t.Errorf("after seq %d, parted, the updates were\n%+v\nwant\n%+v", last, got, want)
			}
			st := s.Stats()
			if st.Reconnects-before.Reconnects != tt.reconnects || st.Resets-before.Resets != tt.restarts || st.Gaps-before.Gaps != tt.gaps {
				t.Errorf("counted %d reconnections, %d restarts, %d gaps; want %d, %d, %d",
					st.Reconnects-before.Reconnects, st.Resets-before.Resets, st.Gaps-before.Gaps, tt.reconnects, tt.restarts, tt.gaps)
			}
		})
	}
}

// expectConn waits for the next connection report an Endpoint's OnConn
// sent on conns, and fails unless it is want (true: opened); what, when
// not empty, says what the test waits for.
func expectConn(t *testing.T, conns <-chan bool, want bool, what string) {
	t.Helper()
	if what == "" {
		what = fmt.Sprintf("OnConn(%v)", want)
	}
	select {
	case open := <-conns:
		if open != want {
			t.Fatalf("OnConn(%v) while waiting for %s", open, what)
		}
	case <-time.After(wait):
		t.Fatalf("no %s within %s", what, wait)
	}
}
