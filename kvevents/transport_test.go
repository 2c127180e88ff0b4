package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// These tests run real ZMQ sockets over loopback TCP. ZMQ's PUB drops what
// it sends before a subscription arrives (the "slow joiner"), so each test
// first publishes warm-up batches, marked by TS -1, until one gets through.

const wait = 5 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// freeAddr returns a loopback TCP endpoint nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "tcp://" + l.Addr().String()
}

// updates collects what a subscriber hands over.
type updates chan Update

func (u updates) handle(up Update) { u <- up }

// next returns the next update that is not a warm-up.
func (u updates) next(t *testing.T) Update {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case up := <-u:
			if up.Batch.TS != -1 {
				return up
			}
		case <-deadline:
			t.Fatal("no update within", wait)
		}
	}
}

// warm publishes warm-up batches until the subscriber has one from topic.
func warm(t *testing.T, publish func(Batch) error, u updates, topic string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if err := publish(Batch{TS: -1}); err != nil {
			t.Fatal(err)
		}
		select {
		case up := <-u:
			if up.Batch.TS == -1 && up.Topic == topic {
				drainWarmUp(u)
				return
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no warm-up batch on topic %q got through within %s", topic, wait)
}

// sent waits until p has handed n messages to its socket, so that a
// subscriber started after it cannot receive them live.
func sent(t *testing.T, p *Publisher, n uint64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for p.Stats().Published < n {
		if time.Now().After(deadline) {
			t.Fatalf("the publisher sent %d of %d messages", p.Stats().Published, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// drainWarmUp drops the warm-up batches still on their way: the live copies
// of those a replay catch-up handed over first.
func drainWarmUp(u updates) {
	for {
		select {
		case up := <-u:
			if up.Batch.TS != -1 {
				panic(fmt.Sprintf("a batch other than warm-up arrived during warm-up: %+v", up))
			}
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

func stored(ts float64, hash uint64) Batch {
	return Batch{TS: ts, Events: []Event{&BlockStored{BlockHashes: []uint64{hash}, TokenIDs: []uint32{1, 2}, BlockSize: 2}}}
}

func newSub(t *testing.T, eps ...Endpoint) (*Subscriber, updates) {
	t.Helper()
	u := make(updates, 4096)
	s, err := NewSubscriber(context.Background(), SubscriberConfig{Endpoints: eps, Logger: quiet}, u.handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, u
}

func newPub(t *testing.T, cfg PublisherConfig, beforeSend func()) *Publisher {
	t.Helper()
	cfg.Logger = quiet
	p, err := newPublisher(cfg, beforeSend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// expectInOrder publishes n batches and checks they arrive whole, in order,
// with consecutive seqs and nothing flagged.
func expectInOrder(t *testing.T, p *Publisher, u updates, worker string, n int) {
	t.Helper()
	var prev uint64
	for i := range n {
		want := stored(float64(i), uint64(100+i))
		if err := p.Publish(want); err != nil {
			t.Fatal(err)
		}
		got := u.next(t)
		if got.Worker != worker || got.Missed != 0 || got.Reset || !reflect.DeepEqual(got.Batch, want) {
			t.Fatalf("update %d = %+v (batch %s), want worker %q, batch %s, no gap or reset", i, got, show(got.Batch), worker, show(want))
		}
		if i > 0 && got.Seq != prev+1 {
			t.Fatalf("seq %d after %d, want consecutive", got.Seq, prev)
		}
		prev = got.Seq
	}
}

func TestPublisherBindsSubscriberConnects(t *testing.T) {
	addr := freeAddr(t)
	p := newPub(t, PublisherConfig{Endpoint: addr}, nil)
	s, u := newSub(t, Endpoint{Worker: "w0", Addr: addr})
	warm(t, p.Publish, u, "")
	expectInOrder(t, p, u, "w0", 20)
	st := s.Stats()
	if st.Gaps != 0 || st.Resets != 0 || st.DecodeErrors != 0 || st.Stored < 20 {
		t.Errorf("stats = %+v, want ≥ 20 stored and no gaps, resets or decode errors", st)
	}
}

func TestSubscriberBindsPublisherConnects(t *testing.T) {
	addr := freeAddr(t)
	_, u := newSub(t, Endpoint{Addr: addr, Bind: true})
	topic := "kv@10.0.0.7:8000@llama"
	p := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: topic}, nil)
	warm(t, p.Publish, u, topic)
	// With no Worker name on a bound endpoint, the topic names the worker.
	expectInOrder(t, p, u, topic, 20)
}

// A publisher that dials a bound subscriber redials when the subscriber
// restarts, and the new subscriber reads on without flagging anything.
func TestConnectingPublisherSurvivesSubscriberRestart(t *testing.T) {
	addr := freeAddr(t)
	s1, u1 := newSub(t, Endpoint{Addr: addr, Bind: true})
	p := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "w"}, nil)
	warm(t, p.Publish, u1, "w")
	expectInOrder(t, p, u1, "w", 5)
	s1.Close()

	_, u2 := newSub(t, Endpoint{Addr: addr, Bind: true})
	warm(t, p.Publish, u2, "w")
	expectInOrder(t, p, u2, "w", 5)
}

// Two publishers connect to one bound SUB socket; when one goes away,
// go-zeromq's Recv returns io.EOF, and the other must keep delivering.
func TestOnePublisherLeavingDoesNotStopTheOther(t *testing.T) {
	addr := freeAddr(t)
	s, u := newSub(t, Endpoint{Addr: addr, Bind: true})
	a := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "a"}, nil)
	b := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "b"}, nil)
	warm(t, a.Publish, u, "a")
	warm(t, b.Publish, u, "b")
	a.Close()

	deadline := time.Now().Add(wait)
	for s.Stats().PeersLeft == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Stats().PeersLeft == 0 {
		t.Fatal("the subscriber never saw publisher a leave")
	}
	expectInOrder(t, b, u, "b", 10)
}

// A publisher that restarts counts from 0 again; the subscriber redials it
// and must flag the first message of the new run as a First and Reset, a
// restart, not a reconnection.
func TestPublisherRestartIsReported(t *testing.T) {
	addr := freeAddr(t)
	s, u := newSub(t, Endpoint{Worker: "w0", Addr: addr})
	p := newPub(t, PublisherConfig{Endpoint: addr, QueueSize: 4096}, nil)
	warm(t, p.Publish, u, "")
	// Take the old run's seq well past anything the new run will reach while
	// the subscriber redials, so the restart shows as seq going backwards.
	const old = 2000
	for i := range old {
		if err := p.Publish(stored(float64(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range old {
		if up := u.next(t); up.Seq == 0 || up.Missed != 0 || up.Reset {
			t.Fatalf("old run message %d: %+v", i, up)
		}
	}
	p.Close()

	p2 := newPub(t, PublisherConfig{Endpoint: addr}, nil)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if err := p2.Publish(stored(7, 7)); err != nil {
			t.Fatal(err)
		}
		select {
		case up := <-u:
			if !up.First || !up.Reset || up.Reconnected || up.Seq >= old || up.Missed != 0 {
				t.Fatalf("first message after the restart = %+v, want First and Reset", up)
			}
			if st := s.Stats(); st.Resets != 1 || st.Reconnects != 0 {
				t.Errorf("stats %+v, want 1 restart and no reconnection", st)
			}
			if err := p2.Publish(stored(8, 8)); err != nil {
				t.Fatal(err)
			}
			if next := u.next(t); next.First || next.Reset || next.Missed != 0 || next.Seq != up.Seq+1 {
				t.Errorf("the message after the reset = %+v, want the next seq, unflagged", next)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("nothing from the restarted publisher")
}

// holdSender returns a beforeSend hook and the lock that holds it.
func holdSender() (func(), *sync.Mutex) {
	var mu sync.Mutex
	return func() { mu.Lock(); mu.Unlock() }, &mu
}

// fillQueue holds the sender, publishes more than the queue takes, then
// releases it and publishes one last batch. It returns that batch's TS.
func fillQueue(t *testing.T, p *Publisher, hold *sync.Mutex, n int) float64 {
	t.Helper()
	hold.Lock()
	for i := range n {
		if err := p.Publish(stored(float64(i), uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	hold.Unlock()
	deadline := time.Now().Add(wait)
	for len(p.queue) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // let the sender drain, so the last batch is queued
	}
	if err := p.Publish(stored(float64(n), uint64(n))); err != nil {
		t.Fatal(err)
	}
	return float64(n)
}

func TestDroppedBatchesShowAsGaps(t *testing.T) {
	addr := freeAddr(t)
	hook, hold := holdSender()
	p := newPub(t, PublisherConfig{Endpoint: addr, QueueSize: 2}, hook)
	s, u := newSub(t, Endpoint{Worker: "w0", Addr: addr})
	warm(t, p.Publish, u, "")

	last := fillQueue(t, p, hold, 10)
	var missed uint64
	for {
		up := u.next(t)
		missed += up.Missed
		if up.Batch.TS == last {
			break
		}
	}
	dropped := p.Stats().Dropped
	if dropped == 0 {
		t.Fatal("the publisher dropped nothing; the test did not fill its queue")
	}
	st := s.Stats()
	if missed != dropped || st.MissedMessages != dropped || st.Gaps == 0 {
		t.Errorf("publisher dropped %d; subscriber saw Missed %d, stats %+v: want every drop reported as missed", dropped, missed, st)
	}
}

func TestReplayFillsGaps(t *testing.T) {
	addr, replay := freeAddr(t), freeAddr(t)
	hook, hold := holdSender()
	p := newPub(t, PublisherConfig{Endpoint: addr, QueueSize: 2, ReplayEndpoint: replay}, hook)
	s, u := newSub(t, Endpoint{Worker: "w0", Addr: addr, Replay: replay})
	warm(t, p.Publish, u, "")
	before := s.Stats().Replayed // a first message is caught up by replay too

	const n = 10
	last := fillQueue(t, p, hold, n)
	// Every batch arrives once, in order, whether live or replayed.
	for want := 0.0; want <= last; want++ {
		up := u.next(t)
		if up.Batch.TS != want || up.Missed != 0 {
			t.Fatalf("got batch %v (missed %d, replayed %v), want batch %v with nothing missed", up.Batch.TS, up.Missed, up.Replayed, want)
		}
	}
	dropped := p.Stats().Dropped
	if st := s.Stats(); dropped == 0 || st.Replayed-before != dropped || st.Gaps != 0 {
		t.Errorf("publisher dropped %d; subscriber stats %+v: want every drop replayed and no gap", dropped, st)
	}
}

func TestMalformedMessagesAreCountedAndSkipped(t *testing.T) {
	addr := freeAddr(t)
	pub := zmq4.NewPub(context.Background())
	defer pub.Close()
	if err := pub.Listen(addr); err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	send := func(frames ...[]byte) {
		if err := pub.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(b Batch) error {
		payload, err := EncodeBatch(b)
		if err != nil {
			return err
		}
		send(nil, binary.BigEndian.AppendUint64(nil, seq), payload)
		seq++
		return nil
	}
	s, u := newSub(t, Endpoint{Worker: "w0", Addr: addr})
	warm(t, publish, u, "")

	send(nil, []byte{1, 2, 3}) // two frames, and a short seq
	send(nil, binary.BigEndian.AppendUint64(nil, seq), []byte{0x93, 0xcb, 0x00})
	seq++
	if err := publish(stored(5, 5)); err != nil {
		t.Fatal(err)
	}
	up := u.next(t)
	if up.Batch.TS != 5 || up.Missed != 1 {
		t.Errorf("after a malformed payload got batch %v with %d missed, want batch 5 with the bad one counted missed", up.Batch.TS, up.Missed)
	}
	if got := s.Stats().DecodeErrors; got != 2 {
		t.Errorf("Stats().DecodeErrors = %d, want 2", got)
	}
}

func TestSubscriberSadPath(t *testing.T) {
	taken := freeAddr(t)
	hold, err := NewPublisher(PublisherConfig{Endpoint: taken, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	tests := []struct {
		name string
		cfg  SubscriberConfig
	}{
		{"no endpoints is an error", SubscriberConfig{}},
		{"binding an address in use is an error", SubscriberConfig{Endpoints: []Endpoint{{Addr: taken, Bind: true}}}},
		{"an unknown transport is an error, even for a dial that would retry", SubscriberConfig{Endpoints: []Endpoint{{Addr: "carrier-pigeon://x"}}}},
		{"an endpoint without a scheme is an error", SubscriberConfig{Endpoints: []Endpoint{{Addr: "localhost:5557"}}}},
		{"a malformed replay endpoint is an error", SubscriberConfig{Endpoints: []Endpoint{{Addr: taken, Replay: "5558"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSubscriber(context.Background(), tt.cfg, func(Update) {})
			if err == nil {
				s.Close()
				t.Fatal("NewSubscriber succeeded")
			}
		})
	}
	if _, err := NewPublisher(PublisherConfig{Endpoint: taken}); err == nil {
		t.Error("a second publisher bound the same address")
	}
	if _, err := NewPublisher(PublisherConfig{Endpoint: "tcp:/x", Connect: true}); err == nil {
		t.Error("a publisher accepted a malformed endpoint")
	}
	if _, err := NewSubscriber(context.Background(), SubscriberConfig{Endpoints: []Endpoint{{Addr: taken}}}, nil); err == nil {
		t.Error("a subscriber accepted a nil handle func")
	}
}

func TestCloseIsIdempotentAndStopsDelivery(t *testing.T) {
	addr := freeAddr(t)
	p := newPub(t, PublisherConfig{Endpoint: addr}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	u := make(updates, 16)
	s, err := NewSubscriber(ctx, SubscriberConfig{Endpoints: []Endpoint{{Addr: addr}}, Logger: quiet}, u.handle)
	if err != nil {
		t.Fatal(err)
	}
	warm(t, p.Publish, u, "")
	cancel() // cancelling the context stops the readers...
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // ...and Close after it is harmless
		t.Fatal(err)
	}
	for len(u) > 0 {
		<-u
	}
	_ = p.Publish(stored(1, 1))
	select {
	case up := <-u:
		t.Fatalf("delivered after Close: %+v", up)
	case <-time.After(100 * time.Millisecond):
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(stored(2, 2)); err != ErrClosed {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
}

func ExampleSubscriber() {
	s, err := NewSubscriber(context.Background(), SubscriberConfig{
		Endpoints: []Endpoint{{Worker: "worker-0", Addr: "tcp://127.0.0.1:5557"}},
	}, func(u Update) {
		if u.Reset || u.Missed > 0 {
			// Clear the worker's blocks from the index; they are stale.
		}
		fmt.Println(u.Worker, u.Seq, len(u.Batch.Events))
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
}

// The replay socket speaks vLLM's framing, checked here with a bare DEALER:
// a request [“”, start_seq] gets [“”, seq, payload] per buffered message
// from start_seq on, then [“”, -1, “”].
func TestReplaySocketFraming(t *testing.T) {
	replay := freeAddr(t)
	p := newPub(t, PublisherConfig{Endpoint: freeAddr(t), ReplayEndpoint: replay, ReplaySize: 2}, nil)
	for i := range 3 { // the ring keeps seqs 1 and 2
		if err := p.Publish(stored(float64(i), uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	dealer := zmq4.NewDealer(ctx)
	defer dealer.Close()
	if err := dealer.Dial(replay); err != nil {
		t.Fatal(err)
	}
	if err := dealer.SendMulti(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, 0))); err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint64{1, 2} {
		msg, err := dealer.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Frames) != 3 || len(msg.Frames[0]) != 0 || binary.BigEndian.Uint64(msg.Frames[1]) != want {
			t.Fatalf("replay frames = %q, want [\"\", seq %d, payload]", msg.Frames, want)
		}
		if b, err := DecodeBatch(msg.Frames[2]); err != nil || b.TS != float64(want) {
			t.Fatalf("replayed payload %d decodes to %v, %v", want, b.TS, err)
		}
	}
	msg, err := dealer.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Frames) != 3 || !bytes.Equal(msg.Frames[1], bytes.Repeat([]byte{0xff}, 8)) || len(msg.Frames[2]) != 0 {
		t.Fatalf("end of replay = %q, want [\"\", -1 as 8 bytes, \"\"]", msg.Frames)
	}
	if got := p.Stats().ReplayRequests; got != 1 {
		t.Errorf("Stats().ReplayRequests = %d, want 1", got)
	}
}

// A subscriber that joins a publisher already running catches up through
// replay: what the publisher published before the join arrives first,
// replayed, and the first of it says the history is whole.
func TestReplayCatchesUpAtFirstConnect(t *testing.T) {
	addr, replay := freeAddr(t), freeAddr(t)
	p := newPub(t, PublisherConfig{Endpoint: addr, ReplayEndpoint: replay}, nil)
	const before = 5 // published to nobody
	for i := range before {
		if err := p.Publish(stored(float64(i), uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	sent(t, p, before)
	s, u := newSub(t, Endpoint{Worker: "w0", Addr: addr, Replay: replay})
	deadline := time.Now().Add(wait)
	var first Update
wait:
	for time.Now().Before(deadline) {
		if err := p.Publish(Batch{TS: -1}); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-u:
			break wait
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !first.First || !first.Whole || !first.Replayed || first.Seq != 0 || first.Batch.TS != 0 {
		t.Fatalf("first update = %+v, want seq 0, replayed, First and Whole", first)
	}
	for i := 1; i < before; i++ {
		up := u.next(t)
		if !up.Replayed || up.First || up.Seq != uint64(i) || up.Batch.TS != float64(i) {
			t.Fatalf("update %d = %+v, want seq %d replayed", i, up, i)
		}
	}
	// Then the markers, from seq 5 on: replayed up to the one that set off
	// the catch-up, live from there, with nothing missed.
	select {
	case up := <-u:
		if up.First || up.Missed != 0 || up.Batch.TS != -1 || up.Seq != before {
			t.Fatalf("after the catch-up got %+v, want seq %d, a marker", up, before)
		}
	case <-time.After(wait):
		t.Fatal("no marker after the catch-up")
	}
	if st := s.Stats(); st.ReplayRequests == 0 { // the catch-up, and maybe a gap fill after it
		t.Errorf("ReplayRequests = %d, want at least 1", st.ReplayRequests)
	}
}

// Without replay, a subscriber that joins late cannot know what came
// before: its first message is First but not Whole.
func TestLateJoinWithoutReplayIsNotWhole(t *testing.T) {
	addr := freeAddr(t)
	p := newPub(t, PublisherConfig{Endpoint: addr}, nil)
	for i := range 3 {
		if err := p.Publish(stored(float64(i), uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	sent(t, p, 3)
	_, u := newSub(t, Endpoint{Worker: "w0", Addr: addr})
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if err := p.Publish(Batch{TS: -1}); err != nil {
			t.Fatal(err)
		}
		select {
		case up := <-u:
			if !up.First || up.Whole || up.Seq == 0 {
				t.Fatalf("first update = %+v, want First, not Whole, seq > 0", up)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("nothing arrived")
}

func TestReplayFrames(t *testing.T) {
	seq := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	tests := []struct {
		name    string
		frames  [][]byte
		seq     uint64
		payload string
		ok      bool
	}{
		// vLLM: the DEALER gets ["", seq, payload].
		{"vLLM's delimiter, seq and payload are read", [][]byte{{}, seq(7), []byte("p")}, 7, "p", true},
		// Some publishers put the topic before the seq.
		{"a topic frame before the seq is skipped", [][]byte{{}, []byte("kv@x"), seq(8), []byte("q")}, 8, "q", true},
		{"an answer without the delimiter is read", [][]byte{seq(9), []byte("r")}, 9, "r", true},
		{"the end marker without its empty payload is read", [][]byte{{}, seq(^uint64(0))}, ^uint64(0), "", true},
		// Sad path.
		{"a seq that is not 8 bytes is refused", [][]byte{{}, []byte("1234"), []byte("p")}, 0, "", false},
		{"an empty answer is refused", nil, 0, "", false},
		{"too many frames are refused", [][]byte{{}, {1}, {2}, seq(1), {3}}, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, p, ok := replayFrames(tt.frames)
			if ok != tt.ok || (ok && (s != tt.seq || string(p) != tt.payload)) {
				t.Errorf("replayFrames = %d, %q, %v; want %d, %q, %v", s, p, ok, tt.seq, tt.payload, tt.ok)
			}
		})
	}
}

// FuzzReplayFrames checks that any replay answer a publisher sends is read
// or refused, never a panic, and that what is read came from its frames.
func FuzzReplayFrames(f *testing.F) {
	seq := binary.BigEndian.AppendUint64(nil, 3)
	f.Add([]byte{}, seq, []byte("payload"), false)
	f.Add([]byte("kv@topic"), seq, []byte("payload"), true)
	f.Add([]byte{}, bytes.Repeat([]byte{0xff}, 8), []byte{}, false)
	f.Fuzz(func(t *testing.T, a, b, c []byte, four bool) {
		frames := [][]byte{{}, a, b, c}
		if !four {
			frames = frames[1:]
		}
		s, p, ok := replayFrames(frames)
		if !ok {
			return
		}
		found := false
		for _, fr := range frames {
			if len(fr) == 8 && binary.BigEndian.Uint64(fr) == s {
				found = true
			}
		}
		if !found {
			t.Fatalf("seq %d is in no 8-byte frame of %q", s, frames)
		}
		if p != nil && !bytes.Equal(p, frames[len(frames)-1]) {
			t.Fatalf("payload %q is not the last frame of %q", p, frames)
		}
	})
}

// A publisher that was busy before the subscriber joined and is idle now
// is caught up the moment the connection opens, with no new message to set
// it off; live messages then continue the sequence with nothing missed.
func TestReplayCatchesUpAtConnectWithoutNewEvents(t *testing.T) {
	addr, replay := freeAddr(t), freeAddr(t)
	p := newPub(t, PublisherConfig{Endpoint: addr, ReplayEndpoint: replay}, nil)
	const before = 3
	for i := range before {
		if err := p.Publish(stored(float64(i), uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	sent(t, p, before)
	_, u := newSub(t, Endpoint{Worker: "w0", Addr: addr, Replay: replay})
	for i := range before {
		up := u.next(t)
		if !up.Replayed || up.Seq != uint64(i) || up.First != (i == 0) || up.Whole != (i == 0) {
			t.Fatalf("update %d = %+v, want seq %d replayed, the first one First and Whole", i, up, i)
		}
	}
	// Live now: the first messages may be lost while the subscription
	// settles, and are then replayed as a gap; none is missed or repeated.
	next := uint64(before)
	deadline := time.Now().Add(wait)
	for next < before+5 && time.Now().Before(deadline) {
		if err := p.Publish(stored(float64(next), next)); err != nil {
			t.Fatal(err)
		}
		select {
		case up := <-u:
			if up.Seq != next || up.Missed != 0 || up.First {
				t.Fatalf("after the catch-up got %+v, want seq %d, nothing missed", up, next)
			}
			next++
		case <-time.After(20 * time.Millisecond):
		}
	}
	if next < before+5 {
		t.Fatal("the live stream never continued")
	}
}
