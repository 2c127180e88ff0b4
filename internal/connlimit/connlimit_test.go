package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestShare(t *testing.T) {
	tests := []struct {
		name   string
		nofile uint64 // the process's descriptor limit; 0: unknown
		n      int    // listeners sharing the group's quarter
		want   int
	}{
		// 20,000 / 4 = 5,000: the audit's flood of 19,668 waits.
		{"the audit's 20,000 descriptors give the dashboard a quarter", 20000, 1, 5000},
		{"a fleet of 3 workers splits its quarter", 20000, 3, 1666},
		{"a million descriptors stop at the ceiling", 1 << 20, 1, Ceiling},
		// 1,024 / 4 / 64 = 4 connections a worker, raised to the floor.
		{"a worker of a large fleet still gets the floor", 1024, 64, Floor},
		// 1,024 / 4 = 256 would stall two lanes of 180 conversations.
		{"a small descriptor limit still leaves the demo's own traffic room", 1024, 1, 1024},
		{"an unknown limit gives the fallback", 0, 1, Fallback},
		{"no listeners count as one", 20000, 0, 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := share(tt.nofile, tt.n); got != tt.want {
				t.Fatalf("share(%d, %d) = %d, want %d", tt.nofile, tt.n, got, tt.want)
			}
		})
	}
}

func TestDefaultLeavesAQuarterWhenEveryListenerIsFlooded(t *testing.T) {
	// From 12,288 descriptors on: under that the floor binds, and the
	// demo's own traffic goes before the quarter (Floor).
	for _, nofile := range []uint64{12288, 20000, 65536, 1 << 20} {
		// The dashboard and the A/B demo's two fleets of 3 workers.
		held := share(nofile, 1) + 2*3*share(nofile, 3)
		if left := int(nofile) - held; left < int(nofile)/4 {
			t.Errorf("with %d descriptors, the flooded listeners hold %d and leave %d, under a quarter", nofile, held, left)
		}
	}
}

// events records, in order, what a listener and the test saw.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

// recorder notes each connection its listener accepts and each the server
// closes.
type recorder struct {
	net.Listener
	ev *events
}

func (r recorder) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err == nil {
		r.ev.add("accept")
		c = &recorded{TCPConn: c.(*net.TCPConn), ev: r.ev}
	}
	return c, err
}

type recorded struct {
	*net.TCPConn
	ev   *events
	once sync.Once
}

func (c *recorded) Close() error {
	c.once.Do(func() { c.ev.add("close") })
	return c.TCPConn.Close()
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

// TestListenerHoldsConnectionsToItsCap floods a server capped at 2 with 5
// idle connections: it accepts 2 and then waits, and the connections past
// the cap are accepted only as others close, first come first served, so a
// request on the third is answered once one of the first two goes.
func TestListenerHoldsConnectionsToItsCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	l := Limit(recorder{Listener: ln, ev: ev}, 2)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	var flood []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		flood = append(flood, c)
	}
	eventually(t, "the server waits for a place", l.Full)
	// Waiting, it can accept nothing more until a connection closes.
	if got := ev.get(); !slices.Equal(got, []string{"accept", "accept"}) || l.Open() != 2 {
		t.Fatalf("at the cap: %v, %d open; want 2 accepted and open", got, l.Open())
	}

	fmt.Fprintf(flood[2], "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	flood[0].Close() // the server sees it go, and takes the next in the queue
	resp, err := http.ReadResponse(bufio.NewReader(flood[2]), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10))
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("the third connection's request got %d %q", resp.StatusCode, body)
	}
	if got, want := ev.get(), []string{"accept", "accept", "close", "accept"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v: the third was accepted before one of the first two closed", got, want)
	}
	if l.Open() > 2 {
		t.Fatalf("%d open, over the cap of 2", l.Open())
	}
}

func TestListenerSadPaths(t *testing.T) {
	t.Run("Close ends an Accept that waits for a place", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := Limit(ln, 1)
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := l.Accept(); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { _, err := l.Accept(); errc <- err }()
		eventually(t, "the second Accept waits", l.Full)
		l.Close()
		if err := <-errc; err == nil {
			t.Fatal("Accept after Close returned a connection")
		}
	})
	t.Run("a connection closed twice gives back one place", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		l := Limit(ln, 2)
		for range 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		a, _ := l.Accept()
		l.Accept()
		a.Close()
		a.Close()
		if l.Open() != 1 {
			t.Fatalf("%d open after one of two closed twice, want 1", l.Open())
		}
	})
}

// TestTCPConnectionsKeepTheirMethods is why kvlens does not use
// netutil.LimitListener, whose connections hide them: the dashboard resets
// a websocket it hangs up on (SetLinger), and net/http sends files with
// ReadFrom.
func TestTCPConnectionsKeepTheirMethods(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(ln, 1)
	defer l.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var missing []string
	if _, ok := a.(interface{ SetLinger(int) error }); !ok {
		missing = append(missing, "SetLinger")
	}
	if _, ok := a.(io.ReaderFrom); !ok {
		missing = append(missing, "ReadFrom")
	}
	if _, ok := a.(interface{ CloseWrite() error }); !ok {
		missing = append(missing, "CloseWrite")
	}
	if len(missing) > 0 {
		t.Fatalf("an accepted TCP connection lacks %s", strings.Join(missing, ", "))
	}
}
