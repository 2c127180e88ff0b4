package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serverEnv, when set, makes the test binary a streaming server instead: the
// overhead benchmark runs it in a child process, so that the server's CPU is
// not counted in the load generator's rusage.
const serverEnv = "KVLENS_LOADGEN_TEST_SERVER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(serverEnv); spec != "" {
		serveForBenchmark(spec)
		return
	}
	os.Exit(m.Run())
}

// serveForBenchmark serves streams of "tokens,itl" (e.g. "200,25ms"), or
// the accuracy streams with "accuracy,k" (k tokens a chunk), prints its
// address, and exits when stdin closes. In accuracy mode it prints, for each
// stream, a line "key firstFrom firstTo last" of wall-clock nanoseconds: when
// the first chunk's write began and its flush returned, and when the last
// chunk's flush returned. Paths under /warm/ get one token at once.
func serveForBenchmark(spec string) {
	if k, ok := strings.CutPrefix(spec, "accuracy,"); ok {
		perChunk, _ := strconv.Atoi(k)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil || perChunk < 1 {
			fmt.Println("error", spec, err)
			os.Exit(1)
		}
		fmt.Println(ln.Addr())
		var mu sync.Mutex
		out := bufio.NewWriter(os.Stdout)
		written := func(key string, firstFrom, firstTo, last time.Time) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(out, "%q %d %d %d\n", key, firstFrom.UnixNano(), firstTo.UnixNano(), last.UnixNano())
			out.Flush()
		}
		go http.Serve(ln, streamServer(func(r *http.Request) streamSpec {
			if strings.HasPrefix(r.URL.Path, "/warm/") {
				return streamSpec{tokens: 1, perChunk: 1}
			}
			return streamSpec{ttft: accTTFT, itl: accITL, tokens: accTokens, perChunk: perChunk, written: written}
		}))
		bufio.NewReader(os.Stdin).ReadByte()
		return
	}
	ts, ds, _ := strings.Cut(spec, ",")
	tokens, err1 := strconv.Atoi(ts)
	itl, err2 := time.ParseDuration(ds)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err = errors.Join(err1, err2, err); err != nil {
		fmt.Println("error", spec, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	go http.Serve(ln, streamServer(func(*http.Request) streamSpec {
		return streamSpec{ttft: itl, itl: itl, tokens: tokens, perChunk: 1}
	}))
	bufio.NewReader(os.Stdin).ReadByte()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClientOverhead runs 500 conversations that stream 20,000 tokens/s
// in all (each answer 200 tokens at 25 ms) from a server in a child process,
// and reports the load generator's CPU: go test -run '^$' -bench ClientOverhead -benchtime 1x ./loadgen
func BenchmarkClientOverhead(b *testing.B) {
	const (
		convs   = 500
		tokens  = 200
		itl     = 25 * time.Millisecond
		warmup  = 7 * time.Second
		measure = 10 * time.Second
	)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%v", serverEnv, tokens, itl))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.HasPrefix(addr, "error") {
		b.Fatalf("test server: %q, %v", addr, err)
	}
	for range b.N {
		cfg := DefaultConfig()
		cfg.Concurrency = convs
		cfg.StartRate = 100 // 500 starts over 5 s, so turns do not end in lockstep
		cfg.MaxTokens = tokens
		cfg.Turns = UniformTurns(5, 5)
		cfg.Starters = BuiltinStarters()
		g, err := New(NewOpenAIClient("http://"+strings.TrimSpace(addr)+"/v1", "m", ""), cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		g.Start()
		time.Sleep(warmup)
		g.Reset()
		cpu0, wall0 := cpuTime(), time.Now()
		time.Sleep(measure)
		cpu, wall := cpuTime()-cpu0, time.Since(wall0)
		s := g.Snapshot()
		g.Stop()
		cores := cpu.Seconds() / wall.Seconds()
		b.ReportMetric(cores, "cores")
		b.ReportMetric(s.Window.OutputTokensPerSec, "tokens/s")
		b.ReportMetric(cores/(s.Window.OutputTokensPerSec/1000), "cores_per_1k_tok/s")
		b.ReportMetric(float64(s.Live), "conversations")
		if s.Window.Errors > 0 {
			b.Errorf("%d errors: %v", s.Window.Errors, s.Window.ErrorsByClass)
		}
	}
}

// childServer starts the test binary as a server with spec and returns its
// address, its stdout after the address line, and a stop function.
func childServer(tb testing.TB, spec string) (addr string, out *bufio.Reader, stop func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+spec)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	out = bufio.NewReader(stdout)
	addr, err := out.ReadString('\n')
	if err != nil || strings.HasPrefix(addr, "error") {
		tb.Fatalf("test server: %q, %v", addr, err)
	}
	return strings.TrimSpace(addr), out, func() { stdin.Close(); cmd.Wait() }
}

// BenchmarkAccuracy500StreamsServerApart is BenchmarkAccuracy500Streams with
// the server in a child process, so that the load generator's scheduling is
// not disturbed by the server's own 25,000 writes a second. The truth is the
// server's wall-clock flush times, compared with the client's wall-clock
// send time plus its measured TTFT (both processes read the same kernel
// clock): go test -run '^$' -bench Accuracy500StreamsServerApart -benchtime 1x ./loadgen
func BenchmarkAccuracy500StreamsServerApart(b *testing.B) {
	const n = 500
	for _, perChunk := range []int{1, 3} {
		b.Run(fmt.Sprintf("tokens_per_chunk=%d", perChunk), func(b *testing.B) {
			addr, out, stop := childServer(b, fmt.Sprintf("accuracy,%d", perChunk))
			defer stop()
			flushed := make(chan [4]string, n)
			go func() {
				for {
					line, err := out.ReadString('\n')
					if err != nil {
						return
					}
					var key string
					var a, c, d int64
					if _, err := fmt.Sscanf(line, "%q %d %d %d", &key, &a, &c, &d); err == nil {
						flushed <- [4]string{key, fmt.Sprint(a), fmt.Sprint(c), fmt.Sprint(d)}
					}
				}
			}()
			for range b.N {
				c := NewOpenAIClient("http://"+addr+"/v1", "m", "")
				warm := NewOpenAIClient("http://"+addr+"/warm/v1", "m", "")
				warm.http = c.http // open the connections c will reuse
				runStreams(warm, n, 0)
				results := runStreams(c, n, 100*time.Millisecond)
				truth := map[string][3]int64{}
				for len(truth) < n {
					select {
					case f := <-flushed:
						var t [3]int64
						for i := range 3 {
							t[i], _ = strconv.ParseInt(f[i+1], 10, 64)
						}
						truth[f[0]] = t
					case <-time.After(5 * time.Second):
						b.Fatalf("only %d of %d flush records", len(truth), n)
					}
				}
				var ttftErr, itlErr, late []time.Duration
				for i, r := range results {
					if r.Err != nil || r.OSL != accTokens {
						b.Fatalf("request %d: OSL %d, %v", i, r.OSL, r.Err)
					}
					f := truth[fmt.Sprint("stream ", i)]
					got := r.Start.Add(r.TTFT).UnixNano()
					switch {
					case got < f[0]:
						ttftErr = append(ttftErr, time.Duration(got-f[0]))
					case got > f[1]:
						ttftErr = append(ttftErr, time.Duration(got-f[1]))
					default:
						ttftErr = append(ttftErr, 0)
					}
					tpot, _ := r.TPOT()
					itlErr = append(itlErr, tpot-time.Duration(f[2]-f[1])/time.Duration(accTokens-perChunk))
					late = append(late, time.Duration(f[0]-r.Start.UnixNano())-accTTFT)
				}
				b.ReportMetric(float64(p99Abs(ttftErr))/1e6, "ttft_p99_err_ms")
				b.ReportMetric(float64(p99Abs(itlErr))/1e6, "itl_p99_err_ms")
				b.ReportMetric(float64(p99Abs(late))/1e6, "server_late_p99_ms")
			}
		})
	}
}
