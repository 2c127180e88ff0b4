package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvlens/kvlens/internal/lograte"
)

// Endpoint is one place the subscriber reads events from.
type Endpoint struct {
	// Worker names the publisher; Update.Worker carries it. When empty, as for
	// a bound endpoint many workers connect to, the message's topic is used,
	// or Addr if the topic is empty too.
	Worker string
	// Addr is the ZMQ endpoint: "tcp://10.0.0.5:5557" to dial a worker, or
	// "tcp://*:5557" to bind, with Bind.
	Addr string
	// Bind listens on Addr for publishers that connect, instead of dialing.
	// Publishers on one bound endpoint are told apart by topic, so each must
	// publish under its own, such as llm-d's "kv@<ip>:<port>@<model>".
	Bind bool
	// Replay is the publisher's replay (ROUTER) endpoint; empty when it has
	// none. With it, a gap is filled by replay before it is reported, and
	// the first message of a stream is preceded by what the publisher still
	// buffers from seq 0 on (a catch-up).
	Replay string
	// OnConn, when set, is called with true each time a connection to or
	// from a publisher opens on this endpoint's socket, and with false when
	// one closes. It must not block.
	OnConn func(open bool)
	// OnWrongPeer, when set, is called with the endpoint and the peer's
	// socket type each time a peer of the wrong type answers on Addr (one
	// that is no publisher, PUB or XPUB, such as the replay socket, a
	// ROUTER, given for the events) or on Replay (one that is no ROUTER);
	// the connection is closed. It must not block.
	OnWrongPeer func(endpoint, peer string)
}

// Update is a message as the subscriber hands it over, with what the
// sequence numbers say about the publisher.
type Update struct {
	// Worker is Endpoint.Worker, or else the topic, or else Endpoint.Addr.
	Worker string
	Message
	// Missed is how many messages were lost just before this one, and could
	// not be replayed. Non-zero means the worker's index is stale: clear it
	// and rebuild from this message on.
	Missed uint64
	// Reset says the publisher restarted (its seq went backwards, or its
	// replay socket no longer holds the message last heard): clear the
	// worker's index before applying this message. It comes with First.
	Reset bool
	// Replayed says the message came from the replay socket, filling a gap
	// or catching up.
	Replayed bool
	// First marks the first message handed over from a publisher: the first
	// ever, or the first after it restarted. What the index holds for the
	// worker from before is stale: clear it first.
	First bool
	// Whole, on a First message, says the messages that start here are the
	// publisher's whole history (seq 0 on, live or replayed), so the index
	// will hold all the worker holds. Without it, the worker holds blocks
	// published before the subscriber joined, which the index never sees.
	Whole bool
	// Reconnected marks the first update after a new connection to a
	// publisher already heard from whose seq went on from where it was: the
	// same engine, back after its network failed, not a restart. What the
	// index holds stands; Missed says whether events were lost meanwhile.
	Reconnected bool
	// Empty says the update carries no message, only what the publisher's
	// replay socket said when a connection opened again: with Reset, that
	// it restarted and has published nothing since; with Reconnected, that
	// it went on and has published nothing new. Its Seq is the seq the
	// publisher's next message should carry, and it counts in no message
	// stat.
	Empty bool
}

// SubscriberStats counts what a Subscriber has seen since it started.
type SubscriberStats struct {
	// Messages is the number of messages decoded and handed over, replayed
	// ones included.
	Messages uint64
	// Stored is the number of BlockStored events handed over.
	Stored uint64
	// Removed is the number of BlockRemoved events handed over.
	Removed uint64
	// Cleared is the number of AllBlocksCleared events handed over.
	Cleared uint64
	// SkippedEvents is the number of events of unknown types, skipped.
	SkippedEvents uint64
	// DecodeErrors is the number of messages dropped as malformed: bad
	// framing, or a payload DecodeBatch rejects.
	DecodeErrors uint64
	// Gaps is the number of jumps in a publisher's seq that replay did not
	// fill.
	Gaps uint64
	// MissedMessages is the sum of those jumps, in messages.
	MissedMessages uint64
	// Resets is the number of publisher restarts seen: seq going backwards,
	// or, at a reconnection, a replay socket that no longer holds the
	// message last heard.
	Resets uint64
	// Replayed is the number of messages recovered through replay.
	Replayed uint64
	// PeersLeft is the number of connections that went away (go-zeromq's
	// io.EOF from Recv).
	PeersLeft uint64
	// ReplayRequests is the number of replay requests sent, to fill gaps
	// and to catch up.
	ReplayRequests uint64
	// Reconnects is the number of connections opened after the first on an
	// endpoint that names its worker after which the publisher's seq went
	// on (a network failure, not a restart; a restart counts in Resets).
	// Each is counted when the next message, or the replay socket, tells
	// which it was. Those that lost events count in Gaps too.
	Reconnects uint64
}

// Subscriber reads KV events from ZMQ PUB sockets, one SUB socket per
// endpoint, and hands each message to a function in publisher order.
type Subscriber struct {
	handle func(Update)
	log    *slog.Logger
	quiet  *lograte.Limiter // what peers can make log write once a message

	handleMu sync.Mutex // handle is never called concurrently

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	messages, stored, removed, cleared, skipped atomic.Uint64
	decodeErrors, gaps, missed, resets          atomic.Uint64
	replayed, peersLeft, replayRequests         atomic.Uint64
	reconnects                                  atomic.Uint64
}

// SubscriberConfig says what a subscriber reads.
type SubscriberConfig struct {
	// Endpoints are read concurrently, each with its own socket.
	Endpoints []Endpoint
	// Topic is the subscription prefix; empty receives every topic.
	Topic string
	// Logger gets a line per malformed message, gap and reset, at most 5 of
	// each kind an endpoint at once and one every 2 s after them, then one
	// line every 10 s saying how many more there were (the stats count them
	// all); nil means slog.Default().
	Logger *slog.Logger
}

// NewSubscriber opens a SUB socket per endpoint and starts reading; handle
// gets every message, never from two goroutines at once, until ctx ends or
// Close is called. Bound endpoints must be free; dialed ones may come up
// later, and are redialed when they go away.
func NewSubscriber(ctx context.Context, cfg SubscriberConfig, handle func(Update)) (*Subscriber, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("kvevents: subscriber needs at least one endpoint")
	}
	if handle == nil {
		return nil, errors.New("kvevents: subscriber needs a handle func")
	}
	for _, ep := range cfg.Endpoints {
		if err := checkEndpoint(ep.Addr); err != nil {
			return nil, fmt.Errorf("kvevents: subscriber: %w", err)
		}
		if ep.Replay != "" {
			if err := checkEndpoint(ep.Replay); err != nil {
				return nil, fmt.Errorf("kvevents: subscriber replay: %w", err)
			}
		}
	}
	s := &Subscriber{handle: handle, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.quiet = newQuiet(nil, s.log)
	s.ctx, s.cancel = context.WithCancel(ctx)
	var socks []zmq4.Socket
	states := make([]*endpointState, len(cfg.Endpoints))
	for i, ep := range cfg.Endpoints {
		states[i] = &endpointState{streams: map[string]*stream{}, kick: make(chan struct{}, 1)}
		opts := append(dialOptions(!ep.Bind), zmq4.WithLogger(zmqLog(s.log, s.quiet, ep.Addr)))
		hook := s.connHook(ep, states[i])
		sctx := withConnHook(s.ctx, hook)
		var dialer *redialer
		if !ep.Bind {
			dialer = newRedialer(ep.Addr, func(err error, pause time.Duration) {
				s.warn(quietDial, ep.Addr, "kvevents: subscriber dial failed; dialing again", "endpoint", ep.Addr, "in", pause, "err", err)
			})
			sctx = dialer.context(s.ctx, hook)
		}
		sctx = withPeerCheck(sctx, []string{"PUB", "XPUB"}, func(peer string) {
			s.warn("wrong peers", ep.Addr, "kvevents: the peer is no publisher", "endpoint", ep.Addr, "socket", peer)
			if ep.OnWrongPeer != nil {
				ep.OnWrongPeer(ep.Addr, peer)
			}
		})
		sock := zmq4.NewSub(sctx, opts...)
		if err := sock.SetOption(zmq4.OptionSubscribe, cfg.Topic); err != nil {
			s.abort(socks, sock)
			return nil, fmt.Errorf("kvevents: subscribe %s: %w", ep.Addr, err)
		}
		if ep.Bind {
			if err := listen(sock, ep.Addr); err != nil {
				s.abort(socks, sock)
				return nil, fmt.Errorf("kvevents: subscriber: %w", err)
			}
		} else {
			// The dial retries until the publisher is up, so it must not hold
			// up the other endpoints.
			dialer.sock = sock
			s.wg.Go(func() { dialer.run(s.ctx) })
		}
		socks = append(socks, sock)
	}
	for i, sock := range socks {
		s.wg.Go(func() { s.read(cfg.Endpoints[i], sock, states[i]) })
		if ep := cfg.Endpoints[i]; ep.Replay != "" && ep.Worker != "" {
			s.wg.Go(func() { s.catchUpOnConnect(ep, states[i]) })
		}
	}
	return s, nil
}

// endpointState is what the subscriber knows of one endpoint's publishers.
// Its reader and its catch-up goroutine share it under mu, which also keeps
// their deliveries in seq order. What it knows of a publisher's seq
// outlives the connection, so that the first message after a new one can
// tell a publisher that went on from one that started again.
type endpointState struct {
	mu      sync.Mutex
	streams map[string]*stream // by topic
	// caught, after a catch-up that handed messages over, is where the
	// replayed run left the publisher's stream, for the live topic not yet
	// heard (a replay answer need not name its topic): the first live
	// message of a topic not in streams takes it as its stream.
	caught *stream
	// reconnected says a connection opened after the first and what came
	// of it is not yet known: the replay socket, asked at once (resume), or
	// else the next message's seq (receive) tells whether the publisher
	// went on (its network failed) or started again (it restarted). The
	// transport sets it without mu; it is read and cleared under mu.
	reconnected atomic.Bool
	// kick wakes the catch-up goroutine when a connection opens.
	kick chan struct{}
}

// connHook returns what the socket's transport calls as connections open
// and close. A connection after the first, on an endpoint that names its
// worker, means the publisher restarted or its network failed; it sets
// es.reconnected, and the publisher's seq then tells which.
func (s *Subscriber) connHook(ep Endpoint, es *endpointState) func(bool) {
	var opened atomic.Int64
	return func(open bool) {
		if open && opened.Add(1) > 1 && ep.Worker != "" {
			es.reconnected.Store(true)
		}
		if ep.OnConn != nil {
			ep.OnConn(open)
		}
		if open {
			select {
			case es.kick <- struct{}{}:
			default: // a catch-up is already due
			}
		}
	}
}

// catchUpOnConnect asks the publisher's replay socket what it buffers each
// time a connection to the publisher opens, so that the index need not
// wait for the publisher's next event (an idle engine publishes none):
//
//   - from a publisher never heard from, everything from seq 0, so that a
//     worker warm before the subscriber joined is caught up at once; the
//     first message handed over is marked First, and Whole when it is
//     seq 0;
//   - at a reconnection, from the last message heard on (see resume).
//
// The live stream then continues from the last message replayed, and live
// copies of replayed messages are dropped. When the reader has handled the
// new connection's first live message before, that message has told
// already (see receive), and there is nothing to ask.
func (s *Subscriber) catchUpOnConnect(ep Endpoint, es *endpointState) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-es.kick:
		}
		es.mu.Lock()
		switch {
		case len(es.streams) == 0 && es.caught == nil:
			es.reconnected.Store(false) // nothing heard before: nothing to tell apart
			if run, _ := s.fetchReplay(ep, ep.Worker, "", 0, ^uint64(0)); len(run) > 0 {
				s.handOver(es, ep.Worker, run, false)
			}
		case es.reconnected.Load():
			s.resume(ep, es)
		}
		es.mu.Unlock()
	}
}

// resume tells, at a reconnection, whether the publisher went on or
// restarted, from its replay socket, before any live message: it asks for
// everything from the last message heard (seq next-1) on. vLLM's publisher
// (vllm/distributed/kv_events.py, ZmqEventPublisher) counts seq from 0 in
// each process (itertools.count()), keeps the last buffer_steps batches
// (10,000 by default) in memory, and answers a replay request with each
// buffered (seq, payload) at or after start_seq, then seq -1; a restarted
// one buffers only what it published since. So the answer says:
//
//   - the same message (same seq, same payload bytes) first: the same
//     publisher, back after its network failed. What it published since is
//     handed over, the first update marked Reconnected; when there is
//     nothing, an Empty update says so.
//   - nothing at all: the publisher's seq is now below next-1, so it
//     restarted.
//   - another payload at that seq: a restarted publisher that has already
//     published as many. Payloads carry the engine's clock (vLLM's
//     EventBatch.ts, time.time()), so two lives do not publish the same
//     bytes at one seq.
//   - later seqs only: the buffer has moved past next-1, so events were
//     lost: a gap, handed over with Missed, the first update marked
//     Reconnected. (A restarted publisher that has published more than its
//     buffer holds lands here too; the index is cleared all the same.)
//
// A restart is handed over as at a first connection, from seq 0, the first
// update marked First and Reset; when the publisher has published nothing
// since, an Empty update says so, so that the worker's index is cleared
// now, not at its next event. When the replay socket does not answer, or
// the endpoint carries more than one topic, the next live message tells.
// es.mu is held.
func (s *Subscriber) resume(ep Endpoint, es *endpointState) {
	var topic string
	st := es.caught
	if len(es.streams) > 0 {
		if len(es.streams) > 1 {
			return
		}
		for topic, st = range es.streams {
		}
	}
	if st == nil || !st.seen || st.next == 0 {
		return // nothing heard to compare with: the next message tells
	}
	last := st.next - 1
	run, ok := s.fetchReplay(ep, ep.Worker, topic, last, ^uint64(0))
	if !ok {
		return
	}
	es.reconnected.Store(false)
	worker := ep.Worker
	if len(run) > 0 && (run[0].Seq > last || bytes.Equal(run[0].payload, st.last)) {
		s.reconnects.Add(1)
		if run[0].Seq == last {
			run = run[1:]
		}
		if len(run) == 0 {
			s.deliver(Update{Worker: worker, Message: Message{Topic: topic, Seq: st.next}, Reconnected: true, Empty: true})
			return
		}
		missed := run[0].Seq - st.next
		if missed > 0 {
			s.gaps.Add(1)
			s.missed.Add(missed)
			s.warn(quietGap, ep.Addr, "kvevents: events lost", "worker", worker, "missed", missed, "seq", run[0].Seq)
		}
		for i, m := range run {
			u := Update{Worker: worker, Message: m.Message, Replayed: true}
			if i == 0 {
				u.Reconnected, u.Missed = true, missed
			}
			s.replayed.Add(1)
			s.deliver(u)
		}
		end := run[len(run)-1]
		st.next, st.last, st.replayedTo = end.Seq+1, end.payload, end.Seq+1
		return
	}
	run, ok = s.fetchReplay(ep, worker, topic, 0, ^uint64(0))
	s.resets.Add(1)
	s.warn(quietRestart, ep.Addr, "kvevents: publisher restarted", "worker", worker, "expected", st.next)
	if len(run) > 0 {
		s.handOver(es, worker, run, true)
		return
	}
	clear(es.streams)
	es.caught = nil
	if ok {
		es.caught = &stream{seen: true} // its first message will be seq 0
	}
	s.deliver(Update{Worker: worker, Message: Message{Topic: topic}, First: true, Reset: true, Whole: ok, Empty: true})
}

// handOver hands over a replayed run that starts the publisher's stream
// anew, the first update marked First (Whole when it is seq 0, Reset when
// the publisher restarted), and leaves the stream where the run ends for
// the live topic not heard yet; es.mu is held.
func (s *Subscriber) handOver(es *endpointState, worker string, run []replayedMsg, reset bool) {
	clear(es.streams)
	for i, m := range run {
		u := Update{Worker: worker, Message: m.Message, Replayed: true}
		if i == 0 {
			u.First, u.Reset, u.Whole = true, reset, m.Seq == 0
		}
		s.replayed.Add(1)
		s.deliver(u)
	}
	end := run[len(run)-1]
	es.caught = &stream{seen: true, next: end.Seq + 1, last: end.payload, replayedTo: end.Seq + 1}
}

func (s *Subscriber) abort(socks []zmq4.Socket, sock zmq4.Socket) {
	s.cancel()
	sock.Close()
	for _, sk := range socks {
		sk.Close()
	}
	s.wg.Wait()
	s.quiet.Close()
}

// warn logs a line about something a peer can cause once a message: at
// most a few of each kind (what) an endpoint (from) at a time, and then a
// line saying how many more there were (lograte). Whatever it logs, the
// caller has counted the event in the stats.
func (s *Subscriber) warn(what, from, msg string, args ...any) {
	if s.quiet.Allow(what, from) {
		s.log.Warn(msg, args...)
	}
}

// stream is what the subscriber knows of one publisher's sequence.
type stream struct {
	seen bool
	next uint64 // the seq expected next
	// last is the payload of seq next-1 as it came, which a replay socket
	// asked at a reconnection must hand back unchanged if the publisher
	// is the same (see resume). It is the frame go-zeromq read, kept
	// rather than copied: go-zeromq allocates each frame anew.
	last []byte
	// replayedTo, right after a catch-up, is the seq the catch-up reached:
	// live messages before it were handed over already.
	replayedTo uint64
}

// read receives from one endpoint's socket until the subscriber stops.
func (s *Subscriber) read(ep Endpoint, sock zmq4.Socket, es *endpointState) {
	defer sock.Close()
	for {
		msg, err := sock.Recv()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			// go-zeromq returns io.EOF from Recv each time a peer goes away,
			// while the socket keeps working for the others: count it and go on.
			s.peersLeft.Add(1)
			continue
		}
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
			s.decodeErrors.Add(1)
			s.warn(quietMalformed, ep.Addr, "kvevents: malformed message", "endpoint", ep.Addr,
				"err", fmt.Sprintf("got %d frames, want [topic, 8-byte seq, payload]", len(msg.Frames)))
			continue
		}
		es.mu.Lock()
		s.receive(ep, es, msg)
		es.mu.Unlock()
	}
}

// receive handles one live message; es.mu is held. The first message after
// a reconnection that the replay socket has not told of (see resume)
// continues the publisher's seq, or jumps forward, when the publisher went
// on: the update is marked Reconnected (with Missed for a jump, replayed
// when it can be) and the index stands. One that goes back is a restart:
// First and Reset. vLLM binds its PUB socket as its engine starts, before
// it serves a request, and the subscriber redials every 100 ms, so the
// first message a restarted vLLM publishes, seq 0, is normally heard. A
// restarted publisher whose first message heard is exactly the seq
// expected next cannot be told from one that went on, without replay.
func (s *Subscriber) receive(ep Endpoint, es *endpointState, msg zmq4.Msg) {
	streams := es.streams
	topic := string(msg.Frames[0])
	seq := binary.BigEndian.Uint64(msg.Frames[1])
	worker := ep.Worker
	if worker == "" {
		worker = topic
	}
	if worker == "" {
		worker = ep.Addr
	}
	reconnected := es.reconnected.Swap(false)
	st := streams[topic]
	if st == nil {
		st = &stream{}
		if es.caught != nil {
			// A catch-up handed over everything up to here.
			*st = *es.caught
			es.caught = nil
		}
		streams[topic] = st
	}
	if reconnected {
		// A message below what a catch-up reached is a restarted
		// publisher's now (or, rarely, a copy still queued from the old
		// connection, which then counts as a restart: the index is cleared
		// and refilled, never kept stale).
		st.replayedTo = 0
	}
	if seq < st.replayedTo {
		return // the live copy of a message the catch-up handed over
	}
	st.replayedTo = 0
	// A publisher heard before whose seq went on across a reconnection.
	wentOn := reconnected && st.seen && seq >= st.next
	if wentOn {
		s.reconnects.Add(1)
	}
	u := Update{Worker: worker, Message: Message{Topic: topic, Seq: seq}}
	var caught []Update
	switch {
	case !st.seen || seq < st.next:
		// A publisher heard for the first time, or again after it
		// restarted (its seq went backwards): what came before this
		// message is unknown unless replay still has it.
		if st.seen {
			u.Reset = true
			s.resets.Add(1)
			s.warn(quietRestart, ep.Addr, "kvevents: publisher restarted", "worker", worker, "seq", seq, "expected", st.next)
		}
		u.First, u.Whole = true, seq == 0
		if seq > 0 && ep.Replay != "" {
			run, _ := s.fetchReplay(ep, worker, topic, 0, seq)
			if len(run) > 0 {
				for _, m := range run {
					caught = append(caught, Update{Worker: worker, Message: m.Message, Replayed: true})
				}
				caught[0].First, caught[0].Reset = true, u.Reset
				caught[0].Whole = run[0].Seq == 0 && run[len(run)-1].Seq+1 == seq
				u.First, u.Reset, u.Whole = false, false, false
			}
		}
	case seq > st.next:
		if ep.Replay != "" {
			run, _ := s.fetchReplay(ep, worker, topic, st.next, seq)
			if len(run) > 0 && run[0].Seq == st.next {
				for _, m := range run {
					caught = append(caught, Update{Worker: worker, Message: m.Message, Replayed: true})
				}
				st.next, st.last = run[len(run)-1].Seq+1, run[len(run)-1].payload
			}
		}
		if seq > st.next {
			u.Missed = seq - st.next
			s.gaps.Add(1)
			s.missed.Add(u.Missed)
			s.warn(quietGap, ep.Addr, "kvevents: events lost", "worker", worker, "missed", u.Missed, "seq", seq)
		}
	}
	if wentOn && len(caught) > 0 {
		caught[0].Reconnected = true
	} else if wentOn {
		u.Reconnected = true
	}
	for _, c := range caught {
		s.replayed.Add(1)
		s.deliver(c)
	}
	next := st.next
	st.seen, st.next = true, seq+1
	b, err := DecodeBatch(msg.Frames[2])
	if err != nil {
		// The message is lost to the index, and so is any gap before it,
		// which no update has told the index of: the next message must
		// count both as missed, and counts the gap then, not twice; and
		// a reconnection no update has told of is the next message's to
		// tell. A First that failed to decode leaves the stream unseen, so
		// the next message is First.
		st.next = next
		if u.Missed > 0 {
			s.gaps.Add(^uint64(0))
			s.missed.Add(-u.Missed)
		}
		if u.Reconnected {
			s.reconnects.Add(^uint64(0))
		}
		if reconnected && len(caught) == 0 {
			es.reconnected.Store(true)
		}
		if u.First {
			st.seen = false
		}
		s.decodeErrors.Add(1)
		s.warn(quietMalformed, ep.Addr, "kvevents: malformed message", "worker", worker, "seq", seq, "err", err)
		return
	}
	st.last = msg.Frames[2]
	u.Batch = b
	s.deliver(u)
}

// replayedMsg is a message from the replay socket, with its payload as it
// came.
type replayedMsg struct {
	Message
	payload []byte
}

// fetchReplay asks the publisher's replay socket for messages from..to-1
// and returns the contiguous run it got, from the first seq at or after
// from that it got, decoded. It sends vLLM's request, [id, "", start_seq]
// as the ROUTER sees it, and reads (seq, payload) answers, with or without
// a topic frame first, until seq -1 or one at or past to. answered says
// the socket answered to the end (or to a hole in what it holds): run is
// then all it holds in from..to-1 from run's first seq on, and an empty
// run says it holds nothing there.
func (s *Subscriber) fetchReplay(ep Endpoint, worker, topic string, from, to uint64) (run []replayedMsg, answered bool) {
	s.replayRequests.Add(1)
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	ctx = withPeerCheck(ctx, []string{"ROUTER"}, func(peer string) {
		if ep.OnWrongPeer != nil {
			ep.OnWrongPeer(ep.Replay, peer)
		}
	})
	sock := zmq4.NewDealer(ctx, zmq4.WithDialerMaxRetries(3), zmq4.WithDialerRetry(50*time.Millisecond))
	defer sock.Close()
	if err := sock.Dial(hooked(ep.Replay)); err != nil {
		s.warn(quietReplay, ep.Replay, "kvevents: replay", "worker", worker, "err", err)
		return nil, false
	}
	// The empty frame is the delimiter a REQ socket would add: vLLM's ROUTER
	// wants exactly [id, "", start_seq].
	if err := sock.SendMulti(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, from))); err != nil {
		s.warn(quietReplay, ep.Replay, "kvevents: replay request", "worker", worker, "err", err)
		return nil, false
	}
	for {
		msg, err := sock.Recv()
		if err != nil {
			s.warn(quietReplay, ep.Replay, "kvevents: replay", "worker", worker, "err", err)
			return run, false
		}
		seq, payload, ok := replayFrames(msg.Frames)
		if !ok {
			s.decodeErrors.Add(1)
			s.warn(quietReplayAnswer, ep.Replay, "kvevents: malformed replay answer", "worker", worker, "frames", len(msg.Frames))
			return run, false
		}
		if seq == ^uint64(0) || seq >= to {
			return run, true // the end marker, or caught up with the live stream
		}
		if seq < from || (len(run) > 0 && seq != run[len(run)-1].Seq+1) {
			if len(run) > 0 {
				return run, true // a hole: what follows cannot be applied in order
			}
			continue
		}
		b, err := DecodeBatch(payload)
		if err != nil {
			s.decodeErrors.Add(1)
			s.warn(quietReplayAnswer, ep.Replay, "kvevents: malformed replayed message", "worker", worker, "seq", seq, "err", err)
			return run, false
		}
		run = append(run, replayedMsg{Message{Topic: topic, Seq: seq, Batch: b}, payload})
	}
}

// replayFrames finds seq and payload in a replay answer as a DEALER gets
// it: ["", seq, payload] from vLLM, or ["", topic, seq, payload] from
// publishers that add the topic; the delimiter may be missing.
func replayFrames(fr [][]byte) (seq uint64, payload []byte, ok bool) {
	if len(fr) > 0 && len(fr[0]) == 0 {
		fr = fr[1:]
	}
	switch {
	case len(fr) == 2 && len(fr[0]) == 8:
		return binary.BigEndian.Uint64(fr[0]), fr[1], true
	case len(fr) == 3 && len(fr[1]) == 8:
		return binary.BigEndian.Uint64(fr[1]), fr[2], true
	case len(fr) == 1 && len(fr[0]) == 8:
		return binary.BigEndian.Uint64(fr[0]), nil, true // an end marker without its empty payload
	}
	return 0, nil, false
}

func (s *Subscriber) deliver(u Update) {
	if !u.Empty {
		s.messages.Add(1)
	}
	s.skipped.Add(uint64(u.Batch.Skipped))
	for _, ev := range u.Batch.Events {
		switch ev.(type) {
		case *BlockStored:
			s.stored.Add(1)
		case *BlockRemoved:
			s.removed.Add(1)
		case *AllBlocksCleared:
			s.cleared.Add(1)
		}
	}
	s.handleMu.Lock()
	defer s.handleMu.Unlock()
	s.handle(u)
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() SubscriberStats {
	return SubscriberStats{
		Messages: s.messages.Load(), Stored: s.stored.Load(), Removed: s.removed.Load(), Cleared: s.cleared.Load(),
		SkippedEvents: s.skipped.Load(), DecodeErrors: s.decodeErrors.Load(), Gaps: s.gaps.Load(),
		MissedMessages: s.missed.Load(), Resets: s.resets.Load(), Replayed: s.replayed.Load(), PeersLeft: s.peersLeft.Load(),
		ReplayRequests: s.replayRequests.Load(), Reconnects: s.reconnects.Load(),
	}
}

// Close stops reading and closes the sockets; it waits for a handle call in
// progress. It is safe to call more than once.
func (s *Subscriber) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		s.quiet.Close()
	})
	return nil
}
