package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// zmtpGreetingNull is a ZMTP 3.0 greeting offering the NULL mechanism.
func zmtpGreetingNull() []byte {
	g := make([]byte, zmtpGreeting)
	g[0], g[9], g[10], g[11] = 0xff, 0x7f, 3, 0
	copy(g[12:], "NULL")
	return g
}

// header is a ZMTP frame header of size bytes with flags.
func header(flags byte, size uint64) []byte {
	if size > 255 {
		return binary.BigEndian.AppendUint64([]byte{flags | 0x02}, size)
	}
	return []byte{flags, byte(size)}
}

func TestFrameGuardFollowsTheFraming(t *testing.T) {
	stream := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	body := func(n int) []byte { return bytes.Repeat([]byte{0xee}, n) }
	tests := []struct {
		name    string
		in      []byte
		refused bool
	}{
		{"a greeting, a command and messages pass", stream(zmtpGreetingNull(), header(0x04, 5), body(5), header(0x01, 3), body(3), header(0x00, 300), body(300)), false},
		{"an empty frame passes", stream(zmtpGreetingNull(), header(0x00, 0), header(0x00, 1), body(1)), false},
		{"a frame of MaxFrame bytes is declared freely", stream(zmtpGreetingNull(), header(0x00, MaxFrame)), false},
		{"a frame over MaxFrame is refused", stream(zmtpGreetingNull(), header(0x00, MaxFrame+1)), true},
		{"a header of 2^62 bytes during the handshake is refused", stream(zmtpGreetingNull(), header(0x04, 1<<62)), true},
		{"a huge size hidden in a body is only data", stream(zmtpGreetingNull(), header(0x00, 9), header(0x02, 1<<62)), false},
		{"a huge header after a long body is refused", stream(zmtpGreetingNull(), header(0x00, 1000), body(1000), header(0x00, 1<<40)), true},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 7, 4096} { // however the reads split it
			t.Run(fmt.Sprintf("%s, in reads of %d bytes", tt.name, chunk), func(t *testing.T) {
				g := &frameGuard{greeting: zmtpGreeting}
				var err error
				for in := tt.in; len(in) > 0 && err == nil; {
					k := min(chunk, len(in))
					err = g.scan(in[:k])
					in = in[k:]
				}
				if refused := errors.Is(err, errFrameTooLarge); refused != tt.refused {
					t.Fatalf("reads of %d bytes: err %v, want refused %v", chunk, err, tt.refused)
				}
			})
		}
	}
}

// refusedWhole is frameGuard's verdict on a whole stream after the
// greeting, written plainly: walk the frames one by one and refuse at the
// first header declaring more than MaxFrame. A header or body cut off by
// the stream's end is not refused.
func refusedWhole(frames []byte) bool {
	for len(frames) > 0 {
		flags := frames[0]
		var size uint64
		if flags&0x02 != 0 {
			if len(frames) < 9 {
				return false
			}
			size, frames = binary.BigEndian.Uint64(frames[1:9]), frames[9:]
		} else {
			if len(frames) < 2 {
				return false
			}
			size, frames = uint64(frames[1]), frames[2:]
		}
		if size > MaxFrame {
			return true
		}
		if size >= uint64(len(frames)) {
			return false
		}
		frames = frames[size:]
	}
	return false
}

// FuzzFrameGuard holds frameGuard, which reads what any peer on the events
// port sends, to refusedWhole, however the peer's bytes arrive split
// into reads.
func FuzzFrameGuard(f *testing.F) {
	f.Add([]byte{0x04, 5, 1, 2, 3, 4, 5, 0x00, 0}, uint8(1))
	f.Add(header(0x00, MaxFrame+1), uint8(3))
	f.Add(append(header(0x00, 9), header(0x02, 1<<62)...), uint8(4))
	f.Add(append(append(header(0x00, 300), bytes.Repeat([]byte{0xee}, 300)...), header(0x04, 1<<40)...), uint8(200))
	f.Fuzz(func(t *testing.T, frames []byte, chunk uint8) {
		want := refusedWhole(frames)
		in := append(zmtpGreetingNull(), frames...)
		g := &frameGuard{greeting: zmtpGreeting}
		step := int(chunk%64) + 1
		var err error
		for len(in) > 0 && err == nil {
			k := min(step, len(in))
			err = g.scan(in[:k])
			in = in[k:]
		}
		if err != nil && !errors.Is(err, errFrameTooLarge) {
			t.Fatalf("scan failed with %v, not errFrameTooLarge", err)
		}
		if got := err != nil; got != want {
			t.Fatalf("reads of %d bytes: refused %v, want %v (%v)", step, got, want, err)
		}
	})
}

// TestAnOversizedFrameEndsOnlyItsConnection sends a bound subscriber the
// header go-zeromq would allocate 2^62 bytes for (it crashed the process),
// then has a publisher connect and publish as usual.
func TestAnOversizedFrameEndsOnlyItsConnection(t *testing.T) {
	addr := freeAddr(t)
	_, u := newSub(t, Endpoint{Addr: addr, Bind: true})
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append(zmtpGreetingNull(), header(0x04, 1<<62)...)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 256)
	for {
		if _, err := c.Read(buf); err != nil {
			break // the subscriber closed the connection
		}
	}
	p := newPub(t, PublisherConfig{Endpoint: addr, Connect: true, Topic: "w"}, nil)
	warm(t, p.Publish, u, "w")
}

func TestReadyType(t *testing.T) {
	prop := func(name, value string) string {
		return string([]byte{byte(len(name))}) + name + string([]byte{0, 0, 0, byte(len(value))}) + value
	}
	tests := []struct {
		name, body, want string
	}{
		{"a publisher's READY", "\x05READY" + prop("Socket-Type", "PUB"), "PUB"},
		{"a replay socket's READY, with an identity first", "\x05READY" + prop("Identity", "") + prop("Socket-Type", "ROUTER"), "ROUTER"},
		{"names in another case", "\x05ready" + prop("socket-type", "xpub"), "XPUB"},
		{"a READY with no type", "\x05READY" + prop("Identity", "x"), ""},
		{"a property cut short", "\x05READY" + prop("Socket-Type", "PUB")[:14], ""},
		{"another command", "\x05ERROR" + prop("Socket-Type", "PUB"), ""},
		{"a type that is no text, each byte a ?", "\x05READY" + prop("Socket-Type", "p\xb5\n\x00b"), "P???B"},
		{"a type longer than any socket's, cut", "\x05READY" + prop("Socket-Type", strings.Repeat("x", 40)), strings.Repeat("X", 32)},
		{"nothing", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readyType([]byte(tt.body)); got != tt.want {
				t.Fatalf("readyType = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzReadyType(f *testing.F) {
	f.Add([]byte("\x05READY\x0bSocket-Type\x00\x00\x00\x03PUB"))
	f.Add([]byte("\x05READY\x0bSocket-Type\xff\xff\xff\xffPUB"))
	f.Fuzz(func(t *testing.T, body []byte) {
		got := readyType(body)
		if len(got) > len(body) || len(got) > maxSocketType {
			t.Fatalf("a type of %d bytes from a body of %d", len(got), len(body))
		}
		if i := strings.IndexFunc(got, func(r rune) bool { return r < ' ' || r > '~' || ('a' <= r && r <= 'z') }); i >= 0 {
			t.Fatalf("type %q has %q at %d: want upper-case printable ASCII", got, got[i], i)
		}
	})
}
