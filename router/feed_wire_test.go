package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlens/kvlens/internal/testport"
	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/sim"
)

// stream returns worker name's event stream state, or fails.
func stream(t *testing.T, r *Router, name string) *StreamState {
	t.Helper()
	for _, w := range r.Workers() {
		if w.Name == name {
			if w.EventStream == nil {
				t.Fatalf("%s has no event stream", name)
			}
			return w.EventStream
		}
	}
	t.Fatalf("no worker %s", name)
	return nil
}

// Real ZMQ, four simulated workers, each publishing as a different vLLM
// deployment would: w0 binds its PUB socket and kvlens dials it; w1 dials
// a port kvlens binds (events=tcp://*:P); w2 binds, serves a replay socket,
// and was already warm when kvlens joined; w3 was warm too, with no replay.
func TestFeedBindConnectAndReplayCatchUp(t *testing.T) {
	listen := testport.Free(t, 1)
	f, err := sim.StartFleet(sim.FleetConfig{
		Count: 4, EventsBind: "tcp://127.0.0.1:0", EventsReplay: "tcp://127.0.0.1:0",
		EventsFor: func(i int, pc kvevents.PublisherConfig) kvevents.PublisherConfig {
			switch i {
			case 1:
				return kvevents.PublisherConfig{Endpoint: fmt.Sprintf("tcp://127.0.0.1:%d", listen), Connect: true}
			case 2:
				return pc
			}
			pc.ReplayEndpoint = ""
			return pc
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(context.Background()) })
	specs := []string{
		fmt.Sprintf("w0=%s,events=%s", f.URLs[0], f.EventEndpoints[0]),
		fmt.Sprintf("w1=%s,events=tcp://*:%d", f.URLs[1], listen),
		fmt.Sprintf("w2=%s,events=%s,replay=%s", f.URLs[2], f.EventEndpoints[2], f.ReplayEndpoints[2]),
		fmt.Sprintf("w3=%s,events=%s", f.URLs[3], f.EventEndpoints[3]),
	}
	ws, err := ParseWorkers(specs)
	if err != nil {
		t.Fatal(err)
	}
	if !ws[1].EventsBind || ws[0].EventsBind {
		t.Fatalf("w1 should bind and w0 dial: %+v %+v", ws[0].EventsBind, ws[1].EventsBind)
	}
	reg := prometheus.NewRegistry()
	r := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: sim.MustProfile(sim.DefaultProfile).BlockSize, Registerer: reg})

	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	// Both prompts share a long system prompt, so the second one's blocks
	// hang off blocks stored before kvlens joined.
	system := strings.Repeat("You are a careful assistant who explains systems plainly. ", 30)
	before := system + "Before the router joined: explain how paged attention lays out the KV cache in blocks. " + strings.Repeat("Be thorough. ", 20)
	after := system + "After the router joined: explain how prefix caching shares blocks between requests. " + strings.Repeat("Be precise. ", 20)
	// w2 and w3 are warm before kvlens reads a single event.
	chat(t, host(f.URLs[2]), before)
	chat(t, host(f.URLs[3]), before)
	// Sent before kvlens subscribes, or they could arrive live.
	eventually(t, "w2 and w3 published", func() bool {
		return f.Publishers[2].Stats().Published > 0 && f.Publishers[3].Stats().Published > 0
	})

	feed := NewFeed(r, t.Logf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	syncFeed(t, ctx, feed)
	for _, name := range []string{"w0", "w1", "w2", "w3"} {
		eventually(t, name+"'s publisher is connected", func() bool { return stream(t, r, name).State == "connected" })
	}
	if s := stream(t, r, "w1"); s.Socket != "bind" {
		t.Fatalf("w1's socket = %q, want bind", s.Socket)
	}
	// w2 is idle, but its history is caught up as soon as it is connected.
	eventually(t, "w2's blocks from before kvlens joined are indexed", func() bool { return r.Index().Blocks("w2") > 0 })
	if r.Index().Blocks("w3") != 0 {
		t.Fatal("w3 has no replay, yet blocks from before kvlens joined are indexed")
	}
	time.Sleep(300 * time.Millisecond) // a new SUB subscription takes a moment to reach the publisher

	for i := range 4 {
		chat(t, host(f.URLs[i]), after)
	}
	for _, name := range []string{"w0", "w1", "w2"} {
		eventually(t, name+"'s blocks are indexed", func() bool { return r.Index().Blocks(name) > 0 })
	}
	eventually(t, "w3 has heard its first event", func() bool { return stream(t, r, "w3").Messages > 0 })

	w2, w3 := stream(t, r, "w2"), stream(t, r, "w3")
	if w2.Warming || w2.Replayed == 0 || w2.Replays == 0 || w2.DroppedBlocks[OutcomeUnknownParent] != 0 {
		t.Errorf("w2 joined warm with replay: %+v; want its history replayed, not warming, no unknown parent", w2)
	}
	if !w3.Warming {
		t.Errorf("w3 joined warm without replay but is not warming: %+v", w3)
	}
	if b2, b3 := r.Index().Blocks("w2"), r.Index().Blocks("w3"); b2 <= b3 {
		t.Errorf("w2 (caught up) holds %d blocks, w3 (not) %d: want w2 ahead", b2, b3)
	}
	for _, name := range []string{"w0", "w1"} {
		// Not checked: warming, which depends on whether seq 0 beat the
		// subscription (a SUB socket misses what comes before it settles).
		if s := stream(t, r, name); s.AppliedBlocks == 0 || s.LastEventAgeSeconds < 0 {
			t.Errorf("%s: %+v; want blocks applied and a last event", name, s)
		}
	}
	// The same state is on /metrics.
	if n, err := testutil.GatherAndCount(reg, "kvlens_router_kv_event_stream_warming", "kvlens_router_kv_event_stream_connected"); err != nil || n != 8 {
		t.Errorf("stream gauges on /metrics: %d series, %v; want 8", n, err)
	}
}

// A malformed message is counted against its worker as a decode error and
// the stream goes on: the next good message is applied.
func TestFeedCountsDecodeErrorsAndKeepsGoing(t *testing.T) {
	port := testport.Free(t, 1)
	ep := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Listen(ep); err != nil {
		t.Fatal(err)
	}
	ws, _ := ParseWorkers([]string{"w=http://127.0.0.1:1,events=" + ep + ",parent0=none"})
	r := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: 2})
	feed := NewFeed(r, t.Logf)
	syncFeed(t, ctx, feed)
	eventually(t, "connected", func() bool { return stream(t, r, "w").State == "connected" })

	good, err := kvevents.EncodeBatch(kvevents.Batch{Events: []kvevents.Event{
		// parent 0 with parent0=none: a root block.
		&kvevents.BlockStored{BlockHashes: []uint64{9}, HasParent: true, Parent: 0, TokenIDs: []uint32{1, 2}, BlockSize: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	send := func(payload []byte) {
		if err := pub.Send(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	// Until the subscription is through, messages are lost; send good ones
	// until one lands, then a bad one, then a good one.
	eventually(t, "a first message is applied", func() bool {
		send(good)
		return r.Index().Blocks("w") > 0
	})
	send([]byte{0xc1}) // 0xc1 is never used in msgpack
	r.Index().ClearWorker("w")
	send(good)
	eventually(t, "the message after the bad one is applied", func() bool { return r.Index().Blocks("w") > 0 })
	if s := stream(t, r, "w"); s.DecodeErrors != 1 || s.Parent0 != Parent0None {
		t.Fatalf("stream = %+v, want 1 decode error and parent0 none", s)
	}
}

// A worker that passes its health check after failing has its index
// cleared at once, and is warming: it may have restarted, or lost events.
func TestFeedClearsAWorkerReadmittedAfterFailingHealth(t *testing.T) {
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ws, _ := ParseWorkers([]string{"w=" + srv.URL + ",events=tcp://127.0.0.1:1"}) // nothing publishes there
	pool := NewPool(ws)
	r := NewRouter(pool, &RoundRobin{}, Config{BlockSize: testB})
	feed := NewFeed(r, t.Logf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	syncFeed(t, ctx, feed)
	if err := r.Index().Apply("w", stored(0, ids(1, 2), toks(100, 2))); err != nil {
		t.Fatal(err)
	}
	pool.CheckHealth(ctx, srv.Client(), time.Second)
	if r.Index().Blocks("w") != 2 {
		t.Fatal("a healthy worker that stays healthy lost its index")
	}
	healthy = false
	pool.CheckHealth(ctx, srv.Client(), time.Second)
	if r.Index().Blocks("w") != 2 {
		t.Fatal("the index was cleared when the worker failed, before it came back")
	}
	healthy = true
	pool.CheckHealth(ctx, srv.Client(), time.Second)
	if n := r.Index().Blocks("w"); n != 0 {
		t.Fatalf("re-admitted worker still has %d blocks indexed", n)
	}
	if s := stream(t, r, "w"); !s.Warming || s.Clears != 1 {
		t.Fatalf("stream = %+v, want warming after one clear", s)
	}

	// Down again, and the publisher reconnects before the worker passes
	// its health check. Re-admission keeps the index only once the
	// publisher has told what became of it: it went on (the index is
	// the worker's), or it restarted (the index was cleared then, and
	// what it learnt since is the new life's).
	es := ws[0].stream.Load()
	feed.connected("w", es, true) // the first connection
	store := &kvevents.BlockStored{BlockHashes: []uint64{1}, TokenIDs: toks(100, 1), BlockSize: testB}
	for _, tc := range []struct {
		name string
		told *kvevents.Update // what the subscriber handed over after the reconnection, if anything
		want int              // blocks indexed after re-admission
	}{
		{"a reconnection not yet told of clears the index", nil, 0},
		{"a publisher told to have gone on keeps its index", &kvevents.Update{Worker: "w", Reconnected: true, Empty: true}, 2},
		{"a publisher told to have restarted keeps what it said since", &kvevents.Update{Worker: "w", First: true, Reset: true, Whole: true,
			Message: kvevents.Message{Batch: kvevents.Batch{Events: []kvevents.Event{store}}}}, 1},
	} {
		healthy = false
		pool.CheckHealth(ctx, srv.Client(), time.Second)
		if err := r.Index().Apply("w", stored(0, ids(1, 2), toks(100, 2))); err != nil {
			t.Fatal(err)
		}
		feed.connected("w", es, true) // a reconnection
		if tc.told != nil {
			feed.apply(es, *tc.told)
		}
		healthy = true
		pool.CheckHealth(ctx, srv.Client(), time.Second)
		if n := r.Index().Blocks("w"); n != tc.want {
			t.Errorf("%s: re-admitted worker has %d blocks indexed, want %d", tc.name, n, tc.want)
		}
	}
}

// A publisher that restarts (counting from seq 0 again) has its worker's
// index cleared, whichever side binds: with a replay socket the moment it
// is connected again, before it publishes anything, since the replay
// socket says it holds nothing of the old life; without one at its first
// message, until which the index holds what it held. Before, every
// reconnection cleared the index, a network failure too.
func TestFeedClearsAWorkerWhosePublisherRestarts(t *testing.T) {
	for _, tt := range []struct {
		name   string
		bind   bool // kvlens binds and the publisher connects
		replay bool
	}{
		{"kvlens dials the publisher", false, false},
		{"the publisher dials kvlens", true, false},
		{"kvlens dials the publisher, which has a replay socket", false, true},
		{"the publisher dials kvlens, and has a replay socket", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ep := fmt.Sprintf("tcp://127.0.0.1:%d", testport.Free(t, 1))
			spec := "w=http://127.0.0.1:1,events=" + ep
			if tt.bind {
				spec = "w=http://127.0.0.1:1,bind=" + ep
			}
			var replay string
			if tt.replay {
				replay = fmt.Sprintf("tcp://127.0.0.1:%d", testport.Free(t, 1))
				spec += ",replay=" + replay
			}
			ws, err := ParseWorkers(SplitWorkerList(spec))
			if err != nil {
				t.Fatal(err)
			}
			r := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: 2})
			feed := NewFeed(r, t.Logf)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			syncFeed(t, ctx, feed)
			start := func() *kvevents.Publisher {
				p, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: ep, Connect: tt.bind, ReplayEndpoint: replay})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := start()
			old := kvevents.Batch{Events: []kvevents.Event{
				&kvevents.BlockStored{BlockHashes: []uint64{1}, TokenIDs: []uint32{5, 6}, BlockSize: 2},
			}}
			eventually(t, "the first publisher's block is indexed", func() bool {
				p.Publish(old)
				return r.Index().Blocks("w") > 0
			})
			// Let the batches still on their way land before the restart.
			time.Sleep(200 * time.Millisecond)
			p.Close()
			eventually(t, "the stream sees the publisher gone", func() bool { return stream(t, r, "w").State != "connected" })
			p = start()
			defer p.Close()
			eventually(t, "connected again", func() bool { return stream(t, r, "w").State == "connected" })
			if tt.replay {
				eventually(t, "the index is cleared as the replay socket tells of the restart", func() bool { return r.Index().Blocks("w") == 0 })
			} else if n := r.Index().Blocks("w"); n != 1 {
				t.Fatalf("%d blocks indexed before the restarted publisher said anything, want the 1 from before", n)
			}
			// The restarted publisher stores another block: the index holds
			// it alone, cleared of the old life's.
			fresh := kvevents.Batch{Events: []kvevents.Event{
				&kvevents.BlockStored{BlockHashes: []uint64{2}, TokenIDs: []uint32{7, 8}, BlockSize: 2},
			}}
			eventually(t, "the restart is told", func() bool {
				p.Publish(fresh)
				s := stream(t, r, "w")
				return s.RefillCause == RefillRestart && s.Messages > 1 && r.Index().Blocks("w") > 0
			})
			if n := r.Index().Blocks("w"); n != 1 {
				t.Errorf("%d blocks indexed after the restart, want the new publisher's 1", n)
			}
			if s := stream(t, r, "w"); s.Restarts != 1 || s.Reconnects != 0 {
				t.Errorf("stream = %+v, want 1 restart and no reconnection", s)
			}
		})
	}
}

// When a worker's publisher goes away and stays away (the engine was
// killed), its stream must stop saying "connected", on the admin API and on
// /metrics, whichever side dialed: "connecting" when kvlens dials it,
// "listening" when kvlens binds. It said "connected" for as long as the
// publisher stayed away when kvlens dialed.
func TestFeedStreamStopsSayingConnectedWhenThePublisherGoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		bind bool // kvlens binds and the publisher dials
		idle string
	}{
		{"kvlens dials the publisher", false, "connecting"},
		{"the publisher dials kvlens", true, "listening"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := testport.Free(t, 1)
			ep := fmt.Sprintf("tcp://127.0.0.1:%d", port)
			pc, events := kvevents.PublisherConfig{Endpoint: ep}, ep
			if tc.bind {
				pc.Connect, events = true, fmt.Sprintf("tcp://*:%d", port)
			}
			ws, err := ParseWorkers([]string{"w=http://127.0.0.1:1,events=" + events})
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			r := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: 2, Registerer: reg})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			feed := NewFeed(r, t.Logf)
			syncFeed(t, ctx, feed) // a bound subscriber must listen before its publisher dials
			pub, err := kvevents.NewPublisher(pc)
			if err != nil {
				t.Fatal(err)
			}
			connected := func() float64 { return scraped(t, reg, "kvlens_router_kv_event_stream_connected") }
			eventually(t, "connected", func() bool { return stream(t, r, "w").State == "connected" && connected() == 1 })
			pub.Close()
			eventually(t, tc.idle+" once the publisher is gone", func() bool { return stream(t, r, "w").State == tc.idle })
			if got := connected(); got != 0 {
				t.Errorf("kvlens_router_kv_event_stream_connected = %v with the publisher gone, want 0", got)
			}
		})
	}
}

// scraped returns the value of the one series of metric name in reg, as a
// scrape of /metrics would read it.
func scraped(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series %s on /metrics", name)
	return 0
}

// A worker whose publisher restarted has its index cleared, and while the
// index refills, the worker answers with hits it did not predict: the
// blind verdict must name the restart, not the tokens.
func TestFeedBlamesARestartNotTheTokensWhileTheIndexRefills(t *testing.T) {
	ep := fmt.Sprintf("tcp://127.0.0.1:%d", testport.Free(t, 1))
	ws, err := ParseWorkers([]string{"w=http://127.0.0.1:1,events=" + ep + ",parent0=none"})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed := NewFeed(r, t.Logf)
	syncFeed(t, ctx, feed)
	pub, err := kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: ep})
	if err != nil {
		t.Fatal(err)
	}
	// A SUB socket misses what is published before its subscription
	// arrives: publish until a store lands.
	block := kvevents.Batch{Events: []kvevents.Event{&kvevents.BlockStored{BlockHashes: []uint64{9}, TokenIDs: []uint32{1, 2}, BlockSize: 2}}}
	eventually(t, "a first store is indexed", func() bool {
		pub.Publish(block)
		return r.Index().Blocks("w") > 0
	})
	pub.Close()
	eventually(t, "connecting once the publisher is gone", func() bool { return stream(t, r, "w").State == "connecting" })
	pub, err = kvevents.NewPublisher(kvevents.PublisherConfig{Endpoint: ep})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	eventually(t, "connected again", func() bool { return stream(t, r, "w").State == "connected" })
	// The restarted publisher counts from 0 again, and stores another block.
	other := kvevents.Batch{Events: []kvevents.Event{&kvevents.BlockStored{BlockHashes: []uint64{10}, TokenIDs: []uint32{3, 4}, BlockSize: 2}}}
	eventually(t, "the restart is told", func() bool {
		pub.Publish(other)
		return stream(t, r, "w").RefillCause != ""
	})

	st := stream(t, r, "w")
	if st.Restarts != 1 || st.Reconnects != 0 || st.RefillCause != RefillRestart || st.RefillAgeSeconds < 0 || r.Index().Blocks("w") != 1 {
		t.Fatalf("stream %+v with %d blocks indexed; want 1 restart, the index cleared for it and holding the new block alone", st, r.Index().Blocks("w"))
	}
	for range blindMinRequests {
		r.ObserveCache(&Booking{Worker: ws[0], isl: 2000}, 1000)
	}
	if b := r.Blind(); len(b) != 1 || b[0].Cause != CauseRefilling || !strings.Contains(b[0].Reason, "restarted") {
		t.Fatalf("Blind() = %+v; want w blind by %s, naming the restart", b, CauseRefilling)
	}
}

// What the subscriber tells after a worker's publisher reconnected decides
// whether its index stands: a publisher whose sequence numbers went on (a
// network failure) keeps it, and is no refill for the blind verdict to
// blame; one that lost events meanwhile, or restarted, is cleared. Before,
// every reconnection cleared the index, and a booth's flaky network left
// the router blind for a minute at each blip.
func TestFeedKeepsTheIndexAcrossANetworkFailure(t *testing.T) {
	// batch stores block id, child of parent (0: none).
	batch := func(id, parent int) kvevents.Batch {
		return kvevents.Batch{Events: []kvevents.Event{stored(uint64(parent), ids(id, 1), toks(100*id, 1))}}
	}
	for _, tc := range []struct {
		name       string
		after      kvevents.Update // the first update after the reconnection
		wantBlocks int
		wantCause  string
	}{
		{"a publisher that went on keeps its index", kvevents.Update{Reconnected: true, Message: kvevents.Message{Seq: 1, Batch: batch(3, 2)}}, 3, ""},
		{"a publisher that went on with nothing new keeps its index", kvevents.Update{Reconnected: true, Empty: true, Message: kvevents.Message{Seq: 1}}, 2, ""},
		{"a publisher that went on but lost events is cleared for the gap", kvevents.Update{Reconnected: true, Missed: 3, Message: kvevents.Message{Seq: 4, Batch: batch(9, 0)}}, 1, RefillGap},
		{"a publisher that restarted is cleared for the restart", kvevents.Update{First: true, Reset: true, Whole: true, Message: kvevents.Message{Batch: batch(9, 0)}}, 1, RefillRestart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := ParseWorkers([]string{"w=http://127.0.0.1:1,events=tcp://127.0.0.1:1"}) // nothing publishes there
			r := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB})
			feed := NewFeed(r, t.Logf)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			syncFeed(t, ctx, feed)
			es := ws[0].stream.Load()
			feed.connected("w", es, true)
			feed.apply(es, kvevents.Update{Worker: "w", First: true, Whole: true, Message: kvevents.Message{Batch: kvevents.Batch{Events: []kvevents.Event{
				stored(0, ids(1, 2), toks(100, 2)),
			}}}})
			feed.connected("w", es, false)
			feed.connected("w", es, true)
			if n := r.Index().Blocks("w"); n != 2 {
				t.Fatalf("%d blocks indexed after the reconnection, before the publisher told anything; want the 2 from before", n)
			}
			tc.after.Worker = "w"
			feed.apply(es, tc.after)
			st := stream(t, r, "w")
			if n := r.Index().Blocks("w"); n != tc.wantBlocks || st.RefillCause != tc.wantCause {
				t.Errorf("%d blocks indexed, refill cause %q; want %d, %q", n, st.RefillCause, tc.wantBlocks, tc.wantCause)
			}
		})
	}
}

// syncFeed starts feed's subscriptions under ctx and closes them when the
// test ends.
func syncFeed(t *testing.T, ctx context.Context, feed *Feed) {
	t.Helper()
	feed.Sync(ctx)
	t.Cleanup(func() {
		for _, s := range feed.subs {
			s.close()
		}
	})
}
