package web

import (
	"context"
	"net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/router"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHub100Browsers measures what 100 connected browsers cost at the
// 1 Hz push rate, as CPU time per second of wall time (cpu-%), and what each
// receives, as the frames' bytes (bytes/browser/tick) and the bytes on the
// wire (wire-bytes/browser/tick): plain, and with the permessage-deflate
// that browsers ask for. The clients run in this process too, so the CPU
// figure over-counts the server's share.
//
//	go test -run '^$' -bench Hub100Browsers -benchtime 10x ./web
func BenchmarkHub100Browsers(b *testing.B) {
	for _, deflate := range []bool{false, true} {
		name := "plain"
		if deflate {
			name = "deflate"
		}
		b.Run(name, func(b *testing.B) { benchmarkHub(b, 100, deflate) })
	}
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func benchmarkHub(b *testing.B, browsers int, deflate bool) {
	load := &fakeLoad{target: 120}
	load.snap.Window = loadgen.Stats{
		TTFT:       loadgen.Quantiles{Count: 900, P50: 250, P95: 580, P99: 700, Mean: 300},
		TPOT:       loadgen.Quantiles{Count: 800, P50: 30, P95: 45, P99: 50, Mean: 32},
		E2E:        loadgen.Quantiles{Count: 800, P50: 9000, P95: 20000},
		InterChunk: loadgen.Quantiles{Count: 9000, P50: 30, P95: 45},
		Covered:    time.Minute, Completed: 900, Good: 800, GoodputPerSec: 13, RequestsPerSec: 15, OutputTokensPerSec: 2800, KVHitRate: 0.8,
	}
	load.snap.Workers = map[string]loadgen.Stats{}
	rt := newFakeRouter("kv")
	opts := testOptions()
	opts.GaugeSource = "test"
	gauges := map[string]Gauge{}
	opts.Gauges = func() map[string]Gauge { return gauges }
	for _, name := range []string{"sim-0", "sim-1", "sim-2"} {
		rt.workers = append(rt.workers, router.WorkerState{Name: name, Healthy: true, InFlight: 40, Capacity: 64})
		load.snap.Workers[name] = loadgen.Stats{Completed: 300, KVHitRate: 0.8}
		gauges[name] = Gauge{Queued: 2, KVUsage: 0.4}
	}
	s := New(load, rt, opts)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	var wire atomic.Int64
	dialer := websocket.Dialer{
		EnableCompression: deflate,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &wire}, nil
		},
	}
	var wg sync.WaitGroup
	conns := make([]*websocket.Conn, browsers)
	for i := range conns {
		c, _, err := dialer.Dial(wsURL(ts), nil)
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
	}
	for s.Hub().Clients() < browsers {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the hello frames
	b.ResetTimer()
	wire0 := wire.Load()
	start, cpu0 := time.Now(), cpuTime()
	sent := 0
	for range b.N { // one b.N is one tick, as the hub's Run does each second
		frames := s.frames()
		for _, f := range frames {
			sent += len(f)
		}
		s.Hub().broadcast(frames)
		time.Sleep(tickEvery)
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/tick")
	b.ReportMetric(float64(sent)/float64(b.N), "bytes/browser/tick")
	b.ReportMetric(float64(wire.Load()-wire0)/float64(b.N)/float64(browsers), "wire-bytes/browser/tick")
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}
