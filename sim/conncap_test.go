package sim

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

// TestWorkersCapTheirConnections floods a worker capped at 3 connections
// with 5 that send nothing: it holds 3, and a real request waiting behind
// them is answered once one of them closes.
func TestWorkersCapTheirConnections(t *testing.T) {
	f, err := StartFleet(FleetConfig{Count: 2, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(context.Background()) })
	u, err := url.Parse(f.URLs[0])
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
	ln := f.listeners[0]
	for end := time.Now().Add(20 * time.Second); !ln.Full(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the worker never stopped accepting: %d connections open, cap %d", ln.Open(), ln.Cap())
		}
	}
	// The other worker has its own cap, untouched by the flood.
	resp, err := http.Get(f.URLs[1] + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the other worker's /health: %d", resp.StatusCode)
	}

	fmt.Fprintf(flood[3], "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
	flood[0].Close()
	resp, err = http.ReadResponse(bufio.NewReader(flood[3]), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("a request from the queue got %d", resp.StatusCode)
	}
	if n := ln.Open(); n > 3 {
		t.Fatalf("%d connections open, over the cap of 3", n)
	}
}
