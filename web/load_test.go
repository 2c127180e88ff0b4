package web

import (
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kvlens/kvlens/loadgen"
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
		TTFT: loadgen.Quantiles{Count: 900, P50: 250, P95: 580, P99: 700, Mean: 300},
		TPOT: loadgen.Quantiles{Count: 800, P50: 30, P95: 45, P99: 50, Mean: 32},
	}
	s := New(load, newFakeRouter("round_robin"), testOptions())
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
	for range b.N { // one b.N is one tick, as the hub's Run does each second
		s.Hub().broadcast(s.frames())
		time.Sleep(tickEvery)
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/tick")
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}
