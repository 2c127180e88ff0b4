package kvevents

import (
	"encoding/binary"
	"io"
	"log/slog"
	"testing"

	"github.com/go-zeromq/zmq4"
)

// FuzzReceive plays any run of live messages (topics, sequence numbers
// forward, repeated, skipped or gone back, payloads valid, malformed or
// empty) and reconnections through the subscriber's live path, as publishers
// and a network would deliver them, and holds what it hands the index to the
// rules the index relies on:
//   - every message is handed over once or counted as a decode error;
//   - an update that is not First continues its topic's last one: Missed is
//     zero exactly when its seq follows the last handed over, and it never
//     goes back;
//   - Reset comes only with First, and after a First that failed to decode
//     the topic's next update is First;
//   - the first update after a reconnection is First, or Reconnected,
//     which continues its topic (so that the index stands), and Reconnected
//     comes after a reconnection only, never with First.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 3, 0, 0, 4, 1, 1, 3, 0, 0, 2, 0})          // in order, a gap, a repeat
	f.Add([]byte{0, 10, 0, 0, 0, 0, 3, 0, 3, 0, 0})                     // back in seq: a restart; a reconnection
	f.Add([]byte{1, 2, 1, 5, 0xff, 0x00, 0x91, 0x01, 0x02, 1, 3, 0})    // garbage, then a message after it
	f.Add([]byte{2, 2, 2, 2, 3, 0, 2, 1, 0, 0, 5, 0, 1, 3, 0, 2, 3, 0}) // the empty topic, others interleaved
	valid, err := EncodeBatch(Batch{TS: 1, Events: []Event{&BlockStored{BlockHashes: []uint64{1, 2}, BlockSize: 16, TokenIDs: make([]uint32, 32)}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		type last struct {
			seq  uint64 // of the last update handed over
			must bool   // the next update must be First
		}
		topics := []string{"w0", "w1", ""}
		lasts := map[string]*last{}
		for _, tp := range topics {
			lasts[tp] = &last{must: true}
		}
		var got []Update
		reconnected := false // a reconnection no update has told of yet
		s := &Subscriber{handle: func(u Update) { got = append(got, u) }, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		s.quiet = newQuiet(nil, s.log)
		es := &endpointState{streams: map[string]*stream{}}
		ep := Endpoint{Addr: "tcp://127.0.0.1:5557"}
		seqs := map[string]uint64{}
		sent := 0
		for len(ops) >= 2 {
			op, arg := ops[0]%4, ops[1]
			ops = ops[2:]
			if op == 3 { // the connection drops and comes back
				es.reconnected.Store(true)
				reconnected = true
				continue
			}
			tp := topics[op]
			seq := max(int64(seqs[tp])+int64(arg%8)-2, 0) // back 2 to ahead 5
			seqs[tp] = uint64(seq)
			var payload []byte
			switch arg / 8 % 3 {
			case 0:
				payload = valid
			case 1:
				n := min(len(ops), int(arg%16))
				payload, ops = ops[:n], ops[n:]
			}
			frame := make([]byte, 8)
			binary.BigEndian.PutUint64(frame, uint64(seq))
			before := len(got)
			errs := s.decodeErrors.Load()
			s.receive(ep, es, zmq4.NewMsgFrom([]byte(tp), frame, payload))
			sent++
			delivered := len(got) - before
			failed := s.decodeErrors.Load() - errs
			if delivered+int(failed) != 1 {
				t.Fatalf("message %d (topic %q, seq %d): %d updates and %d decode errors, want one of them", sent, tp, seq, delivered, failed)
			}
			l := lasts[tp]
			if failed == 1 {
				continue // a First that failed leaves l.must set
			}
			u := got[len(got)-1]
			switch {
			case u.Seq != uint64(seq) || u.Topic != tp:
				t.Fatalf("message (topic %q, seq %d) handed over as (%q, %d)", tp, seq, u.Topic, u.Seq)
			case u.Reset && !u.First:
				t.Fatalf("seq %d: Reset without First", seq)
			case l.must && !u.First:
				t.Fatalf("seq %d on %q: not First on a stream begun anew", seq, tp)
			case u.Reconnected && (!reconnected || u.First):
				t.Fatalf("seq %d on %q: Reconnected (First %v) with no reconnection untold", seq, tp, u.First)
			case reconnected && !u.First && !u.Reconnected:
				t.Fatalf("seq %d on %q: the first update after a reconnection is neither First nor Reconnected", seq, tp)
			case !u.First && u.Seq <= l.seq:
				t.Fatalf("seq %d on %q handed over after %d without First", seq, tp, l.seq)
			case !u.First && (u.Missed == 0) != (u.Seq == l.seq+1):
				t.Fatalf("seq %d on %q after %d: Missed %d", seq, tp, l.seq, u.Missed)
			}
			*l = last{seq: u.Seq}
			reconnected = false
		}
		if st := s.Stats(); st.Messages+st.DecodeErrors != uint64(sent) {
			t.Fatalf("stats: %d messages + %d decode errors, %d sent", st.Messages, st.DecodeErrors, sent)
		}
	})
}

// TestAGapBeforeAMalformedMessageReachesTheIndex: messages lost just before
// one that fails to decode were counted, but no update carried them, so the
// index was told of the failed message alone, or, if the publisher sent that
// seq again, of nothing.
func TestAGapBeforeAMalformedMessageReachesTheIndex(t *testing.T) {
	valid, err := EncodeBatch(Batch{TS: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte{0x93, 0xcb, 0x00}
	type msg struct {
		seq     uint64
		payload []byte
	}
	tests := []struct {
		name       string
		msgs       []msg
		wantMissed uint64 // on the last update
		wantGaps   uint64
	}{
		{"a malformed message alone is one missed", []msg{{0, valid}, {1, bad}, {2, valid}}, 1, 1},
		{"a gap and the malformed message after it are missed together, one gap", []msg{{0, valid}, {3, bad}, {4, valid}}, 3, 1},
		{"a seq sent again after failing still carries the gap", []msg{{0, valid}, {3, bad}, {3, valid}}, 2, 1},
		{"a gap after a malformed message adds to it", []msg{{0, valid}, {1, bad}, {5, valid}}, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var last Update
			s := &Subscriber{handle: func(u Update) { last = u }, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			s.quiet = newQuiet(nil, s.log)
			es := &endpointState{streams: map[string]*stream{}}
			for _, m := range tt.msgs {
				s.receive(Endpoint{Worker: "w0", Addr: "tcp://127.0.0.1:5557"}, es,
					zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, m.seq), m.payload))
			}
			st := s.Stats()
			if last.Missed != tt.wantMissed || st.MissedMessages != tt.wantMissed || st.Gaps != tt.wantGaps {
				t.Errorf("last update Missed %d, stats %d missed in %d gaps; want %d in %d", last.Missed, st.MissedMessages, st.Gaps, tt.wantMissed, tt.wantGaps)
			}
		})
	}
}
