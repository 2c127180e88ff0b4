package kvevents

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAVanishedHostIsNoticedWithinTheBound measures how long each end of
// a KV-event connection takes to notice that the other's host vanished
// without closing anything (power lost, a cable pulled, Wi-Fi gone): no FIN
// or RST comes, only silence. The publisher runs in a network namespace of
// its own, its "host", joined to the test's by a veth pair; the host
// vanishes when its end of the pair goes down, after which what the
// subscriber sends is lost on the wire, as on a network, not refused by
// its own kernel (a local qdisc that drops reads to TCP as congestion, and
// keepalive then never gives up). It needs root and a network namespace of
// its own to add the pair to, so it runs only when asked:
//
//	ip netns add kvvanish
//	ip netns exec kvvanish env KVLENS_VANISH=1 go test -run Vanished -v ./kvevents/
//	ip netns del kvvanish
//
// Two pairs of publisher and subscriber run at once: one whose publisher
// is idle when its host vanishes, one whose publisher goes on publishing
// every 100 ms (its unacknowledged data then holds keepalive off, and
// retransmission decides). The subscriber has noticed when Endpoint.OnConn
// hears its connection close; the publisher, when its host's kernel holds
// no established connection on its port.
func TestAVanishedHostIsNoticedWithinTheBound(t *testing.T) {
	if os.Getenv("KVLENS_VANISH") == "" {
		t.Skip("set KVLENS_VANISH=1 and run in a network namespace of its own (see the comment)")
	}
	// What the measurement allows past deadPeerTimeout: the kernel's
	// timers (a retransmission's backoff), and a busy machine's scheduling.
	const deadPeerSlack = 8 * time.Second
	const patience = 200 * time.Second // past Go's defaults' 150 s
	if ns, err := exec.Command("ip", "netns", "identify", strconv.Itoa(os.Getpid())).Output(); err != nil || len(bytes.TrimSpace(ns)) == 0 {
		t.Fatalf("not in a named network namespace (ip netns identify: %q, %v): this test adds a veth pair to it", ns, err)
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	host := fmt.Sprintf("kvvanish-pub-%d", os.Getpid())
	run("ip", "netns", "add", host)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", host).Run() })
	run("ip", "link", "add", "kvv-sub", "type", "veth", "peer", "name", "kvv-pub", "netns", host)
	t.Cleanup(func() { exec.Command("ip", "link", "del", "kvv-sub").Run() })
	run("ip", "addr", "add", "10.251.0.1/30", "dev", "kvv-sub")
	run("ip", "link", "set", "kvv-sub", "up")
	run("ip", "-n", host, "addr", "add", "10.251.0.2/30", "dev", "kvv-pub")
	run("ip", "-n", host, "link", "set", "kvv-pub", "up")
	run("ip", "-n", host, "link", "set", "lo", "up")
	pubHost := onHost(t, host)

	type pair struct {
		name string
		busy bool
		port int
		pub  *Publisher
		// subNoticed and pubNoticed are how long each end took, once it did.
		mu                     sync.Mutex
		subNoticed, pubNoticed time.Duration
	}
	pairs := []*pair{{name: "idle publisher"}, {name: "busy publisher", busy: true}}
	closed := make(chan struct{})
	var vanished time.Time
	var wg sync.WaitGroup
	for i, p := range pairs {
		p.port = 15557 + i
		addr := fmt.Sprintf("tcp://10.251.0.2:%d", p.port)
		var err error
		pubHost(func() { p.pub, err = NewPublisher(PublisherConfig{Endpoint: addr, Logger: quiet}) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.pub.Close() })
		conns := make(chan bool, 16)
		_, u := newSub(t, Endpoint{Worker: "w", Addr: addr, OnConn: func(open bool) { conns <- open }})
		select {
		case open := <-conns:
			if !open {
				t.Fatal("OnConn(false) before the connection")
			}
		case <-time.After(wait):
			t.Fatalf("the subscriber never connected to %s", addr)
		}
		warm(t, p.pub.Publish, u, "")
		wg.Go(func() {
			for {
				select {
				case <-closed:
					return
				case open := <-conns:
					if !open {
						p.mu.Lock()
						p.subNoticed = time.Since(vanished)
						p.mu.Unlock()
						return
					}
				}
			}
		})
		wg.Go(func() {
			for {
				select {
				case <-closed:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if p.busy {
					p.pub.Publish(stored(1, 1))
				}
				var n int
				pubHost(func() { n = established(t, p.port) })
				if n == 0 {
					p.mu.Lock()
					p.pubNoticed = time.Since(vanished)
					p.mu.Unlock()
					return
				}
			}
		})
	}

	vanished = time.Now()
	run("ip", "-n", host, "link", "set", "kvv-pub", "down")
	deadline := time.Now().Add(patience)
	done := func() bool {
		for _, p := range pairs {
			p.mu.Lock()
			d := p.subNoticed > 0 && p.pubNoticed > 0
			p.mu.Unlock()
			if !d {
				return false
			}
		}
		return true
	}
	for !done() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(closed)
	wg.Wait()
	for _, p := range pairs {
		show := func(d time.Duration) string {
			if d == 0 {
				return "not within " + patience.String()
			}
			return d.Round(100 * time.Millisecond).String()
		}
		t.Logf("%s: the subscriber noticed after %s, the publisher after %s (bound %s)", p.name, show(p.subNoticed), show(p.pubNoticed), deadPeerTimeout)
		for _, d := range []time.Duration{p.subNoticed, p.pubNoticed} {
			if d == 0 || d > deadPeerTimeout+deadPeerSlack {
				t.Errorf("%s: the vanished host noticed after %s and %s, want both within %s", p.name, show(p.subNoticed), show(p.pubNoticed), deadPeerTimeout+deadPeerSlack)
				break
			}
		}
	}
	// Let the publishers close without their lingering writes to nowhere
	// holding them up.
	run("ip", "-n", host, "link", "set", "kvv-pub", "up")
}

// onHost returns a func that runs f on an OS thread inside the named
// network namespace, as the host it stands for: sockets f opens are that
// host's. The thread is kept for it, and ends with the test.
func onHost(t *testing.T, name string) func(f func()) {
	t.Helper()
	jobs := make(chan func())
	ready := make(chan error)
	go func() {
		// Never unlocked: a goroutine that ends locked takes its thread,
		// left in the other namespace, with it.
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		ready <- err
		if err != nil {
			return
		}
		for f := range jobs {
			f()
		}
	}()
	if err := <-ready; err != nil {
		t.Fatalf("enter network namespace %s: %v", name, err)
	}
	t.Cleanup(func() { close(jobs) })
	return func(f func()) {
		done := make(chan struct{})
		jobs <- func() { defer close(done); f() }
		<-done
	}
}

// established counts the TCP connections established on local port port
// in the calling thread's network namespace (/proc/thread-self/net/tcp,
// whose state 01 is ESTABLISHED).
func established(t *testing.T, port int) int {
	f, err := os.Open("/proc/thread-self/net/tcp")
	if err != nil {
		t.Error(err)
		return -1
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "01" {
			n++
		}
	}
	return n
}
