package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/internal/lograte"
)

// quietLog is a logger writing to a buffer, with its lograte limiter on a
// clock the test moves.
func quietLog() (*slog.Logger, *lograte.Limiter, *des.Loop, *bytes.Buffer) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	loop := des.New(time.Time{})
	return log, newQuiet(loop, log), loop, &buf
}

// lines counts the lines of buf that contain s.
func lines(buf *bytes.Buffer, s string) int {
	n := 0
	for l := range strings.Lines(buf.String()) {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestAPeerCannotFloodTheLog sends 50 messages of each kind a publisher
// can send again and again: the log gets 5 lines of the kind and, 10 s
// later, one that says how many more there were, while the stats count
// all 50.
func TestAPeerCannotFloodTheLog(t *testing.T) {
	valid, err := EncodeBatch(Batch{TS: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	tests := []struct {
		name    string
		seq     func(i uint64) uint64 // the i-th message's seq
		payload []byte
		line    string // the per-message line
		summary string
		counted func(SubscriberStats) uint64
	}{
		{"malformed payloads past the first few are summed up every 10 s", func(i uint64) uint64 { return i }, []byte{0x93, 0xcb, 0x00},
			"kvevents: malformed message", "malformed KV-event messages from tcp://*:5557: 45 more not logged in the last 10s",
			func(s SubscriberStats) uint64 { return s.DecodeErrors }},
		// Each message skips one seq: a gap every message after the first.
		{"gaps past the first few are summed up every 10 s", func(i uint64) uint64 { return 2 * i }, valid,
			"kvevents: events lost", "KV-event gaps from tcp://*:5557: 44 more not logged in the last 10s",
			func(s SubscriberStats) uint64 { return s.Gaps + 1 }},
		// 100, 99, 98, ...: a restart every message after the first.
		{"restarts past the first few are summed up every 10 s", func(i uint64) uint64 { return 100 - i }, valid,
			"kvevents: publisher restarted", "KV-event publisher restarts from tcp://*:5557: 44 more not logged in the last 10s",
			func(s SubscriberStats) uint64 { return s.Resets + 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, limit, loop, buf := quietLog()
			s := &Subscriber{handle: func(Update) {}, log: log, quiet: limit}
			es := &endpointState{streams: map[string]*stream{}}
			ep := Endpoint{Worker: "w0", Addr: "tcp://*:5557"}
			for i := range uint64(n) {
				s.receive(ep, es, zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, tt.seq(i)), tt.payload))
			}
			if got := tt.counted(s.Stats()); got != n {
				t.Fatalf("stats count %d, want %d", got, n)
			}
			if got := lines(buf, tt.line); got != lograte.Burst {
				t.Fatalf("%d lines %q, want %d:\n%s", got, tt.line, lograte.Burst, buf)
			}
			loop.Run(lograte.Every)
			if got := lines(buf, tt.summary); got != 1 {
				t.Fatalf("%d summaries %q, want 1:\n%s", got, tt.summary, buf)
			}
		})
	}
}

func TestAPeerCannotFloodThePublishersLog(t *testing.T) {
	t.Run("malformed replay requests", func(t *testing.T) {
		log, limit, loop, buf := quietLog()
		p := &Publisher{cfg: PublisherConfig{ReplayEndpoint: "tcp://*:5558"}, log: log, quiet: limit}
		for range 50 {
			p.answer(zmq4.NewMsgFrom([]byte("id"), []byte("not a seq")))
		}
		if got := p.Stats().BadReplayRequests; got != 50 {
			t.Fatalf("BadReplayRequests = %d, want 50", got)
		}
		if got := lines(buf, "kvevents: malformed replay request"); got != lograte.Burst {
			t.Fatalf("%d lines, want %d:\n%s", got, lograte.Burst, buf)
		}
		loop.Run(lograte.Every)
		if got := lines(buf, "malformed KV-event replay requests from tcp://*:5558: 45 more not logged in the last 10s"); got != 1 {
			t.Fatalf("%d summaries, want 1:\n%s", got, buf)
		}
	})
	t.Run("failed ZMTP handshakes, as go-zeromq logs them", func(t *testing.T) {
		log, limit, loop, buf := quietLog()
		zl := zmqLog(log, limit, "tcp://*:5557")
		for range 50 {
			zl.Printf("could not open a ZMTP connection with %q: %+v", "kvevents-tcp://*:5557", "could not read ZMTP greeting: EOF")
		}
		if got := lines(buf, "kvevents: a peer failed the ZMTP handshake"); got != lograte.Burst {
			t.Fatalf("%d lines, want %d:\n%s", got, lograte.Burst, buf)
		}
		loop.Run(lograte.Every)
		if got := lines(buf, "failed ZMTP handshakes from tcp://*:5557: 45 more not logged in the last 10s"); got != 1 {
			t.Fatalf("%d summaries, want 1:\n%s", got, buf)
		}
	})
}

// syncBuffer is a buffer a logger may write to from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGoZeromqLinesGoToTheLogger: a peer that fails the handshake of a
// bound socket made go-zeromq write a line to stderr, past the subscriber's
// Logger and any limit; now the line reaches the Logger, limited.
func TestGoZeromqLinesGoToTheLogger(t *testing.T) {
	var buf syncBuffer
	addr := freeAddr(t)
	s, err := NewSubscriber(context.Background(), SubscriberConfig{
		Endpoints: []Endpoint{{Addr: addr, Bind: true}},
		Logger:    slog.New(slog.NewTextHandler(&buf, nil)),
	}, func(Update) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) // not a ZMTP greeting
	c.Close()
	for end := time.Now().Add(wait); !strings.Contains(buf.String(), "a peer failed the ZMTP handshake"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no line about the failed handshake in the subscriber's log:\n%s", buf.String())
		}
	}
}
