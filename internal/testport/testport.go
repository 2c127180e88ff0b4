// Package testport picks TCP ports for tests that must name a port before
// whatever binds it starts: a process given --ports, or a router that binds
// the port a worker's KV-event publisher is already dialing.
//
// The ports come from below the kernel's ephemeral range. A port picked
// by listening on :0 and closing it comes from that range, and the kernel
// may give it to any outgoing connection before the test's process binds
// it; a connection opened meanwhile by a test running beside (an HTTP
// keep-alive, a ZMQ or websocket stream) then holds it for as long as it
// lives. So it went in a full test run beside other load: the router could
// not bind a worker's KV-event port ("address already in use") for the
// 20 s the test waited. Below the range only an explicit bind takes a
// port.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the first port Free picks from: above the ports services
// commonly use.
const lowest = 10000

// given holds every port Free has returned in this process, so that two
// calls never overlap even when the first caller has not bound its ports
// yet (a process it started is still starting).
var given = ledger{ports: map[int]bool{}}

type ledger struct {
	sync.Mutex
	ports map[int]bool
}

// holdsAny reports whether any port of base..base+n-1 was given before.
// The caller holds the lock.
func (l *ledger) holdsAny(base, n int) bool {
	for p := base; p < base+n; p++ {
		if l.ports[p] {
			return true
		}
	}
	return false
}

// Free returns the first of n consecutive ports that every host
// (127.0.0.1 when none is given) could bind a moment ago, picked at random
// below the ephemeral range, none of them returned before in this process.
func Free(t testing.TB, n int, hosts ...string) int {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	hi := ephemeralStart()
	if hi-lowest < n {
		t.Fatalf("testport: the ephemeral range starts at %d, leaving no %d ports above %d", hi, n, lowest)
	}
	given.Lock()
	defer given.Unlock()
	for range 200 {
		base := lowest + rand.IntN(hi-lowest-n+1)
		if !given.holdsAny(base, n) && Bindable(base, n, hosts...) {
			for p := base; p < base+n; p++ {
				given.ports[p] = true
			}
			return base
		}
	}
	t.Fatalf("testport: no %d consecutive free ports in %d-%d after 200 tries", n, lowest, hi-1)
	return 0
}

// Bindable reports whether every host could bind every port of
// base..base+n-1: all of them are bound at once, then released.
func Bindable(base, n int, hosts ...string) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for p := base; p < base+n; p++ {
		for _, h := range hosts {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(p)))
			if err != nil {
				return false
			}
			held = append(held, l)
		}
	}
	return true
}

// ephemeralStart is the first port of the kernel's ephemeral range: Linux's
// ip_local_port_range, else 32768 (Linux's default; the BSDs and macOS
// start higher, at 49152).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil || p <= 0 {
		return 32768
	}
	return p
}
