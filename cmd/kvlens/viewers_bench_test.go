package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkNonReadingViewers runs a real `kvlens serve` (built from this
// tree, recording off, the default simulated fleet and load running) and
// opens 1,000 websockets over loopback that never read, beside one viewer
// that reads. It reports how long the silent ones stayed (drop-max-s, from
// the server's kvlens_web_viewer_drops_total), the reader's gaps between
// 1 Hz chart frames (gap-p99-s, gap-max-s), and the server's RSS from
// /proc before, at the peak and after (rss-*-MB, rss-back-s: how long after
// the last drop RSS came back within 20 MB of the start).
//
// "max-viewers=1001" lets all of them in; "max-viewers=default" shows the
// default cap refusing the surplus (refused). All come from one address, so
// every case lifts --max-viewers-per-address out of the way.
//
//	go test -run '^$' -bench BenchmarkNonReadingViewers -benchtime 1x ./cmd/kvlens
func BenchmarkNonReadingViewers(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "kvlens")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, bc := range []struct {
		name string
		args []string
	}{
		// The load stopped, so the server's RSS moves with the viewers alone.
		{"load=off/max-viewers=1001", []string{"--no-start", "--max-viewers", "1001", "--max-viewers-per-address", "1001"}},
		{"load=off/max-viewers=default", []string{"--no-start", "--max-viewers-per-address", "1001"}},
		// The demo's load running: its heap grows by itself (GOGC=400, the
		// history filling), so RSS is not compared with the start.
		{"load=on/max-viewers=1001", []string{"--max-viewers", "1001", "--max-viewers-per-address", "1001"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				nonReadingViewers(b, bin, bc.args)
			}
		})
	}
}

const silentViewers = 1000

func nonReadingViewers(b *testing.B, bin string, args []string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := b.TempDir()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--db", filepath.Join(dir, "kvlens.db"), "--record=false"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}()
	base := "http://" + addr
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := scrape(base); err == nil {
			break
		}
		if time.Now().After(end) {
			b.Fatal("kvlens serve did not answer /metrics within 30 s")
		}
	}

	// The reader notes when each chart frame (a JSON snapshot, one a
	// second) arrives.
	wsURL := "ws://" + addr + "/ws"
	rd, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var arrivals []time.Time
	readerDone := make(chan error, 1)
	go func() {
		for {
			_, msg, err := rd.ReadMessage()
			if err != nil {
				readerDone <- err
				return
			}
			if strings.HasPrefix(string(msg), `{"type":"snapshot"`) {
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				mu.Unlock()
			}
		}
	}()
	time.Sleep(3 * time.Second) // past start-up
	pid := cmd.Process.Pid
	rss0 := rssMB(b, pid)

	b.ResetTimer()
	start := time.Now()
	connected := make([]time.Time, 0, silentViewers)
	refused := 0
	var silent []*websocket.Conn
	for range silentViewers {
		c, resp, err := websocket.DefaultDialer.Dial(wsURL, nil)
		if err != nil {
			if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
				refused++
				continue
			}
			b.Fatalf("viewer %d: %v", len(connected), err)
		}
		connected = append(connected, time.Now())
		silent = append(silent, c) // never read
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()

	// Poll the server's own counts until every silent viewer is gone; the
	// hub drops them in the order they came (one idle timeout each), so
	// the k-th drop is the k-th viewer's.
	var droppedAt []time.Time
	peak := rss0
	for end := time.Now().Add(90 * time.Second); len(droppedAt) < len(connected); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			b.Fatalf("%d of %d silent viewers still connected after 90 s", len(connected)-len(droppedAt), len(connected))
		}
		m, err := scrape(base)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		n := int(m[`kvlens_web_viewer_drops_total{reason="idle"}`] + m[`kvlens_web_viewer_drops_total{reason="backlog"}`] + m[`kvlens_web_viewer_drops_total{reason="write_error"}`])
		for len(droppedAt) < min(n, len(connected)) {
			droppedAt = append(droppedAt, now)
		}
		peak = max(peak, rssMB(b, pid))
	}
	lastDrop := time.Now()
	var stay time.Duration
	for i, at := range droppedAt {
		stay = max(stay, at.Sub(connected[i]))
	}
	// The Go runtime hands freed memory back to the kernel gradually.
	rss := rssMB(b, pid)
	for end := time.Now().Add(30 * time.Second); rss > rss0+20 && time.Now().Before(end); time.Sleep(time.Second) {
		rss = rssMB(b, pid)
	}
	back := time.Since(lastDrop)
	time.Sleep(2 * time.Second) // a last gap for the reader after the drops
	b.StopTimer()

	m, err := scrape(base)
	if err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	var gaps []float64
	var worstAt time.Duration // when the longest gap ended, after the first dial
	for i := 1; i < len(arrivals); i++ {
		if arrivals[i].After(start) {
			g := arrivals[i].Sub(arrivals[i-1]).Seconds()
			if len(gaps) == 0 || g > slices.Max(gaps) {
				worstAt = arrivals[i].Sub(start)
			}
			gaps = append(gaps, g)
		}
	}
	mu.Unlock()
	select {
	case err := <-readerDone:
		b.Fatalf("the reading viewer was disconnected: %v", err)
	default:
	}
	if len(gaps) == 0 {
		b.Fatal("the reading viewer got no frames")
	}
	slices.Sort(gaps)
	b.ReportMetric(float64(len(connected)), "admitted")
	b.ReportMetric(float64(refused), "refused")
	b.ReportMetric(m[`kvlens_web_viewer_drops_total{reason="idle"}`], "idle-drops")
	b.ReportMetric(m[`kvlens_web_viewer_drops_total{reason="backlog"}`]+m[`kvlens_web_viewer_drops_total{reason="write_error"}`], "other-drops")
	b.ReportMetric(stay.Seconds(), "drop-max-s")
	b.ReportMetric(gaps[len(gaps)*99/100], "gap-p99-s")
	b.ReportMetric(gaps[len(gaps)-1], "gap-max-s")
	b.ReportMetric(worstAt.Seconds(), "gap-max-at-s")
	b.ReportMetric(connected[len(connected)-1].Sub(start).Seconds(), "dial-s")
	b.ReportMetric(float64(len(gaps)), "frames")
	b.ReportMetric(rss0, "rss-start-MB")
	b.ReportMetric(peak, "rss-peak-MB")
	b.ReportMetric(rss, "rss-end-MB")
	b.ReportMetric(back.Seconds(), "rss-back-s")
	rd.Close()
}

// scrape returns /metrics' unlabelled and labelled samples by their text.
func scrape(base string) (map[string]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// rssMB reads a process's resident set size from /proc, in MB.
func rssMB(b *testing.B, pid int) float64 {
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(f), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1000
		}
	}
	b.Fatal("no VmRSS in /proc status")
	return 0
}
