package router

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/internal/testport"
	"github.com/kvlens/kvlens/sim"
)

// pods is a resolver the test controls: the addresses a headless Service
// would return as pods come and go.
type pods struct {
	mu    sync.Mutex
	addrs []string
}

func (p *pods) set(a ...string) { p.mu.Lock(); p.addrs = a; p.mu.Unlock() }
func (p *pods) LookupHost(ctx context.Context, host string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.addrs), nil
}

// pod starts one simulated worker on host, as a pod would run it: the same
// HTTP and event ports as every other pod, its own IP.
func pod(t *testing.T, host string, httpPort, eventsPort int) {
	t.Helper()
	f, err := sim.StartFleet(sim.FleetConfig{
		Count: 1, Host: host, BasePort: httpPort,
		EventsBind: fmt.Sprintf("tcp://%s:%d", host, eventsPort),
	})
	if err != nil && strings.Contains(err.Error(), "is already in use") { // sim names the port
		// Another test process took the port testport.Free found free: a race
		// on a shared machine, not a failure of the fleet.
		t.Skipf("port %d on %s was taken since it was found free: %v", httpPort, host, err)
	}
	if err != nil {
		// testport.Free has already listened on host, so any other failure is
		// the fleet's, not the machine's.
		t.Fatalf("start a worker on %s:%d: %v", host, httpPort, err)
	}
	t.Cleanup(func() { f.Close(context.Background()) })
}

func chat(t *testing.T, worker, text string) {
	t.Helper()
	body := fmt.Sprintf(`{"max_tokens":2,"messages":[{"role":"user","content":%q}]}`, text)
	resp, err := http.Post("http://"+worker+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFeedFollowsPodsJoiningAndLeaving(t *testing.T) {
	a, b := "127.0.0.2", "127.0.0.3"
	httpPort, eventsPort := testport.Free(t, 1, a, b), testport.Free(t, 1, a, b)
	pod(t, a, httpPort, eventsPort)
	pod(t, b, httpPort, eventsPort)

	src := DNSSource{Service: "workers.test", Port: strconv.Itoa(httpPort), EventsPort: strconv.Itoa(eventsPort)}
	res := &pods{}
	pool := NewPool(nil)
	r := NewRouter(pool, &RoundRobin{}, Config{BlockSize: sim.MustProfile(sim.DefaultProfile).BlockSize})
	feed := NewFeed(r, t.Logf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Resolve and sync by hand, step by step, as Discover and Run would on
	// their timers.
	step := func(addrs ...string) {
		res.set(addrs...)
		if err := pool.Resolve(ctx, res, src); err != nil {
			t.Fatal(err)
		}
		feed.Sync(ctx)
	}
	subscribed := func() []string { s := feed.Subscribed(); sort.Strings(s); return s }
	nameA, nameB := net.JoinHostPort(a, src.Port), net.JoinHostPort(b, src.Port)
	prompt := "Summarise how a router can learn which worker holds which prefix blocks, in a few careful paragraphs, with an example."

	// One pod: its events reach the index under its DNS name.
	step(a)
	if got := subscribed(); !slices.Equal(got, []string{nameA}) {
		t.Fatalf("subscribed to %v, want [%s]", got, nameA)
	}
	time.Sleep(300 * time.Millisecond) // a SUB socket misses what was sent before it joined
	chat(t, nameA, prompt)
	eventually(t, "pod a's blocks are indexed", func() bool { return r.Index().Blocks(nameA) > 0 })

	// A second pod joins: it is subscribed to as well.
	step(a, b)
	if got := subscribed(); !slices.Equal(got, []string{nameA, nameB}) {
		t.Fatalf("subscribed to %v after pod b joined", got)
	}
	time.Sleep(300 * time.Millisecond)
	chat(t, nameB, prompt+" Twice.")
	eventually(t, "pod b's blocks are indexed", func() bool { return r.Index().Blocks(nameB) > 0 })

	// Pod a leaves: its subscription and its index entries go.
	step(b)
	if got := subscribed(); !slices.Equal(got, []string{nameB}) {
		t.Fatalf("subscribed to %v after pod a left", got)
	}
	if n := r.Index().Blocks(nameA); n != 0 {
		t.Fatalf("pod a left but %d of its blocks are still indexed", n)
	}
	if r.Index().Blocks(nameB) == 0 {
		t.Fatal("pod b's blocks went with pod a")
	}
	var names []string
	for _, w := range pool.Workers() {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, []string{nameB}) {
		t.Fatalf("pool = %v, want only pod b", names)
	}
}

func TestFeedRunClosesSubscriptionsWhenDone(t *testing.T) {
	ws, _ := ParseWorkers([]string{"http://127.0.0.1:1"})
	ws[0].Events = "tcp://127.0.0.1:1" // nothing listens: the dial keeps retrying
	r := NewRouter(NewPool(ws), &RoundRobin{}, Config{})
	feed := NewFeed(r, t.Logf)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { feed.Run(ctx, clock.Real); close(done) }()
	eventually(t, "the worker is subscribed to", func() bool { return len(feed.Subscribed()) == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n := len(feed.Subscribed()); n != 0 {
		t.Fatalf("%d subscriptions left open", n)
	}
}
