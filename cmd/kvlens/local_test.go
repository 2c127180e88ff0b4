package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/kvlens/kvlens/internal/testport"
)

// TestThreeWorkerScript runs the README's worked example: three `kvlens sim`
// processes and `kvlens serve`, and checks that requests are routed to every
// worker and that every worker's KV events reach the router's index across
// process boundaries.
func TestThreeWorkerScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	httpBase, eventsBase, dash := testport.Free(t, 3), testport.Free(t, 3), testport.Free(t, 1)
	cmd := exec.Command("bash", "../../deploy/local/three-workers.sh")
	cmd.Env = append(os.Environ(),
		"KVLENS="+os.Args[0], "KVLENS_RUN_MAIN=1", // this test binary is kvlens
		fmt.Sprintf("KVLENS_ADDR=127.0.0.1:%d", dash),
		fmt.Sprintf("HTTP_BASE=%d", httpBase), fmt.Sprintf("EVENTS_BASE=%d", eventsBase),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever happens, nothing is left behind

	type worker struct {
		Name           string `json:"name"`
		Healthy        bool   `json:"healthy"`
		RequestsRouted int    `json:"requests_routed"`
		IndexedBlocks  int    `json:"indexed_blocks"`
	}
	var state struct {
		Workers []worker `json:"workers"`
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/admin/router/workers", dash)
	deadline := time.Now().Add(40 * time.Second)
	for {
		ready := false
		if resp, err := http.Get(url); err == nil {
			json.NewDecoder(resp.Body).Decode(&state)
			resp.Body.Close()
			ready = len(state.Workers) == 3
			for _, w := range state.Workers {
				ready = ready && w.Healthy && w.RequestsRouted > 0 && w.IndexedBlocks > 0
			}
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 40 s the router sees %+v; want 3 healthy workers, each routed to and indexed from its KV events", state.Workers)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("router state: %+v", state.Workers)

	// Ctrl-C on the script stops all four processes.
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the script did not stop within 10 s of SIGTERM")
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	for _, port := range []int{httpBase, httpBase + 1, httpBase + 2, dash} {
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			t.Errorf("port %d still in use after the script stopped: %v", port, err)
		} else {
			l.Close()
		}
	}
}
