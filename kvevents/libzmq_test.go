package kvevents

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests put a peer kvlens did not write at the other end of the
// sockets: libzmq through pyzmq, with Python's msgpack
// (testdata/libzmq_peer.py). vLLM publishes through pyzmq, so go-zeromq
// meeting libzmq, and kvlens's codec meeting another msgpack, is what a real
// engine puts kvlens through. make deps installs Debian's python3-zmq and
// python3-msgpack, and make test sets KVLENS_REQUIRE_LIBZMQ, so that CI
// cannot skip them.

// libzmqPeer starts testdata/libzmq_peer.py with args, or skips the test when
// Debian's Python has no pyzmq or msgpack and KVLENS_REQUIRE_LIBZMQ is unset.
func libzmqPeer(t *testing.T, args ...string) (stdin io.WriteCloser, lines *bufio.Scanner) {
	t.Helper()
	_, stdin, lines = libzmqProcess(t, args...)
	return stdin, lines
}

// libzmqProcess is libzmqPeer, and the peer's process, for tests that kill it.
func libzmqProcess(t *testing.T, args ...string) (peer *os.Process, stdin io.WriteCloser, lines *bufio.Scanner) {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import zmq, msgpack").Run(); err != nil {
		if os.Getenv("KVLENS_REQUIRE_LIBZMQ") != "" {
			t.Fatalf("%s cannot import zmq and msgpack (apt-get install python3-zmq python3-msgpack): %v", python, err)
		}
		t.Skipf("no pyzmq and msgpack in %s: %v", python, err)
	}
	cmd := exec.Command(python, append([]string{"testdata/libzmq_peer.py"}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines = bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	return cmd.Process, stdin, lines
}

// expectLine reads the peer's next line and fails unless it is want.
func expectLine(t *testing.T, lines *bufio.Scanner, want string) {
	t.Helper()
	if !lines.Scan() || lines.Text() != want {
		t.Fatalf("the peer said %q (%v), want %q", lines.Text(), lines.Err(), want)
	}
}

// peerBatch is the batch libzmq_peer.py publishes as seq s, as the decoder
// must read it whatever its form: blocks 10s+1 and 10s+2 of 4 tokens each,
// tokens 8s to 8s+7, parent 10s-8.
func peerBatch(s uint64) Batch {
	ev := &BlockStored{
		BlockHashes: []uint64{10*s + 1, 10*s + 2},
		TokenIDs:    []uint32{uint32(8 * s), uint32(8*s + 1), uint32(8*s + 2), uint32(8*s + 3), uint32(8*s + 4), uint32(8*s + 5), uint32(8*s + 6), uint32(8*s + 7)},
		BlockSize:   4,
		Medium:      "GPU",
	}
	if s > 0 {
		ev.Parent, ev.HasParent = 10*s-8, true
	}
	rank := int64(0)
	return Batch{TS: 1700000000 + float64(s), Events: []Event{ev}, DataParallelRank: &rank}
}

func TestSubscriberReadsALibzmqPublisherAsVLLMWritesIt(t *testing.T) {
	const n, gap = 12, 7
	pubAddr, replayAddr := freeAddr(t), freeAddr(t)
	stdin, lines := libzmqPeer(t, "pub", pubAddr, replayAddr, "12", "7")
	expectLine(t, lines, "bound")
	opened := make(chan bool, 16)
	s, u := newSub(t, Endpoint{Worker: "vllm-0", Addr: pubAddr, Replay: replayAddr, OnConn: func(open bool) { opened <- open }})
	select {
	case <-opened:
	case <-time.After(wait):
		t.Fatal("the subscriber never connected to libzmq's PUB socket")
	}
	// The subscription reaches the PUB socket a moment after the connection;
	// what is published before it is lost, and the catch-up replays it.
	io.WriteString(stdin, "go\n")
	for seq := uint64(0); seq < n; seq++ {
		got := u.next(t)
		if got.Seq != seq || got.Worker != "vllm-0" || got.Missed != 0 || got.Reset {
			t.Fatalf("update %d: seq %d from %q, missed %d, reset %v; want seq %d from vllm-0, nothing missed", seq, got.Seq, got.Worker, got.Missed, got.Reset, seq)
		}
		if want := peerBatch(seq); !reflect.DeepEqual(got.Batch, want) {
			t.Fatalf("seq %d decoded as %s, want %s", seq, show(got.Batch), show(want))
		}
		if seq == gap && !got.Replayed {
			t.Errorf("seq %d, never sent live, was not marked replayed", seq)
		}
		if seq == 0 && (!got.First || !got.Whole) {
			t.Errorf("seq 0 is First %v, Whole %v; want both: the subscriber holds the publisher's whole history", got.First, got.Whole)
		}
	}
	st := s.Stats()
	if st.DecodeErrors != 0 || st.Gaps != 0 || st.Replayed == 0 {
		t.Errorf("stats %+v: want no decode error, no unfilled gap, and the gap replayed", st)
	}
}

func TestBoundSubscriberReadsAConnectingLibzmqPublisher(t *testing.T) {
	const n, topic = 12, "kv@10.0.0.5:8000@llama"
	addr := freeAddr(t)
	opened := make(chan bool, 16)
	s, u := newSub(t, Endpoint{Addr: addr, Bind: true, OnConn: func(open bool) { opened <- open }})
	stdin, lines := libzmqPeer(t, "pub-connect", addr, topic, "12")
	expectLine(t, lines, "bound")
	select {
	case <-opened:
	case <-time.After(wait):
		t.Fatal("libzmq's PUB socket never connected to the bound subscriber")
	}
	io.WriteString(stdin, "go\n")
	// With no replay socket, what is published before the subscription
	// reaches the publisher is lost, and the stream is whole only when
	// nothing was (the subscription can win the race to seq 0); from its
	// first message on it must be complete, in order, named by its topic.
	first := u.next(t)
	if first.Worker != topic || !first.First || first.Whole != (first.Seq == 0) || first.Seq >= n/2 {
		t.Fatalf("first update: worker %q, seq %d, First %v, Whole %v; want %q, an early seq, First, and Whole only from seq 0", first.Worker, first.Seq, first.First, first.Whole, topic)
	}
	for seq, got := first.Seq, first; ; {
		if want := peerBatch(seq); got.Seq != seq || got.Missed != 0 || !reflect.DeepEqual(got.Batch, want) {
			t.Fatalf("seq %d (missed %d) decoded as %s, want seq %d as %s", got.Seq, got.Missed, show(got.Batch), seq, show(want))
		}
		if seq++; seq == n {
			break
		}
		got = u.next(t)
	}
	if st := s.Stats(); st.DecodeErrors != 0 || st.Gaps != 0 {
		t.Errorf("stats %+v: want no decode error and no gap", st)
	}
}

// peerMessage is a line of libzmq_peer.py sub: a message as pyzmq received
// it and Python's msgpack decoded it.
type peerMessage struct {
	How   string          `json:"how"`
	Seq   uint64          `json:"seq"`
	Batch json.RawMessage `json:"batch"`
}

func TestLibzmqSubscriberReadsThePublisher(t *testing.T) {
	const n = 8
	p := newPub(t, PublisherConfig{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"}, nil)
	_, lines := libzmqPeer(t, "sub", p.Endpoint(), p.ReplayEndpoint(), "8")
	expectLine(t, lines, "ready")
	time.Sleep(200 * time.Millisecond) // for the subscription to reach the PUB socket
	lora := int64(3)
	batch := func(s uint64) Batch {
		return Batch{TS: 1700000000.5 + float64(s), Events: []Event{
			&BlockStored{BlockHashes: []uint64{s<<40 | 1}, Parent: 9, HasParent: s > 0, TokenIDs: []uint32{1, 2, uint32(s)}, BlockSize: 3, LoraID: &lora},
			&BlockRemoved{BlockHashes: []uint64{1<<63 + s}},
		}}
	}
	for s := range uint64(n) {
		if err := p.Publish(batch(s)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// What Python's msgpack reads is vLLM's positional form as the README
	// gives it: BlockStored through extra_keys and BlockRemoved through
	// medium, unset fields nil, later ones left out.
	want := func(s uint64) string {
		parent := "null"
		if s > 0 {
			parent = "9"
		}
		stored := `["BlockStored", [` + jsonText(s<<40|1) + `], ` + parent + `, [1, 2, ` + jsonText(s) + `], 3, 3, null, null, null]`
		removed := `["BlockRemoved", [` + jsonText(1<<63+s) + `], null]`
		return `[` + jsonText(1700000000.5+float64(s)) + `, [` + stored + `, ` + removed + `], null]`
	}
	live, replayed := map[uint64]bool{}, map[uint64]bool{}
	for lines.Scan() && lines.Text() != "done" {
		var m peerMessage
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("peer line %q: %v", lines.Text(), err)
		}
		if m.Seq >= n {
			t.Fatalf("the peer got seq %d, past the %d published", m.Seq, n)
		}
		if got := compact(t, string(m.Batch)); got != compact(t, want(m.Seq)) {
			t.Errorf("%s seq %d: Python's msgpack read %s, want %s", m.How, m.Seq, got, want(m.Seq))
		}
		switch m.How {
		case "live":
			live[m.Seq] = true
		case "replay":
			replayed[m.Seq] = true
		default:
			t.Fatalf("peer line %q: neither live nor replay", lines.Text())
		}
	}
	if lines.Text() != "done" {
		t.Fatalf("the peer stopped before its replay ended: %v", lines.Err())
	}
	if !live[n-1] || len(replayed) != n {
		t.Fatalf("live seqs %v, replayed %v: want the last live and all %d replayed", live, replayed, n)
	}
}

// jsonText is v as JSON text.
func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// compact writes JSON text in one canonical spacing.
func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// An engine killed mid-stream (OOM, a node drained) closes its end of the
// TCP connection, and may stay away. OnConn must hear the connection close,
// whichever side dialed, and hear no connection open until the engine is
// back: the router's stream state, its Prometheus gauge and the dashboard
// follow OnConn. When the subscriber dialed, they said "connected" for as
// long as the engine stayed away (go-zeromq redials before it closes the
// dead connection), and the redial that met the dying engine's listener
// counted as a reconnection. The restarted engine counts from seq 0 again,
// which the subscriber tells from a network failure: a restart, not a
// reconnection.
func TestOnConnFollowsAKilledAndRestartedLibzmqPublisher(t *testing.T) {
	for _, tc := range []struct {
		name string
		bind bool
		// args are libzmq_peer.py's, for a peer that publishes to or on addr.
		args func(addr string) []string
	}{
		{"the subscriber dials the engine's PUB socket", false, func(addr string) []string {
			return []string{"pub", addr, freeAddr(t), "12", "-1"}
		}},
		{"the engine's PUB socket dials the bound subscriber", true, func(addr string) []string {
			return []string{"pub-connect", addr, "kv@vllm-0", "12"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := make(chan bool, 16)
			addr := freeAddr(t)
			s, u := newSub(t, Endpoint{Worker: "vllm-0", Addr: addr, Bind: tc.bind, OnConn: func(open bool) { conns <- open }})
			expect := func(want bool, what string) { t.Helper(); expectConn(t, conns, want, what) }

			peer, stdin, lines := libzmqProcess(t, tc.args(addr)...)
			expectLine(t, lines, "bound")
			expect(true, "the engine connected")
			io.WriteString(stdin, "go\n")
			// Three messages, so that the restarted engine's first heard
			// is behind the seq expected next even if its seq 0 is lost
			// while the subscription settles.
			for range 3 {
				u.next(t)
			}
			if err := peer.Kill(); err != nil {
				t.Fatal(err)
			}
			expect(false, "the killed engine's connection closed")
			select {
			case open := <-conns:
				t.Fatalf("OnConn(%v) with the engine dead", open)
			case <-time.After(500 * time.Millisecond):
			}
			if n := s.Stats().Reconnects; n != 0 {
				t.Errorf("%d reconnections counted with the engine dead, want 0", n)
			}

			_, stdin, lines = libzmqProcess(t, tc.args(addr)...)
			expectLine(t, lines, "bound")
			expect(true, "the restarted engine connected")
			io.WriteString(stdin, "go\n")
			if up := u.next(t); !up.First || !up.Reset || up.Reconnected {
				t.Errorf("the restarted engine's first message (seq %d) is First %v, Reset %v, Reconnected %v: want a restart, so that its worker's index is cleared", up.Seq, up.First, up.Reset, up.Reconnected)
			}
			if st := s.Stats(); st.Resets != 1 || st.Reconnects != 0 {
				t.Errorf("%d restarts and %d reconnections counted after one restart, want 1 and 0", st.Resets, st.Reconnects)
			}
		})
	}
}

// TestAPortOfTheWrongKindIsNamed: vLLM binds two ports, its PUB and its
// replay ROUTER, and an operator may swap them. go-zeromq fails such a
// handshake and keeps the connection, so the stream read as connected and
// heard nothing (or replay found nothing); the subscriber now reads the
// peer's socket type from its READY, closes the connection and says so.
func TestAPortOfTheWrongKindIsNamed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		events     func(pub, replay string) Endpoint
		wrong      func(pub, replay string) string // the endpoint named
		want       string
		connectsOK bool // the events socket still connects
	}{
		{"the replay ROUTER given for the events", func(pub, replay string) Endpoint {
			return Endpoint{Worker: "vllm-0", Addr: replay}
		}, func(pub, replay string) string { return replay }, "ROUTER", false},
		{"the PUB given for the replay", func(pub, replay string) Endpoint {
			return Endpoint{Worker: "vllm-0", Addr: pub, Replay: pub}
		}, func(pub, replay string) string { return pub }, "PUB", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, replay := freeAddr(t), freeAddr(t)
			_, _, lines := libzmqProcess(t, "pub", pub, replay, "3", "-1")
			expectLine(t, lines, "bound")
			peers, conns := make(chan string, 16), make(chan bool, 16)
			ep := tc.events(pub, replay)
			ep.OnConn = func(open bool) { conns <- open }
			ep.OnWrongPeer = func(endpoint, peer string) {
				if endpoint == tc.wrong(pub, replay) {
					peers <- peer
				}
			}
			newSub(t, ep)
			select {
			case peer := <-peers:
				if peer != tc.want {
					t.Fatalf("the peer named itself %q, want %s", peer, tc.want)
				}
			case <-time.After(wait):
				t.Fatal("the subscriber did not notice its peer is of the wrong kind")
			}
			select {
			case open := <-conns:
				if !tc.connectsOK || !open {
					t.Fatalf("OnConn(%v); want the events socket connected: %v", open, tc.connectsOK)
				}
			case <-time.After(300 * time.Millisecond):
				if tc.connectsOK {
					t.Fatal("the publisher never connected")
				}
			}
		})
	}
}

// A libzmq publisher, as vLLM's, parted from the subscriber by a network
// that fails (a proxy cut while the engine publishes on) or by a restart
// (the engine killed and started again, counting from seq 0). The first
// update after the new connection must say which: Reconnected, the lost
// events replayed or counted as missed, or First and Reset.
func TestALibzmqPublisherPartedIsToldFromARestarted(t *testing.T) {
	const n = 100 // published one every 20 ms, 2 s in all
	for _, tc := range []struct {
		name            string
		replay, restart bool
	}{
		{"a network failure, with replay: every seq arrives once, the lost ones replayed", true, false},
		{"a network failure, without replay: every seq arrives or is counted missed", false, false},
		{"a restart, with replay: told at once as a restart", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pubAddr, replayAddr := freeAddr(t), freeAddr(t)
			args := []string{"pub", pubAddr, replayAddr, strconv.Itoa(n), "-1"}
			peer, stdin, lines := libzmqProcess(t, args...)
			expectLine(t, lines, "bound")
			proxy := newCutProxy(t, strings.TrimPrefix(pubAddr, "tcp://"))
			conns := make(chan bool, 16)
			ep := Endpoint{Worker: "vllm-0", Addr: proxy.endpoint(), OnConn: func(open bool) { conns <- open }}
			if tc.replay {
				ep.Replay = replayAddr
			}
			s, u := newSub(t, ep)
			expect := func(want bool) { t.Helper(); expectConn(t, conns, want, "") }
			expect(true)
			io.WriteString(stdin, "go\n")
			var got []Update
			for len(got) == 0 || got[len(got)-1].Seq < 5 {
				got = append(got, u.next(t))
			}
			proxy.down()
			expect(false)
			if tc.restart {
				if err := peer.Kill(); err != nil {
					t.Fatal(err)
				}
				_, stdin, lines = libzmqProcess(t, args...)
				expectLine(t, lines, "bound")
			} else {
				time.Sleep(150 * time.Millisecond) // the engine publishes on, to nobody
			}
			proxy.up(t)
			expect(true)
			if tc.restart {
				// The replay socket says at once that the engine restarted
				// and has published nothing since.
				if up := u.next(t); !up.Empty || !up.First || !up.Reset || !up.Whole {
					t.Fatalf("the first update after the restart = %+v, want an Empty First, Reset and Whole", up)
				}
				io.WriteString(stdin, "go\n")
				for seq := range uint64(n) {
					if up := u.next(t); up.Seq != seq || up.First || up.Reset || up.Missed != 0 || up.Reconnected {
						t.Fatalf("the restarted engine's update %d = %+v, want seq %d, unflagged", seq, up, seq)
					}
				}
				if st := s.Stats(); st.Resets != 1 || st.Reconnects != 0 {
					t.Errorf("%d restarts and %d reconnections counted, want 1 and 0", st.Resets, st.Reconnects)
				}
				return
			}
			for got[len(got)-1].Seq < n-1 {
				got = append(got, u.next(t))
			}
			var reconnected int
			// Seqs delivered or counted missed; without replay, those
			// published before the subscription settled are unheard.
			heard := got[0].Seq
			for i, up := range got {
				heard += 1 + up.Missed
				switch {
				case i == 0 && (!up.First || up.Whole != (up.Seq == 0) || (tc.replay && up.Seq != 0)):
					t.Fatalf("the first update = %+v, want First, Whole if seq 0, and seq 0 with replay", up)
				case i > 0 && (up.First || up.Reset || up.Seq != got[i-1].Seq+1+up.Missed):
					t.Fatalf("update %+v after seq %d: want the next seq, or a gap counted in Missed, and no First or Reset", up, got[i-1].Seq)
				case tc.replay && up.Missed != 0:
					t.Fatalf("update %+v: with replay nothing is missed", up)
				}
				if up.Reconnected {
					reconnected++
				}
			}
			st := s.Stats()
			if reconnected != 1 || st.Reconnects != 1 || st.Resets != 0 || heard != n {
				t.Errorf("%d updates Reconnected, stats %+v, %d of %d seqs heard or missed; want 1 reconnection, no restart, all %d", reconnected, st, heard, n, n)
			}
			if tc.replay && st.Replayed == 0 {
				t.Errorf("stats %+v: nothing replayed, so the test lost nothing while parted", st)
			}
		})
	}
}
