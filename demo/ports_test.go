package demo

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/internal/testport"
	"github.com/kvlens/kvlens/sim"
)

func TestSimPortsPinTheFleet(t *testing.T) {
	base := testport.Free(t, 4)
	start := func() (*Demo, error) {
		cfg := DefaultConfig()
		cfg.Addr, cfg.NoStart, cfg.SimWorkers = "127.0.0.1:0", true, 2
		cfg.SimPorts = sim.PortPlan{HTTP: base}
		return Start(cfg)
	}
	d, err := start()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	tests := []struct {
		name string
		ok   bool
	}{
		{"worker 0 serves on the first port and publishes after the last worker's", strings.Contains(d.WorkerURLs[0], fmt.Sprintf("=http://127.0.0.1:%d,events=tcp://127.0.0.1:%d,", base, base+2))},
		{"worker 1 takes the next port of each range", strings.Contains(d.WorkerURLs[1], fmt.Sprintf("=http://127.0.0.1:%d,events=tcp://127.0.0.1:%d,", base+1, base+3))},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("not so that %s: %v", tt.name, d.WorkerURLs)
		}
	}

	// Sad path: a second demo on the same ports is refused with the port
	// and the flag named, and the first keeps serving.
	if d2, err := start(); err == nil {
		d2.Close(context.Background())
		t.Fatal("a second fleet started on ports in use")
	} else if want := fmt.Sprintf("--sim-ports %d: sim: event port %d for worker 0 is already in use", base, base+2); !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/models", base))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the first fleet's worker 0 answers %d after the refused start", resp.StatusCode)
	}
}

func TestNextAddrKeepsTheHost(t *testing.T) {
	for _, tt := range []struct{ name, addr, want string }{
		{"loopback stays on loopback", "127.0.0.1:8080", "127.0.0.1:8081"},
		{"every interface stays every interface", ":8080", ":8081"},
		{"a host name is kept", "localhost:9000", "localhost:9001"},
		{"IPv6 keeps its brackets", "[::1]:8080", "[::1]:8081"},
		{"no port reads as 8080", "127.0.0.1", "127.0.0.1:8081"},
		{"the last port wraps to 8081", "127.0.0.1:65535", "127.0.0.1:8081"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextAddr(tt.addr); got != tt.want {
				t.Errorf("nextAddr(%q) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}
