package web

import (
	"net/http/httptest"
	"sync"
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
// 1 Hz push rate, as CPU time per second of wall time (cpu-%). The clients
// run in this process too, so the figure over-counts the server's share.
//
//	go test -run '^$' -bench Hub100Browsers -benchtime 10x ./web
func BenchmarkHub100Browsers(b *testing.B) {
	load := &fakeLoad{target: 120, running: true}
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

	const browsers = 100
	var wg sync.WaitGroup
	conns := make([]*websocket.Conn, browsers)
	for i := range conns {
		c, _, err := websocket.DefaultDialer.Dial(wsURL(ts), nil)
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
	b.ResetTimer()
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
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}
