package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvlens/kvlens/internal/testport"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tokenizer"
)

// BenchmarkOversizedRequests measures the peak memory of real `kvlens
// serve` and `kvlens sim` processes while a hostile client sends bursts of
// 32 parallel requests at the size limit and just over it, over loopback,
// through the router and straight to the worker. It reports each process's
// resident memory at idle and its peak (VmHWM), in MB, and fails if a peak
// passes 300 MB. It builds the binary, and stops both processes when done.
//
//	go test -run '^$' -bench BenchmarkOversizedRequests -benchtime 1x ./cmd/kvlens
func BenchmarkOversizedRequests(b *testing.B) {
	const (
		parallel = 32
		peakMB   = 300 // the most either process may reach
	)
	dir := b.TempDir()
	bin := filepath.Join(dir, "kvlens")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build kvlens: %v\n%s", err, out)
	}
	limit := sim.MustProfile(sim.DefaultProfile).MaxModelLen
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: parallel}, Timeout: 5 * time.Minute}
	cap := tokenizer.BodyLimit(limit)
	// chat is a chat request body of one user message, padded with spaces
	// after the message (JSON allows them) to exactly size bytes if size > 0.
	chat := func(content string, size int64) []byte {
		body, _ := json.Marshal(map[string]any{"model": sim.DefaultModel, "max_tokens": 1, "messages": []tokenizer.Message{{Role: "user", Content: content}}})
		if size > int64(len(body)) {
			body = append(body[:len(body)-1], append(bytes.Repeat([]byte(" "), int(size)-len(body)), '}')...)
		}
		return body
	}
	prose := func(n int) string { return strings.Repeat("cache ", n) }
	bursts := []struct {
		name    string
		body    []byte
		chunked bool // sent without Content-Length, so the server reads up to its cap
		want    int
	}{
		// Prose of exactly the body cap: over the limit by its tokens, refused
		// once tokenizing passes it.
		{"prose at the body cap", chat(prose(int(cap/6)-100), cap), false, http.StatusBadRequest},
		// Spaces just within the byte bound: one piece the BPE cannot split,
		// 2 MiB long, tokenized whole before it is found too long.
		{"spaces at the byte bound", chat(strings.Repeat(" ", limit*tokenizer.MaxTokenBytes-40), 0), false, http.StatusBadRequest},
		// A prompt just within the limit, served.
		{"prose at the token limit", chat(prose(limit-40), 0), false, http.StatusOK},
		// One byte over the cap, with no Content-Length: read to the cap.
		{"one byte over the body cap", chat(prose(int(cap/6)-100), cap+1), true, http.StatusRequestEntityTooLarge},
		// Empty messages filling the body cap: cheap bytes that cost some
		// 390 bytes each to decode, refused on their count before that.
		{"empty messages at the body cap", []byte(`{"max_tokens":1,"messages":[` + strings.TrimSuffix(strings.Repeat("{},", int(cap)/3-20), ",") + `]}`), false, http.StatusBadRequest},
		// What the hostile visitor sent: 8 MiB, refused on its
		// Content-Length before it is read.
		{"8 MiB of prose", chat(prose(8<<20/6), 0), false, http.StatusRequestEntityTooLarge},
	}
	type result struct{ idle, peak float64 } // MB
	worst := map[string]*result{"serve": {}, "sim": {}}
	b.ResetTimer()
	for range b.N {
		for _, target := range []string{"serve", "sim"} {
			for _, burst := range bursts {
				// Fresh processes for each burst, so that each peak is its own.
				b.StopTimer()
				f := startPair(b, bin, dir, client)
				idle := map[string]procMem{"serve": memOf(b, f.serve), "sim": memOf(b, f.sim)}
				url := map[string]string{"serve": f.serveURL, "sim": f.simURL}[target]
				b.StartTimer()
				codes := map[int]int{}
				var mu sync.Mutex
				var wg sync.WaitGroup
				t0 := time.Now()
				for range parallel {
					wg.Go(func() {
						code, err := send(client, url, burst.body, burst.chunked)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							code = -1
						}
						codes[code]++
					})
				}
				wg.Wait()
				took := time.Since(t0)
				b.StopTimer()
				if codes[burst.want] != parallel {
					b.Errorf("to %s, %s: statuses %v, want %d × %d", target, burst.name, codes, parallel, burst.want)
				}
				// Both processes still serve.
				for _, u := range []string{f.serveURL, f.simURL} {
					if code, err := send(client, u, chat("hi", 0), false); err != nil || code != http.StatusOK {
						b.Errorf("%s after the burst: %d %v", u, code, err)
					}
				}
				line := fmt.Sprintf("to %s, %d × %s (%d bytes): %v, statuses %v;", target, parallel, burst.name, len(burst.body), took.Round(time.Millisecond), codes)
				for _, p := range []struct {
					name string
					cmd  *exec.Cmd
				}{{"serve", f.serve}, {"sim", f.sim}} {
					m := memOf(b, p.cmd)
					line += fmt.Sprintf(" %s idle %.1f MB, peak %.1f MB, after %.1f MB;", p.name, idle[p.name].rss, m.hwm, m.rss)
					worst[p.name].idle = max(worst[p.name].idle, idle[p.name].rss)
					worst[p.name].peak = max(worst[p.name].peak, m.hwm)
				}
				b.Log(line)
				f.stop()
				b.StartTimer()
			}
		}
	}
	b.StopTimer()
	for _, name := range []string{"serve", "sim"} {
		b.ReportMetric(worst[name].idle, name+"-idle-MB")
		b.ReportMetric(worst[name].peak, name+"-peak-MB")
		if worst[name].peak > peakMB {
			b.Errorf("%s peaked at %.1f MB, over %d MB", name, worst[name].peak, peakMB)
		}
	}
}

// pair is a `kvlens sim` worker and a `kvlens serve` routing to it.
type pair struct {
	serve, sim       *exec.Cmd
	serveURL, simURL string
}

func (p pair) stop() { stop(p.serve); stop(p.sim) }

// startPair starts a worker and a router over it, and returns once the
// router has learned the worker's max_model_len.
func startPair(b *testing.B, bin, dir string, client *http.Client) pair {
	b.Helper()
	simPort, servePort := testport.Free(b, 1), testport.Free(b, 1)
	p := pair{simURL: fmt.Sprintf("http://127.0.0.1:%d", simPort), serveURL: fmt.Sprintf("http://127.0.0.1:%d", servePort)}
	// A worker 100 times faster than the profile, so the requests it serves
	// at the limit finish in moments.
	p.sim = start(b, bin, "sim", "--count", "1", "--ports", strconv.Itoa(simPort), "--slowdown", "0.01")
	p.serve = start(b, bin, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", servePort), "--workers", p.simURL,
		"--no-start", "--record=false", "--db", filepath.Join(dir, "kvlens.db"), "--open-controls")
	waitOK(b, p.simURL+"/v1/models")
	waitOK(b, p.serveURL+"/v1/models")
	// The router only refuses by the worker's limit once it has learned
	// it: until then a body just over the worker's cap is within the
	// default's.
	over, _ := json.Marshal(map[string]any{"messages": []tokenizer.Message{{Role: "user", Content: strings.Repeat("x", int(tokenizer.BodyLimit(sim.MustProfile(sim.DefaultProfile).MaxModelLen)))}}})
	for deadline := time.Now().Add(20 * time.Second); ; {
		if code, _ := send(client, p.serveURL, over, false); code == http.StatusRequestEntityTooLarge {
			return p
		}
		if time.Now().After(deadline) {
			p.stop()
			b.Fatal("after 20 s the router still does not refuse a body over the worker's cap")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// send posts body to url's /v1/chat/completions and returns the status.
func send(client *http.Client, url string, body []byte, chunked bool) (int, error) {
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length
	}
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// procMem is a process's resident memory now (VmRSS) and at its peak
// (VmHWM), in MB.
type procMem struct{ rss, hwm float64 }

var statusKB = regexp.MustCompile(`(?m)^(VmRSS|VmHWM):\s+(\d+) kB`)

func memOf(b *testing.B, cmd *exec.Cmd) procMem {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Fatalf("read memory of %s: %v", cmd.Args[1], err)
	}
	var m procMem
	for _, f := range statusKB.FindAllStringSubmatch(string(raw), -1) {
		kb, _ := strconv.ParseFloat(f[2], 64)
		if f[1] == "VmRSS" {
			m.rss = kb / 1000
		} else {
			m.hwm = kb / 1000
		}
	}
	return m
}

// start runs bin with args in its own process group, its output logged.
func start(b *testing.B, bin string, args ...string) *exec.Cmd {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+b.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, "error") && !strings.Contains(line, "conversations") {
				fmt.Fprintf(os.Stderr, "%s: %s\n", args[0], line)
			}
		}
	}()
	return cmd
}

// stop kills cmd's process group and waits for it.
func stop(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
}
