package demo

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestCloseCutsWhatItWouldWaitFor holds Close to its promise of an exit
// within 5 s: what no request of the demo's own holds open is closed at
// once, and a client that never finishes its request is cut after the
// 2 s grace, with an error that says so.
func TestCloseCutsWhatItWouldWaitFor(t *testing.T) {
	tests := []struct {
		name string
		// open leaves a connection to the dashboard in some state.
		open    func(t *testing.T, c net.Conn, host string)
		wantCut bool
	}{
		{"a connection that never sent a request is closed, not waited for",
			func(t *testing.T, c net.Conn, host string) {}, false},
		{"a connection idle after its request is closed, not waited for",
			func(t *testing.T, c net.Conn, host string) {
				fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
				buf := make([]byte, 512)
				if _, err := c.Read(buf); err != nil {
					t.Fatal(err)
				}
			}, false},
		{"a request whose body never comes is cut after the grace, and Close says so",
			func(t *testing.T, c net.Conn, host string) {
				fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", host)
			}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Addr = "127.0.0.1:0"
			cfg.NoStart = true
			cfg.DB, cfg.Record = "", false
			d, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(d.URL)
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tt.open(t, c, u.Host)
			time.Sleep(100 * time.Millisecond) // the server has seen the connection's state
			start := time.Now()
			err = d.Close(context.Background())
			took := time.Since(start)
			cut := err != nil && strings.Contains(err.Error(), "connections still open after 2 s were cut")
			if cut != tt.wantCut {
				t.Fatalf("Close after %v: %v; want cut %v", took.Round(time.Millisecond), err, tt.wantCut)
			}
			if took > 4*time.Second {
				t.Errorf("Close took %v; the grace is 2 s", took.Round(time.Millisecond))
			}
		})
	}
}
