package router

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/kvevents"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAWarmWorkersNewStoresAreNotDropped: worker a held a shared prefix
// (a system prompt, 5 blocks) before kvlens joined, and keeps it, since
// every conversation uses it. A request routed to it adds 2 blocks of its
// own, which a stores as children of the prefix's last block, an engine id
// the index never saw. The feed places that parent from the request in
// flight, so the stores apply and the index matches the whole prompt on a,
// and an eviction that names the parent applies too.
func TestAWarmWorkersNewStoresAreNotDropped(t *testing.T) {
	shared, own := toks(1, 5), toks(50, 2)
	prompt := append(append([]uint32{}, shared...), own...)
	tests := []struct {
		name        string
		booked      []uint32 // the prompt in flight on a; nil for none
		wantOverlap int
		wantAdopted uint64
	}{
		{"a prompt in flight shows the parent, and the store applies", prompt, 7, 1},
		{"with nothing in flight the store stays dropped", nil, 0, 0},
		{"a prompt in flight that does not hold the store's block shows nothing", append(append([]uint32{}, shared...), toks(80, 2)...), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, f, es, _ := joined(false)
			if tt.booked != nil {
				if _, err := rt.Decide(&Request{TokenIDs: tt.booked}, nil); err != nil {
					t.Fatal(err)
				}
			}
			const parent = 0xbeef // the engine's id of the shared prefix's last block
			store := stored(parent, ids(900, 2), own)
			f.apply(es, kvevents.Update{Worker: "a", Message: kvevents.Message{Seq: 8, Batch: kvevents.Batch{Events: []kvevents.Event{store}}}})

			st := es.state()
			if got := rt.Index().Overlap(blockhash.Chain(prompt, testB))["a"]; got != tt.wantOverlap || st.AdoptedParents != tt.wantAdopted {
				t.Fatalf("a matches %d blocks of the prompt with %d parents adopted; want %d and %d (stream %+v)", got, st.AdoptedParents, tt.wantOverlap, tt.wantAdopted, st)
			}
			if tt.wantAdopted == 0 {
				if st.DroppedBlocks[OutcomeUnknownParent] != 2 {
					t.Fatalf("dropped %v, want the store's 2 blocks as unknown parent", st.DroppedBlocks)
				}
				return
			}
			if st.AppliedBlocks != 2 || len(st.DroppedBlocks) != 0 || !st.Warming {
				t.Fatalf("stream %+v: want 2 blocks applied, none dropped, still warming (a holds blocks from before)", st)
			}
			// The engine evicts the parent's own block: the index follows,
			// and a's match now ends before it.
			evict := &kvevents.BlockRemoved{BlockHashes: []uint64{parent}}
			f.apply(es, kvevents.Update{Worker: "a", Message: kvevents.Message{Seq: 9, Batch: kvevents.Batch{Events: []kvevents.Event{evict}}}})
			if got := rt.Index().Overlap(blockhash.Chain(prompt, testB))["a"]; got != 4 {
				t.Fatalf("after the parent's eviction a matches %d blocks, want the 4 before it", got)
			}
			// A clear takes the inferred blocks with the rest.
			rt.Index().ClearWorker("a")
			if got, pairs := rt.Index().Overlap(blockhash.Chain(prompt, testB))["a"], rt.Index().Blocks("a"); got != 0 || pairs != 0 {
				t.Fatalf("after a clear a matches %d blocks and the index holds %d pairs, want none", got, pairs)
			}
		})
	}
}

// TestBlindCauseTellsAWarmWorkerFromAParentMixUp: stores dropped for an
// unknown parent on a worker that joined warm (seq 7, its history not
// replayed) name the warm cache and its remedies; the same drops on a
// worker whose whole history the index saw (seq 0) point at parent0=.
func TestBlindCauseTellsAWarmWorkerFromAParentMixUp(t *testing.T) {
	tests := []struct {
		name   string
		whole  bool
		want   string
		remedy string
	}{
		{"a worker warm before kvlens joined", false, CauseWarm, "give its replay= socket, or reset its cache"},
		{"a worker whose every event the index saw", true, CauseUnknownParent, "check its parent0 setting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, f, es, ws := joined(tt.whole)
			f.apply(es, kvevents.Update{Worker: "a", Message: kvevents.Message{Seq: 8, Batch: kvevents.Batch{Events: []kvevents.Event{stored(0xbeef, ids(900, 2), toks(50, 2))}}}})
			b := rt.blindCause(ws[0])
			if b.Cause != tt.want || !strings.Contains(b.Reason, tt.remedy) {
				t.Fatalf("cause %s, %q; want %s naming %q", b.Cause, b.Reason, tt.want, tt.remedy)
			}
		})
	}
}

// joined is a router over one worker, a, whose KV events a feed follows by
// hand: a's publisher has connected and its first message has come, seq 0
// with its whole history when whole is set, else seq 7 (a was warm before
// kvlens joined). The stream has no events endpoint and no subscriber to
// count its messages, so a blindness verdict is never "no events".
func joined(whole bool) (*Router, *Feed, *eventStream, []*Worker) {
	ws := fleet(1)
	rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB})
	f := NewFeed(rt, func(string, ...any) {})
	es := newEventStream(streamSpec{}, des.New(time.Time{}))
	ws[0].stream.Store(es)
	f.connected("a", es, true)
	seq := uint64(7)
	if whole {
		seq = 0
	}
	f.apply(es, kvevents.Update{Worker: "a", First: true, Whole: whole, Message: kvevents.Message{Seq: seq}})
	return rt, f, es, ws
}

// BenchmarkInferParentMiss is adoptParent's worst search: 64 prompts of 150
// blocks in flight on the worker, none holding the store's block, so every
// block of every prompt is hashed (docs/routing.md quotes it).
func BenchmarkInferParentMiss(b *testing.B) {
	ws := fleet(1)
	rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB})
	for i := range 64 {
		if _, err := rt.Decide(&Request{TokenIDs: toks(1000*i, 150)}, nil); err != nil {
			b.Fatal(err)
		}
	}
	first := toks(999_999, 1)
	for b.Loop() {
		if rt.InferParent("a", first) != nil {
			b.Fatal("found a parent no prompt holds")
		}
	}
}

// TestBlindCauseTellsAStreamThatStopped: a worker whose KV events stopped
// 40 s ago while it went on answering is blind by its stream, and the
// reason says for how long; after 20 s of quiet the stream is not blamed
// for stopping.
func TestBlindCauseTellsAStreamThatStopped(t *testing.T) {
	tests := []struct {
		name    string
		quiet   time.Duration
		stopped bool
	}{
		{"40 s without events while it answers", 40 * time.Second, true},
		{"20 s without events is within a pause", 20 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fleet(1)
			ws[0].Events = "tcp://a:5557"
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB})
			f := NewFeed(rt, func(string, ...any) {})
			loop := des.New(time.Time{})
			es := newEventStream(streamSpec{events: ws[0].Events}, loop)
			ws[0].stream.Store(es)
			f.connected("a", es, true)
			f.apply(es, kvevents.Update{Worker: "a", First: true, Whole: true, Message: kvevents.Message{Seq: 0, Batch: kvevents.Batch{Events: []kvevents.Event{stored(0, ids(1, 2), toks(1, 2))}}}})
			loop.Run(tt.quiet)
			b := rt.blindCause(ws[0])
			says := fmt.Sprintf("no KV events from a for %.0f s while it answers", tt.quiet.Seconds())
			if got := b.Cause == CauseNoEvents && strings.Contains(b.Reason, says); got != tt.stopped {
				t.Fatalf("cause %s, %q; want the stream blamed for stopping: %v", b.Cause, b.Reason, tt.stopped)
			}
		})
	}
}

// TestBlindCauseNamesAPortThatIsNoPublisher: the worker's events endpoint
// answered as its replay socket (a ROUTER); the verdict names the socket
// and which port to give, for a minute after the last such answer.
func TestBlindCauseNamesAPortThatIsNoPublisher(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration
		want  string
	}{
		{"just after the replay socket answered", time.Second, "tcp://a:5558 is a ROUTER socket, not a publisher (PUB): is it the worker's replay endpoint?"},
		{"a minute after, the stream's own state", 61 * time.Second, "no KV events from a (connecting tcp://a:5558)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fleet(1)
			ws[0].Events = "tcp://a:5558"
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB})
			loop := des.New(time.Time{})
			es := newEventStream(streamSpec{events: ws[0].Events}, loop)
			ws[0].stream.Store(es)
			es.wrongPeer(ws[0].Events, "ROUTER")
			loop.Run(tt.after)
			want := CauseWrongSocket
			if tt.after > time.Minute {
				want = CauseNoEvents
			}
			if b := rt.blindCause(ws[0]); b.Cause != want || !strings.Contains(b.Reason, tt.want) {
				t.Fatalf("cause %s, %q; want %s naming %q", b.Cause, b.Reason, want, tt.want)
			}
		})
	}
}

// FuzzAdoptKeepsTheIndexConsistent plays stores and removals a publisher
// chose, parents known or not, against prompts in flight whose blocks they
// may follow: whatever was adopted or inferred, clearing the worker leaves
// the index holding nothing, so no (worker, block) pair is counted twice or
// left behind.
func FuzzAdoptKeepsTheIndexConsistent(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7}, []byte{0x10, 3, 4, 0x21, 3, 0x10, 5, 6})
	f.Add([]byte{9, 9, 9}, []byte{0x11, 0, 9, 0x20, 0, 0x10, 9, 9})
	f.Fuzz(func(t *testing.T, prompt, ops []byte) {
		if len(prompt) > 64 || len(ops) > 256 {
			return
		}
		rt, feed, es, _ := joined(false)
		var tokens []uint32
		for _, b := range prompt {
			tokens = append(tokens, toks(int(b), 1)...)
		}
		if len(tokens) > 0 {
			if _, err := rt.Decide(&Request{TokenIDs: tokens}, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Each op is a kind byte and two arguments: 0x1? stores a block of
		// token value a as a child of engine id b (0x11: no parent), 0x2?
		// removes engine id a.
		var seq uint64 = 8
		for i := 0; i+2 < len(ops); i += 3 {
			var ev kvevents.Event
			a, b := ops[i+1], ops[i+2]
			switch ops[i] >> 4 {
			case 1:
				st := stored(uint64(b), []uint64{uint64(a) + 1000*uint64(i+1)}, toks(int(a), 1))
				st.HasParent = ops[i]&1 == 0 && b != 0
				ev = st
			case 2:
				ev = &kvevents.BlockRemoved{BlockHashes: []uint64{uint64(a)}}
			default:
				continue
			}
			feed.apply(es, kvevents.Update{Worker: "a", Message: kvevents.Message{Seq: seq, Batch: kvevents.Batch{Events: []kvevents.Event{ev}}}})
			seq++
		}
		rt.Index().ClearWorker("a")
		if pairs, distinct := rt.Index().Size(); pairs != 0 || distinct != 0 || rt.Index().Blocks("a") != 0 {
			t.Fatalf("after a clear the index holds %d pairs of %d blocks (%d for a), want none", pairs, distinct, rt.Index().Blocks("a"))
		}
	})
}

// TestBlindCauseNamesARefillAfterTheStreamBrokeOff: when a worker's index
// is cleared because its stream broke off (the publisher restarted, events
// were lost, or the worker came back from failed health checks), it is
// empty while the worker still holds what it cached, and a blind verdict
// while it refills must name that break, not the tokenizer. A minute on,
// with no break since the stream began, or after a reconnection whose
// sequence numbers went on (the index stands), the tokens are blamed.
func TestBlindCauseNamesARefillAfterTheStreamBrokeOff(t *testing.T) {
	tests := []struct {
		name  string
		brk   func(f *Feed, es *eventStream, w *Worker)
		after time.Duration // from the break to the verdict
		want  string
		says  string
	}{
		{"a publisher that reconnected 10 s ago and went on, which kept the index", func(f *Feed, es *eventStream, w *Worker) {
			f.connected("a", es, false)
			f.connected("a", es, true)
			f.apply(es, kvevents.Update{Worker: "a", Reconnected: true, Message: kvevents.Message{Seq: 1}})
		}, 10 * time.Second, CauseTokenizer, "tokenizer mismatch"},
		{"a publisher that restarted (seq back to 0) 10 s ago", func(f *Feed, es *eventStream, w *Worker) {
			f.apply(es, kvevents.Update{Worker: "a", First: true, Reset: true, Whole: true, Message: kvevents.Message{Seq: 0}})
		}, 10 * time.Second, CauseRefilling, "its publisher restarted"},
		{"events lost in a gap 10 s ago", func(f *Feed, es *eventStream, w *Worker) {
			f.apply(es, kvevents.Update{Worker: "a", Missed: 3, Message: kvevents.Message{Seq: 9}})
		}, 10 * time.Second, CauseRefilling, "events were lost"},
		{"a worker back from failed health checks 10 s ago", func(f *Feed, es *eventStream, w *Worker) {
			f.healthChanged(w, false)
			f.healthChanged(w, true)
		}, 10 * time.Second, CauseRefilling, "health check"},
		{"a publisher that restarted over a minute ago", func(f *Feed, es *eventStream, w *Worker) {
			f.apply(es, kvevents.Update{Worker: "a", First: true, Reset: true, Whole: true, Message: kvevents.Message{Seq: 0}})
		}, refillGrace + time.Second, CauseTokenizer, "tokenizer mismatch"},
		{"a stream that never broke off", func(*Feed, *eventStream, *Worker) {}, 10 * time.Second, CauseTokenizer, "tokenizer mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fleet(1)
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB})
			f := NewFeed(rt, func(string, ...any) {})
			loop := des.New(time.Time{})
			es := newEventStream(streamSpec{}, loop)
			ws[0].stream.Store(es)
			f.connected("a", es, true)
			f.apply(es, kvevents.Update{Worker: "a", First: true, Whole: true, Message: kvevents.Message{Seq: 0, Batch: kvevents.Batch{Events: []kvevents.Event{stored(0, ids(1, 2), toks(1, 2))}}}})
			loop.Run(time.Minute)
			tt.brk(f, es, ws[0])
			loop.Run(tt.after)
			// The worker answers with hits the emptied index did not predict.
			for range blindMinRequests {
				rt.ObserveCache(&Booking{Worker: ws[0], isl: 2000}, 1000)
			}
			got := rt.Blind()
			if len(got) != 1 || got[0].Cause != tt.want || !strings.Contains(got[0].Reason, tt.says) {
				t.Fatalf("Blind() = %+v; want a blind by %s, the reason naming %q", got, tt.want, tt.says)
			}
		})
	}
}

// TestAnAnswerThatCachedLessDropsTheInferredBlocks: the blocks adoption
// inferred on a have no engine id, so no eviction can name them; an answer
// whose cached_tokens stop short of them is the word that they went. Only
// inferred blocks past what the answer cached, less one block for the
// engine's cap on a whole prompt, are dropped; blocks with an engine id
// wait for their events.
func TestAnAnswerThatCachedLessDropsTheInferredBlocks(t *testing.T) {
	shared, own := toks(1, 5), toks(50, 2)
	prompt := append(append([]uint32{}, shared...), own...)
	tests := []struct {
		name        string
		cachedBlks  int // what the answer reports cached, in blocks
		wantOverlap int // a's match of the prompt afterwards
		wantDropped float64
	}{
		{"an answer that cached the whole match drops nothing", 7, 7, 0},
		{"an answer one block short may be the engine's cap, and drops nothing", 6, 7, 0},
		{"an answer that cached 2 blocks drops the inferred block past the next", 2, 3, 1},
		{"an answer that cached nothing drops every inferred block but the first", 0, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, f, es, ws := joined(false)
			if _, err := rt.Decide(&Request{TokenIDs: prompt}, nil); err != nil {
				t.Fatal(err)
			}
			// a stores its own 2 blocks as children of the shared prefix's
			// last: positions 0-3 are inferred, 4 gets the engine id.
			f.apply(es, kvevents.Update{Worker: "a", Message: kvevents.Message{Seq: 8, Batch: kvevents.Batch{Events: []kvevents.Event{stored(0xbeef, ids(900, 2), own)}}}})
			b, err := rt.Decide(&Request{TokenIDs: prompt}, nil)
			if err != nil || b.Overlap != 7 {
				t.Fatalf("the next request matched %d blocks (%v), want 7", b.Overlap, err)
			}
			rt.ObserveCache(b, tt.cachedBlks*testB)
			got := rt.Index().Overlap(blockhash.Chain(prompt, testB))["a"]
			dropped := testutil.ToFloat64(rt.metrics.InferredDropped.WithLabelValues(ws[0].Name))
			if got != tt.wantOverlap || dropped != tt.wantDropped {
				t.Fatalf("a matches %d blocks with %v inferred dropped; want %d and %v", got, dropped, tt.wantOverlap, tt.wantDropped)
			}
		})
	}
}

// TestBlindCauseNamesABlockSizeMismatch: a worker whose stores carry
// blocks of another size than the router's (vLLM's default of 16 tokens
// under the router's 32) has every store dropped, and the verdict names
// both sizes and the flag that mends it rather than blaming the tokens.
func TestBlindCauseNamesABlockSizeMismatch(t *testing.T) {
	tests := []struct {
		name      string
		blockSize int // of the worker's stores; the router's is testB
		want      string
	}{
		{"blocks of 16 tokens under an index of 4", 16, CauseBlockSize},
		{"blocks of the index's size are not blamed", testB, CauseTokenizer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, f, es, ws := joined(true)
			for i := range 3 {
				ev := stored(0, ids(900+10*i, 2), toks(50+100*i, 2*tt.blockSize/testB))
				ev.BlockSize = tt.blockSize
				f.apply(es, kvevents.Update{Worker: "a", Message: kvevents.Message{Seq: uint64(1 + i), Batch: kvevents.Batch{Events: []kvevents.Event{ev}}}})
			}
			b := rt.blindCause(ws[0])
			if b.Cause != tt.want {
				t.Fatalf("cause %s (%q), want %s", b.Cause, b.Reason, tt.want)
			}
			if tt.want != CauseBlockSize {
				return
			}
			if st := ws[0].EventStream(); st.ForeignBlockSize != 16 || st.DroppedBlocks[OutcomeInvalid] != 6 {
				t.Errorf("stream state says blocks of %d, %d dropped invalid; want 16 and 6", st.ForeignBlockSize, st.DroppedBlocks[OutcomeInvalid])
			}
			if !strings.Contains(b.Reason, "blocks of 16 tokens and the router indexes blocks of 4") || !strings.Contains(b.Reason, "--block-size 16") {
				t.Errorf("reason %q does not name both sizes and the flag", b.Reason)
			}
			want := "KV events from a carry blocks of 16 tokens and the router indexes blocks of 4, so none applies (run kvlens with --block-size 16)"
			if got := BlindSummary([]Blindness{b}); got != want {
				t.Errorf("summary %q, want %q", got, want)
			}
		})
	}
}
