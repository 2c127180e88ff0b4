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

// serveForBenchmark serves streams of "tokens,itl" (e.g. "200,25ms"), prints
// its address, and exits when stdin closes.
func serveForBenchmark(spec string) {
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
