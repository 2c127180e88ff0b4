package router

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/internal/lograte"
	"github.com/kvlens/kvlens/kvevents"
)

// FeedSync is how often a Feed compares its subscriptions with the pool, so
// that a worker DNS discovery adds is subscribed to within a second or so.
const FeedSync = time.Second

// Feed keeps the router's KV index fed from the workers' KV events: one ZMQ
// subscription per worker that names an events endpoint, following workers
// as they join and leave the pool. kvlens dials a worker's PUB socket, or
// binds one its publisher connects to (events=tcp://*:P), as vLLM allows
// both.
//
// A worker's index is cleared whenever what it holds may no longer be what
// the worker holds: at the first message from its publisher, when the
// publisher restarts, at a gap in its sequence numbers, and when the worker
// is re-admitted after failing its health checks (unless its publisher has
// told since what became of it). It then rebuilds from the events that
// follow. A publisher that reconnects is not cleared for it: the
// subscriber tells a network failure, after which the publisher's sequence
// numbers go on and the index stands (or has a gap, which clears it), from
// a restart, after which they start again from 0. With a replay socket it
// tells at the connection; without one, at the publisher's next message,
// and until then the index holds what the worker held before. Events published before kvlens
// joined (or during a gap) are caught up through the worker's replay socket
// when it has one; without one, the worker is "warming" until its cache has
// turned over once (see eventStream.settle) or it clears its cache.
type Feed struct {
	r    *Router
	logf func(string, ...any)
	clk  clock.Clock
	// quiet paces the lines a publisher can cause once a message or a
	// connection (a join without history, a reconnection), on the wall
	// clock whatever clk is: it is the operator's terminal that fills.
	quiet *lograte.Limiter

	mu   sync.Mutex
	subs map[string]*feedSub // by worker name
}

type feedSub struct {
	spec   streamSpec
	stream *eventStream
	sub    *kvevents.Subscriber
	cancel context.CancelFunc
}

// streamSpec is what a subscription is made from; a change re-subscribes.
type streamSpec struct {
	events  string
	bind    bool
	replay  string
	parent0 string
}

// NewFeed returns a feed for r; logf gets one line per subscription change
// and error.
func NewFeed(r *Router, logf func(string, ...any)) *Feed {
	f := &Feed{r: r, logf: logf, clk: clock.Real, subs: map[string]*feedSub{}}
	f.quiet = lograte.New(nil, func(line string) { f.logf("KV events: %s", line) })
	r.Pool().OnHealthChange(f.healthChanged)
	return f
}

// Run keeps the subscriptions in step with the pool until ctx ends, then
// closes them all.
func (f *Feed) Run(ctx context.Context, clk clock.Clock) {
	f.mu.Lock()
	f.clk = clk
	f.mu.Unlock()
	every(ctx, clk, FeedSync, func() { f.Sync(ctx) })
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.subs {
		s.close()
		delete(f.subs, name)
	}
	f.quiet.Close()
}

// Sync subscribes to every worker in the pool that publishes events and is
// not yet subscribed to, and drops the subscriptions (and index entries) of
// workers that left.
func (f *Feed) Sync(ctx context.Context) {
	want := map[string]*Worker{}
	for _, w := range f.r.Pool().Workers() {
		if w.Events != "" {
			want[w.Name] = w
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.subs {
		if w, ok := want[name]; !ok || specOf(w) != s.spec {
			s.close()
			delete(f.subs, name)
			f.r.Index().RemoveWorker(name)
			if ok {
				w.stream.Store(nil)
			}
			f.logf("stopped reading KV events of %s", name)
		}
	}
	for name, w := range want {
		if _, ok := f.subs[name]; ok {
			continue
		}
		spec := specOf(w)
		es := newEventStream(spec, f.clk)
		sctx, cancel := context.WithCancel(ctx)
		sub, err := kvevents.NewSubscriber(sctx, kvevents.SubscriberConfig{
			Endpoints: []kvevents.Endpoint{{
				Worker: name, Addr: spec.events, Bind: spec.bind, Replay: spec.replay,
				OnConn:      func(open bool) { f.connected(name, es, open) },
				OnWrongPeer: es.wrongPeer,
			}},
		}, func(u kvevents.Update) { f.apply(es, u) })
		if err != nil {
			cancel()
			f.logf("KV events of %s: %v", name, err)
			continue
		}
		es.setSub(sub)
		w.stream.Store(es)
		f.subs[name] = &feedSub{spec: spec, stream: es, sub: sub, cancel: cancel}
		verb := "reading KV events of %s from %s"
		if spec.bind {
			verb = "listening for KV events of %s on %s"
		}
		if spec.replay != "" {
			verb += ", replay " + spec.replay
		}
		f.logf(verb, name, spec.events)
	}
}

func specOf(w *Worker) streamSpec {
	return streamSpec{events: w.Events, bind: w.EventsBind, replay: w.Replay, parent0: w.Parent0}
}

// apply hands one message's events to the index, clearing the worker first
// when what the index holds for it is stale.
func (f *Feed) apply(es *eventStream, u kvevents.Update) {
	es.mu.Lock()
	defer es.mu.Unlock()
	idx := f.r.Index()
	switch {
	case u.First:
		// A First after the stream's first message is a new publisher: its
		// sequence numbers started again (Reset), or it publishes under a
		// topic not heard before (llm-d's names the engine's address).
		if u.Reset {
			f.r.metrics.SequenceGaps.WithLabelValues(u.Worker).Inc()
		}
		idx.ClearWorker(u.Worker)
		es.cleared(RefillRestart)
		es.backSinceDown = true
		if u.Reset && f.quiet.Allow("publisher restarts", u.Worker) {
			f.logf("KV events of %s: publisher restarted (its sequence numbers started again); index cleared", u.Worker)
		}
		es.startWarming(!u.Whole)
		if !u.Whole && f.quiet.Allow("joins without history", u.Worker) {
			f.logf("KV events of %s: joined at seq %d without its history; warming until its cache turns over", u.Worker, u.Seq)
		}
	case u.Reset || u.Missed > 0:
		f.r.SequenceGap(u.Worker)
		es.cleared(RefillGap)
		es.startWarming(true)
	}
	if u.Reconnected {
		es.backSinceDown = true
		if u.Missed == 0 && f.quiet.Allow("publishers back", u.Worker) {
			f.logf("KV events of %s: publisher back with nothing lost (its sequence numbers went on); index kept", u.Worker)
		}
	}
	if u.Empty {
		return // what the replay socket said at a connection: no event
	}
	es.lastEvent = es.clk.Now()
	parent0 := es.spec.parent0
	for _, ev := range u.Batch.Events {
		if st, ok := ev.(*kvevents.BlockStored); ok {
			f.adoptParent(es, u.Worker, st, parent0)
		}
		// ApplyFrom counts each outcome in the router's metrics; an event
		// that does not apply (an unknown parent, say) is counted, not fatal.
		a, _ := idx.ApplyFrom(u.Worker, ev, parent0)
		es.count(a)
		if st, ok := ev.(*kvevents.BlockStored); ok && a.Reason == OutcomeInvalid && st.BlockSize != idx.BlockSize() {
			if es.foreignSize != st.BlockSize {
				// Once a worker and size: each of its stores is dropped
				// alike, and the blind banner goes on saying so.
				f.logf("KV events of %s: blocks of %d tokens, the router indexes blocks of %d; every store is dropped until kvlens runs with --block-size %d", u.Worker, st.BlockSize, idx.BlockSize(), st.BlockSize)
			}
			es.foreignSize = st.BlockSize
		}
	}
	if es.warming && es.settled(idx.Blocks(u.Worker)) {
		es.warming = false
		if f.quiet.Allow("caches warm again", u.Worker) {
			f.logf("KV events of %s: warm (its cache turned over once since kvlens joined)", u.Worker)
		}
	}
}

// adoptBudget bounds the searches adoptParent makes for one worker each
// second: each hashes every block of every prompt in flight on it (about
// 10,000 hashes, 0.1 ms, for 64 prompts of 150 blocks).
const adoptBudget = 64

// adoptParent places the parent of a store the index cannot place, when a
// prompt in flight on the worker shows which block it is. A worker that
// was warm before kvlens joined, or that lost events in a gap, goes on
// extending the prefixes it held then, and a prefix every conversation
// shares (a system prompt) is never evicted: without this, every store
// hanging off one would be dropped for as long as the worker keeps it,
// and the index would stay empty. It runs under es.mu.
func (f *Feed) adoptParent(es *eventStream, worker string, e *kvevents.BlockStored, parent0 string) {
	idx := f.r.Index()
	bs := idx.BlockSize()
	switch {
	case adapterOf(e) != "", !onGPU(e.Medium), len(e.TokenIDs) < bs,
		e.GroupIdx != nil && *e.GroupIdx != 0, e.KVCacheSpecKind != "" && !fullAttention(e.KVCacheSpecKind):
		return // as the index would drop it, or salted apart from the chains booked
	case idx.KnowsParent(worker, e, parent0):
		return
	}
	if now := es.clk.Now(); now.Sub(es.adoptSecond) >= time.Second {
		es.adoptSecond, es.adoptTries = now, 0
	}
	if es.adoptTries >= adoptBudget {
		return
	}
	es.adoptTries++
	prefix := f.r.InferParent(worker, e.TokenIDs[:bs])
	if prefix == nil {
		return
	}
	idx.Adopt(worker, e.Parent, prefix)
	es.adopted++
	es.knownRun = 0 // the worker holds blocks from before
}

// connected follows the connections of a worker's event socket. A
// connection after the first means the publisher restarted or its network
// failed; which, the subscriber tells (see apply), and the index is kept
// until it has.
func (f *Feed) connected(worker string, es *eventStream, open bool) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if !open {
		es.conns = max(0, es.conns-1)
		return
	}
	es.conns++
	if !es.everConnected {
		es.everConnected = true
		return
	}
	if f.quiet.Allow("publisher reconnections", worker) {
		f.logf("KV events of %s: publisher reconnected; index kept until its sequence numbers tell a network failure from a restart", worker)
	}
}

// healthChanged clears a worker's index when it passes its health check
// after failing: it may have restarted with an empty cache, or lost events.
// It does not when the publisher has told since the failure what became of
// it: it restarted (the index was cleared then, and what it holds since is
// the new life's), or its sequence numbers went on across a reconnection
// (the index is the worker's, less any gap, which cleared it). A worker
// whose publisher reconnected but has not told yet is cleared.
func (f *Feed) healthChanged(w *Worker, healthy bool) {
	es := w.stream.Load()
	if es == nil {
		return
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if !healthy {
		es.down, es.backSinceDown = true, false
		return
	}
	down, back := es.down, es.backSinceDown
	es.down = false
	if down && back {
		f.logf("KV events of %s: worker healthy again; its publisher already came back, index kept", w.Name)
		return
	}
	f.r.Index().ClearWorker(w.Name)
	es.cleared(RefillReadmit)
	es.startWarming(true)
	f.logf("KV events of %s: worker healthy again; index cleared", w.Name)
}

// Subscribed returns the names of the workers whose events are being read.
func (f *Feed) Subscribed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.subs))
	for n := range f.subs {
		names = append(names, n)
	}
	return names
}

func (s *feedSub) close() {
	s.cancel()
	s.sub.Close()
}

// eventStream is one worker's KV-event stream as the Feed follows it.
type eventStream struct {
	spec streamSpec
	clk  clock.Clock

	mu            sync.Mutex
	sub           *kvevents.Subscriber
	conns         int
	everConnected bool
	lastEvent     time.Time
	warming       bool
	// down says the worker failed its last health check; backSinceDown
	// that its publisher has told since that it restarted or went on.
	down, backSinceDown bool
	// knownRun counts blocks evicted in a row that the index knew, since
	// the last sign of a block it never saw (see settled).
	knownRun int
	applied  uint64
	dropped  map[string]uint64
	clears   uint64
	// foreignSize is the block size, in tokens, of the last store dropped
	// because it differs from the index's; 0 when none was.
	foreignSize int
	// peerType is the socket type of the last peer on the events endpoint
	// that was no publisher, and peerSeen when it answered.
	peerType string
	peerSeen time.Time
	// replayPeerType and replayPeerSeen are the same for the replay
	// endpoint, whose peer must be a ROUTER.
	replayPeerType string
	replayPeerSeen time.Time
	// refillSince is when the index was last cleared after the stream's
	// first message, and refillWhy why (see cleared).
	refillSince time.Time
	refillWhy   string
	// adopted counts parents placed by adoptParent; adoptTries its
	// searches in the second from adoptSecond.
	adopted     uint64
	adoptSecond time.Time
	adoptTries  int
}

func newEventStream(spec streamSpec, clk clock.Clock) *eventStream {
	return &eventStream{spec: spec, clk: clk, dropped: map[string]uint64{}}
}

func (es *eventStream) setSub(s *kvevents.Subscriber) {
	es.mu.Lock()
	es.sub = s
	es.mu.Unlock()
}

// Why a worker's index was cleared after its stream's first message, as
// StreamState.RefillCause says it.
const (
	// RefillRestart: the publisher restarted: its sequence numbers went
	// back, or its replay socket no longer held the message last heard, or
	// it publishes under a new topic. A reconnection after which the
	// sequence numbers went on clears nothing.
	RefillRestart = "restart"
	// RefillGap: messages were lost that replay did not fill, as across a
	// network failure long enough for the publisher to publish to nobody.
	RefillGap = "gap"
	// RefillReadmit: the worker passed its health check after failing.
	RefillReadmit = "readmitted"
)

// cleared counts a clear of the worker's index because the stream said it
// was stale. One after the stream's first message starts a refill: the
// worker goes on holding what it cached, which the index has to learn
// again, and a blind verdict meanwhile is the refill's (see blindCause).
// The clear at the first message is the join, which warming covers.
func (es *eventStream) cleared(why string) {
	es.clears++
	if !es.lastEvent.IsZero() {
		es.refillSince, es.refillWhy = es.clk.Now(), why
	}
}

// wrongPeer notes that the events endpoint answered as a socket of
// another type than a publisher's, or the replay endpoint as another
// than a ROUTER.
func (es *eventStream) wrongPeer(endpoint, peer string) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if endpoint == es.spec.replay && endpoint != es.spec.events {
		es.replayPeerType, es.replayPeerSeen = peer, es.clk.Now()
		return
	}
	es.peerType, es.peerSeen = peer, es.clk.Now()
}

// startWarming marks the index as missing blocks the worker holds, or not.
func (es *eventStream) startWarming(on bool) {
	es.warming = on
	es.knownRun = 0
}

// count records what one event did.
func (es *eventStream) count(a Applied) {
	es.applied += uint64(a.Blocks)
	if a.Dropped > 0 {
		es.dropped[a.Reason] += uint64(a.Dropped)
	}
	switch {
	case a.Cleared:
		es.warming = false // the worker holds nothing from before
	case a.Reason == OutcomeUnknownBlock || a.Reason == OutcomeUnknownParent:
		es.knownRun = 0 // the worker still holds blocks the index never saw
	default:
		es.knownRun += a.Removed
	}
}

// settled reports whether a warming worker's cache has turned over once:
// it has evicted at least as many blocks as the index now holds for it, in
// a row, all of them known, and no store since has hung off an unknown
// parent. Under LRU that means the blocks it held before kvlens joined are
// gone. It is a rule of thumb: a hot prefix from before that the worker
// keeps using and never extends is not noticed.
func (es *eventStream) settled(held int) bool {
	return es.knownRun > 0 && es.knownRun >= held
}

// StreamState is a worker's KV-event stream as the admin API shows it.
type StreamState struct {
	// Endpoint is the worker's events endpoint.
	Endpoint string `json:"endpoint"`
	// Socket is "connect" when kvlens dials the worker's publisher, "bind"
	// when kvlens listens and the publisher connects.
	Socket string `json:"socket"`
	// State is "connected" while a ZMQ connection to or from the publisher
	// is open (its handshake through), else "connecting" (kvlens dials) or
	// "listening" (kvlens binds): before the first connection, and again
	// once the last one closed.
	State string `json:"state"`
	// Replay is the worker's replay endpoint; empty when it has none.
	Replay string `json:"replay,omitempty"`
	// Parent0 is how a parent block hash of 0 is read: auto, none or hash.
	Parent0 string `json:"parent0"`
	// Warming says the worker holds blocks published before kvlens joined
	// (or lost in a gap) that the index does not know of.
	Warming bool `json:"warming"`
	// LastEventAgeSeconds is the time since the last message, in seconds;
	// -1 before the first.
	LastEventAgeSeconds float64 `json:"last_event_age_seconds"`
	// Messages counts event batches handed to the index, replayed ones
	// included.
	Messages uint64 `json:"messages"`
	// AppliedBlocks counts blocks stored or removed as the events said.
	AppliedBlocks uint64 `json:"applied_blocks"`
	// DroppedBlocks counts blocks not applied, by reason: unknown_parent,
	// unknown_block, invalid, index_full, other_tier, other_group.
	DroppedBlocks map[string]uint64 `json:"dropped_blocks"`
	// DecodeErrors counts messages dropped as malformed.
	DecodeErrors uint64 `json:"decode_errors"`
	// Gaps counts jumps in the sequence numbers that replay did not fill.
	Gaps uint64 `json:"gaps"`
	// Restarts counts publisher restarts: sequence numbers that went back,
	// or a replay socket that no longer held the message last heard.
	// Reconnects counts connections after the first after which the
	// sequence numbers went on (a network failure, not a restart); those
	// that lost events count in Gaps too. A connection is counted in one
	// or the other once the publisher's next message, or its replay
	// socket, tells.
	Restarts   uint64 `json:"restarts"`
	Reconnects uint64 `json:"reconnects"`
	// Replays counts replay requests (gap fills and catch-ups), and
	// Replayed the messages they recovered.
	Replays  uint64 `json:"replays"`
	Replayed uint64 `json:"replayed"`
	// Clears counts the times the worker's index was cleared because the
	// stream said it was stale.
	Clears uint64 `json:"clears"`
	// WrongPeer is the socket type of a peer on the events endpoint that is
	// no publisher (PUB), such as the worker's replay socket (ROUTER) given
	// for its events, within the last minute; empty when there was none.
	WrongPeer string `json:"wrong_peer,omitempty"`
	// WrongReplayPeer is the same for the replay endpoint, whose peer must
	// be a ROUTER (the publisher's PUB port given for replay= reads PUB).
	WrongReplayPeer string `json:"wrong_replay_peer,omitempty"`
	// RefillCause says why the index was last cleared after the stream's
	// first message: restart, gap or readmitted; empty when it
	// never was. RefillAgeSeconds is the time since, in seconds; -1 when
	// it never was.
	RefillCause      string  `json:"refill_cause,omitempty"`
	RefillAgeSeconds float64 `json:"refill_age_seconds"`
	// AdoptedParents counts parents of stores placed from a prompt in
	// flight on the worker: blocks it held before kvlens joined, or that
	// were lost in a gap, which its new stores extend.
	AdoptedParents uint64 `json:"adopted_parents"`
	// ForeignBlockSize is the block size, in tokens, of the worker's last
	// store dropped because the router indexes blocks of another size
	// (--block-size); 0 when there was none.
	ForeignBlockSize int `json:"foreign_block_size,omitempty"`
}

// state returns a snapshot of the stream.
func (es *eventStream) state() *StreamState {
	es.mu.Lock()
	defer es.mu.Unlock()
	st := &StreamState{
		Endpoint: es.spec.events, Socket: "connect", State: "connecting", Replay: es.spec.replay,
		Parent0: es.spec.parent0, Warming: es.warming, LastEventAgeSeconds: -1, RefillAgeSeconds: -1, RefillCause: es.refillWhy,
		AppliedBlocks: es.applied, DroppedBlocks: maps.Clone(es.dropped), Clears: es.clears, AdoptedParents: es.adopted,
		ForeignBlockSize: es.foreignSize,
	}
	if st.Parent0 == "" {
		st.Parent0 = Parent0Auto
	}
	if es.spec.bind {
		st.Socket, st.State = "bind", "listening"
	}
	if es.conns > 0 {
		st.State = "connected"
	}
	if !es.lastEvent.IsZero() {
		st.LastEventAgeSeconds = es.clk.Now().Sub(es.lastEvent).Seconds()
	}
	if !es.refillSince.IsZero() {
		st.RefillAgeSeconds = es.clk.Now().Sub(es.refillSince).Seconds()
	}
	if es.peerType != "" && es.clk.Now().Sub(es.peerSeen) < time.Minute {
		st.WrongPeer = es.peerType
	}
	if es.replayPeerType != "" && es.clk.Now().Sub(es.replayPeerSeen) < time.Minute {
		st.WrongReplayPeer = es.replayPeerType
	}
	if es.sub != nil {
		s := es.sub.Stats()
		st.Messages, st.DecodeErrors, st.Gaps = s.Messages, s.DecodeErrors, s.Gaps
		st.Restarts, st.Reconnects, st.Replays, st.Replayed = s.Resets, s.Reconnects, s.ReplayRequests, s.Replayed
	}
	return st
}

// EventStream returns the worker's KV-event stream state; nil when no Feed
// reads its events.
func (w *Worker) EventStream() *StreamState {
	if es := w.stream.Load(); es != nil {
		return es.state()
	}
	return nil
}
