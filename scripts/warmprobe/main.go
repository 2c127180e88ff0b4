// Command warmprobe measures what a visitor would read on a fresh `kvlens
// serve`: it starts the binary on a free port with the given flags, reads
// /api/state at the given times after start and prints each lane's TTFT
// p95, whether its window is settling or warming, and "≥ SLO" for a settled
// one at or above the SLO (lane B's TTFT p95 tile is then red; lane A's
// figure shows in the headline, uncoloured). It also prints
// the process's CPU (user+system, in cores) over the first phase, which is
// the warm-up when there is one. Linux only (/proc).
//
// With -virtual it plays the default demo's two lanes in virtual time
// instead (package simulate: the same generator, router and engines on a
// discrete-event clock, so the host's load plays no part), for the seeds
// given, and prints each lane's TTFT p95 at the same times: how long the
// cold start lasts, whatever the machine.
//
//	go build -o /tmp/kvlens ./cmd/kvlens
//	go run ./scripts/warmprobe -kvlens /tmp/kvlens -- --warm 0
//	go run ./scripts/warmprobe -kvlens /tmp/kvlens              # the default warm-up
//	go run ./scripts/warmprobe -virtual -seeds 1,2,3 -at 30,45,60,90,120,150,180
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kvlens/kvlens/demo"
	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/scripts/internal/getjson"
	"github.com/kvlens/kvlens/simulate"
)

type state struct {
	// Snapshot is lane A's, whose window /api/state reports even while
	// warming.
	Snapshot struct {
		Window struct {
			TTFT struct {
				Count int     `json:"count"`
				P95   float64 `json:"p95"`
			} `json:"ttft"`
		} `json:"window"`
	} `json:"snapshot"`
	Lanes []struct {
		Lane     string `json:"lane"`
		Policy   string `json:"policy"`
		Settling string `json:"settling"`
		Window   *struct {
			TTFT struct {
				Count int     `json:"count"`
				P95   float64 `json:"p95"`
			} `json:"ttft"`
			KVHitRate float64 `json:"kv_hit_rate"`
		} `json:"window"`
	} `json:"lanes"`
	Warmup *struct {
		SecondsLeft float64 `json:"seconds_left"`
		Over        bool    `json:"over"`
		Behind      string  `json:"behind"`
	} `json:"warmup"`
}

func main() {
	bin := flag.String("kvlens", "kvlens", "the kvlens binary")
	at := flag.String("at", "30,45,60,90", "seconds after start at which to read /api/state")
	slo := flag.Float64("slo", 600, "the TTFT SLO, ms")
	virtual := flag.Bool("virtual", false, "play the default demo's lanes in virtual time instead of running kvlens")
	seeds := flag.String("seeds", "1", "with -virtual, the seeds to play, comma-separated")
	flag.Parse()
	var times []time.Duration
	for _, f := range strings.Split(*at, ",") {
		s, err := strconv.ParseFloat(f, 64)
		if err != nil {
			fail("-at %q: %v", *at, err)
		}
		times = append(times, time.Duration(s*float64(time.Second)))
	}
	if *virtual {
		for _, f := range strings.Split(*seeds, ",") {
			seed, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				fail("-seeds %q: %v", *seeds, err)
			}
			if err := playVirtual(seed, times); err != nil {
				fail("%v", err)
			}
		}
		return
	}
	port, err := freePort()
	if err != nil {
		fail("%v", err)
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:" + port, "--db", "", "--record=false"}, flag.Args()...)
	cmd := exec.Command(*bin, args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		fail("start %s: %v", *bin, err)
	}
	start := time.Now()
	defer cmd.Process.Kill()
	go func() {
		// The lines that matter: the warm-up's verdict.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "warm-up") {
				fmt.Printf("%5.1f s  %s\n", time.Since(start).Seconds(), sc.Text())
			}
		}
	}()
	base := "http://127.0.0.1:" + port
	cpu0 := cpuSeconds(cmd.Process.Pid)
	var warmP95 float64 // lane A's window in the warm-up's last reading
	ended := false      // the warm-up ended within the first phase
	for {
		// The warm-up's end, or the first reading, ends the first phase.
		var st state
		err := getjson.Get(base+"/api/state", &st)
		if err == nil && st.Warmup != nil && st.Warmup.Over {
			ended = true
			break
		}
		if err == nil && st.Warmup != nil {
			warmP95 = st.Snapshot.Window.TTFT.P95
		}
		if time.Since(start) >= times[0] {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	phase := time.Since(start)
	fmt.Printf("CPU over the first %.1f s: %.2f cores\n", phase.Seconds(), (cpuSeconds(cmd.Process.Pid)-cpu0)/phase.Seconds())
	if warmP95 > 0 {
		when := "just before the warm-up's end"
		if !ended {
			when = fmt.Sprintf("at %.0f s, the warm-up still playing", phase.Seconds())
		}
		fmt.Printf("lane A's warm window %s: TTFT p95 %.0f ms\n", when, warmP95)
	}
	for _, t := range times {
		time.Sleep(time.Until(start.Add(t)))
		var st state // a fresh one: decoding into an old one keeps fields the new JSON omits
		if err := getjson.Get(base+"/api/state", &st); err != nil {
			fail("read the state at %s: %v", t, err)
		}
		var parts []string
		for _, l := range st.Lanes {
			p := fmt.Sprintf("%s %s: ", strings.ToUpper(l.Lane), l.Policy)
			if l.Window == nil || l.Window.TTFT.Count == 0 {
				p += "—"
			} else {
				p += fmt.Sprintf("TTFT p95 %.0f ms, hit %.0f%%", l.Window.TTFT.P95, 100*l.Window.KVHitRate)
				if l.Settling == "" && l.Window.TTFT.P95 >= *slo {
					p += " ≥ SLO"
				}
			}
			if l.Settling != "" {
				p += " (" + l.Settling + ")"
			}
			parts = append(parts, p)
		}
		fmt.Printf("%5.0f s  %s\n", t.Seconds(), strings.Join(parts, " · "))
	}
}

// playVirtual plays the default demo's lanes, round-robin and kv, from a
// cold start in virtual time, and prints each one's TTFT p95 at times.
func playVirtual(seed uint64, times []time.Duration) error {
	cfg := demo.DefaultConfig()
	load := cfg.Load
	load.SLO = loadgen.SLO{TTFT: cfg.Dashboard.SLOTTFT, TPOT: cfg.Dashboard.SLOTPOT}
	var lanes []*simulate.Pipeline
	for _, policy := range cfg.AB {
		p, err := simulate.New(simulate.Config{Profile: cfg.SimProfile, Workers: cfg.SimWorkers, Policy: policy,
			Router: cfg.Router, Load: load, Seed: seed})
		if err != nil {
			return err
		}
		defer p.Close()
		p.Gen.Start()
		lanes = append(lanes, p)
	}
	for _, t := range times {
		var parts []string
		for i, p := range lanes {
			p.Loop.RunUntil(des.Epoch.Add(t))
			w := p.Gen.Snapshot().Window
			parts = append(parts, fmt.Sprintf("%s %s: TTFT p95 %.0f ms, hit %.0f%%", strings.ToUpper(string(rune('a'+i))), cfg.AB[i], w.TTFT.P95, 100*w.KVHitRate))
		}
		fmt.Printf("seed %d %5.0f s  %s\n", seed, t.Seconds(), strings.Join(parts, " · "))
	}
	return nil
}

// cpuSeconds is the process's user and system time so far.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the whole line, in clock ticks (100 a second).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, nil
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "warmprobe: "+format+"\n", a...)
	os.Exit(1)
}
