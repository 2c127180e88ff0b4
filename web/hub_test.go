package web

import (
	"bytes"
	"compress/flate"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// hubServer serves a hub with lim over httptest; its hello frame is "hello".
func hubServer(t *testing.T, lim HubLimits) (*Hub, *httptest.Server) {
	t.Helper()
	h := NewHub(func() [][]byte { return nil }, func() [][]byte { return [][]byte{[]byte("hello")} }, lim, prometheus.NewRegistry())
	ts := httptest.NewServer(http.HandlerFunc(h.ServeWS))
	t.Cleanup(func() { h.closeAll(); ts.Close() })
	return h, ts
}

func hubURL(ts *httptest.Server) string { return "ws" + strings.TrimPrefix(ts.URL, "http") }

// reader is a browser that reads every frame, and answers pings (gorilla's
// default ping handler does) as a browser does.
type reader struct {
	conn   *websocket.Conn
	frames atomic.Int64 // frames received after the hello
	closed chan error
}

func dialReader(t *testing.T, ts *httptest.Server) *reader {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(hubURL(ts), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{conn: c, closed: make(chan error, 1)}
	go func() {
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				r.closed <- err
				return
			}
			if string(msg) != "hello" {
				r.frames.Add(1)
			}
		}
	}()
	t.Cleanup(func() { c.Close() })
	return r
}

// dialSilent is a client that never reads, with a small receive buffer so
// the server's writes back up quickly.
func dialSilent(t *testing.T, ts *httptest.Server) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}}
	c, _, err := d.Dial(hubURL(ts), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond until it holds, failing after a generous wait; it
// proves that something happens, not how fast.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("never happened: %s", what)
		}
	}
}

func drops(h *Hub, reason string) float64 {
	return testutil.ToFloat64(h.metrics.drops.WithLabelValues(reason))
}

func TestHubDropsViewersThatFallBehindAndKeepsTheOthers(t *testing.T) {
	const long = time.Hour
	tests := []struct {
		name   string
		lim    HubLimits
		frame  int    // bytes per broadcast frame
		reason string // the drop counted
	}{
		{
			name:   "a client that never reads never answers a ping, so it is dropped as idle",
			lim:    HubLimits{PingEvery: 20 * time.Millisecond, IdleTimeout: 200 * time.Millisecond, MaxBacklog: long, WriteTimeout: long},
			frame:  100,
			reason: dropIdle,
		},
		{
			name:   "a client whose oldest unsent frame waits past MaxBacklog is dropped for its backlog",
			lim:    HubLimits{PingEvery: long, IdleTimeout: long, MaxBacklog: 200 * time.Millisecond, WriteTimeout: long},
			frame:  64 << 10,
			reason: dropBacklog,
		},
		{
			name:   "a client whose unsent frames outgrow MaxQueueBytes is dropped for its backlog",
			lim:    HubLimits{PingEvery: long, IdleTimeout: long, MaxBacklog: long, MaxQueueBytes: 1 << 20, WriteTimeout: long},
			frame:  64 << 10,
			reason: dropBacklog,
		},
		{
			name:   "a client whose socket takes no more bytes within WriteTimeout is dropped for the write error",
			lim:    HubLimits{PingEvery: long, IdleTimeout: long, MaxBacklog: long, WriteTimeout: 100 * time.Millisecond},
			frame:  64 << 10,
			reason: dropWrite,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ts := hubServer(t, tt.lim)
			r := dialReader(t, ts)
			dialSilent(t, ts)
			eventually(t, "both clients registered", func() bool { return h.Clients() == 2 })
			frame := [][]byte{bytes.Repeat([]byte("x"), tt.frame)}
			sent := int64(0)
			for end := time.Now().Add(20 * time.Second); drops(h, tt.reason) == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the silent client was never dropped for %s; drops: idle %v backlog %v write %v", tt.reason, drops(h, dropIdle), drops(h, dropBacklog), drops(h, dropWrite))
				}
				h.broadcast(frame)
				sent++
			}
			for range 3 { // the reader goes on receiving after the drop
				h.broadcast(frame)
				sent++
			}
			eventually(t, "the reader got every frame", func() bool { return r.frames.Load() == sent })
			if h.Clients() != 1 {
				t.Errorf("%d clients connected, want the reader alone", h.Clients())
			}
			for _, other := range []string{dropIdle, dropBacklog, dropWrite, dropCap} {
				want := 0.0
				if other == tt.reason {
					want = 1
				}
				if got := drops(h, other); got != want {
					t.Errorf("drops{reason=%q} = %v, want %v", other, got, want)
				}
			}
			if got := testutil.ToFloat64(h.metrics.viewers); got != 1 {
				t.Errorf("viewers gauge = %v, want 1", got)
			}
		})
	}
}

func TestHubKeepsAReadingViewerThroughManyPings(t *testing.T) {
	// Pings every 50 ms against a 500 ms idle timeout, for 3 s: the
	// viewer's pongs keep it connected over six timeouts' worth of frames.
	// (A 100 ms timeout dropped the viewer on a loaded 2-core machine, where
	// a pong can wait that long for the scheduler.)
	h, ts := hubServer(t, HubLimits{PingEvery: 50 * time.Millisecond, IdleTimeout: 500 * time.Millisecond})
	r := dialReader(t, ts)
	eventually(t, "the reader registered", func() bool { return h.Clients() == 1 })
	const ticks = 100
	for range ticks {
		h.broadcast([][]byte{[]byte("tick")})
		time.Sleep(30 * time.Millisecond)
	}
	eventually(t, "the reader got every frame", func() bool { return r.frames.Load() == ticks })
	if h.Clients() != 1 || drops(h, dropIdle) != 0 {
		t.Fatalf("clients %d, idle drops %v: a viewer that answers pings was dropped", h.Clients(), drops(h, dropIdle))
	}
}

func TestHubSaysRestartAtShutdownSoBrowsersReconnect(t *testing.T) {
	h, ts := hubServer(t, HubLimits{})
	r := dialReader(t, ts)
	eventually(t, "the reader registered", func() bool { return h.Clients() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.Run(ctx)
	err := <-r.closed
	// htmx's ws extension reconnects after codes 1006, 1011, 1012 and 1013.
	if !websocket.IsCloseError(err, websocket.CloseServiceRestart) {
		t.Fatalf("close = %v, want code 1012 (service restart)", err)
	}
}

func TestHubSadPaths(t *testing.T) {
	t.Run("a viewer past MaxViewers is refused with 503 and one sentence, and those watching keep receiving", func(t *testing.T) {
		h, ts := hubServer(t, HubLimits{MaxViewers: 2})
		a, b := dialReader(t, ts), dialReader(t, ts)
		eventually(t, "two viewers registered", func() bool { return h.Clients() == 2 })
		_, resp, err := websocket.DefaultDialer.Dial(hubURL(ts), nil)
		if err == nil {
			t.Fatal("a third viewer was let in past MaxViewers 2")
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "limit of 2 viewers (--max-viewers)") {
			t.Fatalf("refusal = %d %q", resp.StatusCode, body)
		}
		if drops(h, dropCap) != 1 {
			t.Errorf("drops{reason=cap} = %v, want 1", drops(h, dropCap))
		}
		for range 5 {
			h.broadcast([][]byte{[]byte("tick")})
		}
		eventually(t, "both viewers got every frame", func() bool { return a.frames.Load() == 5 && b.frames.Load() == 5 })

		a.conn.Close() // one leaves: there is room again
		eventually(t, "the leaver unregistered", func() bool { return h.Clients() == 1 })
		dialReader(t, ts)
		eventually(t, "a new viewer registered", func() bool { return h.Clients() == 2 })
		if drops(h, dropCap) != 1 || drops(h, dropIdle)+drops(h, dropWrite)+drops(h, dropBacklog) != 0 {
			t.Errorf("a viewer leaving on its own was counted as a drop")
		}
	})
	t.Run("a viewer that sends more than the read limit is let go, not counted as dropped", func(t *testing.T) {
		h, ts := hubServer(t, HubLimits{})
		r := dialReader(t, ts)
		eventually(t, "the viewer registered", func() bool { return h.Clients() == 1 })
		r.conn.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), readLimit+1))
		eventually(t, "the viewer unregistered", func() bool { return h.Clients() == 0 })
		if err := <-r.closed; err == nil {
			t.Fatal("the connection stayed open")
		}
		for _, reason := range []string{dropIdle, dropBacklog, dropWrite, dropCap} {
			if drops(h, reason) != 0 {
				t.Errorf("drops{reason=%q} = %v, want 0", reason, drops(h, reason))
			}
		}
	})
	t.Run("a compressed message that inflates past the read limit is let go", func(t *testing.T) {
		h, ts := hubServer(t, HubLimits{})
		d := websocket.Dialer{EnableCompression: true}
		c, _, err := d.Dial(hubURL(ts), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		closed := make(chan error, 1)
		go func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					closed <- err
					return
				}
			}
		}()
		eventually(t, "the viewer registered", func() bool { return h.Clients() == 1 })
		// 4 MB of zeros deflate to under 4 KB: within the limit on the
		// wire, a thousand times over it inflated.
		c.EnableWriteCompression(true)
		if err := c.SetCompressionLevel(flate.BestCompression); err != nil {
			t.Fatal(err)
		}
		bomb := make([]byte, 4_000_000)
		// The hub stops reading, and closes, while the message is still
		// being written, so the write may fail with a reset.
		c.WriteMessage(websocket.BinaryMessage, bomb)
		eventually(t, "the viewer unregistered", func() bool { return h.Clients() == 0 })
		if err := <-closed; err == nil {
			t.Fatal("the connection stayed open")
		}
	})
	t.Run("a viewer arriving after shutdown is refused with 503", func(t *testing.T) {
		h, ts := hubServer(t, HubLimits{})
		h.closeAll()
		_, resp, err := websocket.DefaultDialer.Dial(hubURL(ts), nil)
		if err == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("err %v, status %v; want a 503 refusal", err, resp)
		}
	})
}

func TestHubMetricsAreRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewHub(func() [][]byte { return nil }, func() [][]byte { return nil }, HubLimits{}, reg)
	n, err := testutil.GatherAndCount(reg, "kvlens_web_viewers", "kvlens_web_viewer_drops_total")
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 { // the gauge and one counter per reason
		t.Fatalf("%d series, want 6", n)
	}
}

func TestHubHandsMemoryBackOncePerCrowd(t *testing.T) {
	tests := []struct {
		name     string
		left     int           // viewers gone since the last return
		leftNow  bool          // one of them during this tick
		released time.Duration // since the last return
		want     bool
	}{
		// 200 viewers gone, the last a tick ago, long after the last return.
		{"a crowd that has finished leaving is handed back", releaseAfter, false, time.Hour, true},
		{"fewer viewers than releaseAfter are not worth a collection", releaseAfter - 1, false, time.Hour, false},
		{"a crowd still leaving this tick is waited for", releaseAfter, true, time.Hour, false},
		{"a second crowd within releaseEvery of the first waits", releaseAfter, false, releaseEvery / 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHub(nil, nil, HubLimits{}, nil)
			h.left, h.leftNow, h.released = tt.left, tt.leftNow, time.Now().Add(-tt.released)
			if got := h.crowdGone(); got != tt.want {
				t.Fatalf("crowdGone = %v, want %v", got, tt.want)
			}
			if tt.want && (h.left != 0 || h.crowdGone()) {
				t.Fatal("the same crowd was handed back twice")
			}
			if h.leftNow {
				t.Fatal("a tick's departures carried over to the next tick")
			}
		})
	}
}

// TestHubCompressesFramesForBrowsersThatAskOnly sends one tick to a browser
// that negotiated permessage-deflate, as Chromium and Firefox do, and to a
// client that did not: both read the same frame, and the first receives
// fewer bytes on the wire.
func TestHubCompressesFramesForBrowsersThatAskOnly(t *testing.T) {
	h, ts := hubServer(t, HubLimits{})
	tick := bytes.Repeat([]byte(`<div class="tile" data-tile="ttft-p95"><span>412 ms</span></div>`), 128)
	type result struct {
		ext  string
		msg  []byte
		wire int64
	}
	read := func(deflate bool) result {
		var wire atomic.Int64
		d := websocket.Dialer{EnableCompression: deflate, NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &wire}, nil
		}}
		c, resp, err := d.Dial(hubURL(ts), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, hello, err := c.ReadMessage(); err != nil || string(hello) != "hello" {
			t.Fatalf("hello: %q, %v", hello, err)
		}
		before := wire.Load()
		h.broadcast([][]byte{tick})
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return result{resp.Header.Get("Sec-Websocket-Extensions"), msg, wire.Load() - before}
	}
	plain, deflated := read(false), read(true)
	if !strings.HasPrefix(deflated.ext, "permessage-deflate") || plain.ext != "" {
		t.Errorf("negotiated %q when asked and %q when not; want permessage-deflate only when asked", deflated.ext, plain.ext)
	}
	if !bytes.Equal(plain.msg, tick) || !bytes.Equal(deflated.msg, tick) {
		t.Fatalf("read %d and %d bytes, want the %d-byte frame both times", len(plain.msg), len(deflated.msg), len(tick))
	}
	if deflated.wire*4 > plain.wire {
		t.Errorf("the frame took %d bytes on the wire compressed and %d plain; want a quarter or less", deflated.wire, plain.wire)
	}
}

// fromServer serves a hub whose requests come from the address each client
// names in X-From, as if it had connected from there.
func fromServer(t *testing.T, lim HubLimits) (*Hub, *httptest.Server) {
	t.Helper()
	h := NewHub(func() [][]byte { return nil }, func() [][]byte { return [][]byte{[]byte("hello")} }, lim, prometheus.NewRegistry())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = r.Header.Get("X-From")
		h.ServeWS(w, r)
	}))
	t.Cleanup(func() { h.closeAll(); ts.Close() })
	return h, ts
}

// dialFrom opens a websocket that never reads from the address from, and
// returns the status of the answer (101 when it opened) and its body.
func dialFrom(t *testing.T, ts *httptest.Server, from string) (*websocket.Conn, int, string) {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(hubURL(ts), http.Header{"X-From": {from}})
	if resp == nil {
		t.Fatalf("dial from %s: no answer: %v", from, err)
	}
	if c != nil {
		t.Cleanup(func() { c.Close() })
		return c, resp.StatusCode, ""
	}
	body, _ := io.ReadAll(resp.Body)
	return nil, resp.StatusCode, string(body)
}

func TestHubCapsViewersPerAddress(t *testing.T) {
	lim := HubLimits{MaxViewers: 4, MaxPerAddress: 2}
	tests := []struct {
		name string
		from []string // the addresses that connect, in order
		want []int    // the status each gets: 101 opened, 429 over its address's share, 503 over the total
	}{
		{"an address past its 2 places is refused, and another address still gets in",
			[]string{"192.0.2.7:1000", "192.0.2.7:1001", "192.0.2.7:1002", "198.51.100.1:1000"}, []int{101, 101, 429, 101}},
		{"an IPv6 address shares its /64's places",
			[]string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::3]:1", "[2001:db8:0:1::1]:1"}, []int{101, 101, 429, 101}},
		{"an IPv4-mapped IPv6 address is its IPv4 address",
			[]string{"192.0.2.7:1", "[::ffff:192.0.2.7]:2", "192.0.2.7:3"}, []int{101, 101, 429}},
		{"loopback counts like any other address",
			[]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "[::1]:1"}, []int{101, 101, 429, 101}},
		{"a remote address that is not TCP's counts as one address",
			[]string{"pipe", "@", "pipe"}, []int{101, 101, 429}},
		{"the total cap still holds over many addresses",
			[]string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1", "192.0.2.4:1", "192.0.2.5:1"}, []int{101, 101, 101, 101, 503}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ts := fromServer(t, lim)
			var refused429 float64
			for i, from := range tt.from {
				_, got, body := dialFrom(t, ts, from)
				if got != tt.want[i] {
					t.Fatalf("connection %d from %s: status %d %q, want %d", i+1, from, got, body, tt.want[i])
				}
				if got == http.StatusTooManyRequests {
					refused429++
					if !strings.Contains(body, "already has 2 dashboards open") || !strings.Contains(body, "--max-viewers-per-address") || strings.Count(strings.TrimSpace(body), "\n") > 0 {
						t.Errorf("refusal %q: want one line naming the share and the flag", body)
					}
				}
			}
			if d := drops(h, dropAddress); d != refused429 {
				t.Errorf("drops{reason=address} = %v, want %v", d, refused429)
			}
		})
	}

	t.Run("a viewer leaving, or an upgrade that fails, gives its address's place back", func(t *testing.T) {
		h, ts := fromServer(t, lim)
		a, _, _ := dialFrom(t, ts, "192.0.2.7:1")
		dialFrom(t, ts, "192.0.2.7:2")
		eventually(t, "two viewers registered", func() bool { return h.Clients() == 2 })
		a.Close()
		eventually(t, "the leaver unregistered", func() bool { return h.Clients() == 1 })
		if _, got, body := dialFrom(t, ts, "192.0.2.7:3"); got != http.StatusSwitchingProtocols {
			t.Fatalf("after one left: status %d %q, want 101", got, body)
		}
		// Plain GETs, not upgrades: the upgrader refuses them after they
		// were counted, and each must give its place back.
		for i := range 3 {
			req, _ := http.NewRequest("GET", ts.URL, nil)
			req.Header.Set("X-From", "198.51.100.1:1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("plain GET %d: status %d, want the upgrader's 400", i+1, resp.StatusCode)
			}
		}
		if _, got, body := dialFrom(t, ts, "198.51.100.1:2"); got != http.StatusSwitchingProtocols {
			t.Fatalf("after three failed upgrades: status %d %q, want 101", got, body)
		}
	})
}
