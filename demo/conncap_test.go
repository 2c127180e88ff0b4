package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestDashboardCapsItsConnections floods a dashboard capped at 3
// connections with 5 that send nothing: it holds 3 and leaves the rest in
// the kernel's accept queue, so a flood cannot take the process's
// descriptors; when one of the 3 closes, a real request from the queue is
// answered.
func TestDashboardCapsItsConnections(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NoStart = true
	cfg.DB, cfg.Record = "", false
	cfg.MaxConns = 3
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.Close(ctx)
	})
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	var flood []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		flood = append(flood, c)
	}
	for end := time.Now().Add(20 * time.Second); !d.ln.Full(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the dashboard never stopped accepting: %d connections open, cap %d", d.ln.Open(), d.ln.Cap())
		}
	}
	d.conns.mu.Lock()
	fresh := len(d.conns.fresh)
	d.conns.mu.Unlock()
	if fresh != 3 {
		t.Fatalf("the server holds %d connections that sent nothing, want the cap, 3", fresh)
	}

	fmt.Fprintf(flood[3], "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
	flood[0].Close()
	resp, err := http.ReadResponse(bufio.NewReader(flood[3]), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 100))
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("a request from the queue got %d %q", resp.StatusCode, body)
	}
	if n := d.ln.Open(); n > 3 {
		t.Fatalf("%d connections open, over the cap of 3", n)
	}
}
