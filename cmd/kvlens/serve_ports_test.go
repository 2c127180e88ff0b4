package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/internal/testport"
)

func TestSimPortsFlag(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	// free is a port nothing held a moment ago, for the range that must
	// not be the one in use.
	free := testport.Free(t, 1)
	tests := []struct {
		name     string
		args     []string
		wantExit int
		want     string // on the first line
	}{
		{"a port past 65535 is a usage error", []string{"--sim-ports", "70000"}, 2, `port "70000" is not a number from 1 to 65535`},
		{"ports that run past 65535 for the fleet are a usage error", []string{"--sim-ports", "65532"}, 2, "--sim-ports: sim: 3 workers' event ports from 65535 run past 65535"},
		{"overlapping HTTP and event ports are a usage error", []string{"--sim-ports", "9001,9002"}, 2, "overlap"},
		{"--sim-ports with real workers is a usage error", []string{"--sim-ports", "9001", "--workers", "http://127.0.0.1:1"}, 2, "drop one of them"},
		{"a worker's port in use names the port and the flag", []string{"--sim-ports", fmt.Sprintf("%d,%d", taken, free), "--sim-workers", "1"}, 1, fmt.Sprintf("--sim-ports %d,%d: sim: port %d for worker 0 is already in use", taken, free, taken)},
		{"an event port in use names the port and the flag", []string{"--sim-ports", fmt.Sprintf("%d,%d", free, taken), "--sim-workers", "1"}, 1, fmt.Sprintf("sim: event port %d for worker 0 is already in use", taken)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A kvlens that starts after all is stopped rather than left serving.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append([]string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "k.db"), "--record=false"}, tt.args...)
			cmd := kvlens(args...)
			cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
			cmd.Env = kvlens().Env
			out, code := exitCode(t, cmd)
			if code != tt.wantExit {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tt.wantExit, out)
			}
			if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, tt.want) {
				t.Fatalf("first line %q does not say %q", first, tt.want)
			}
		})
	}
}
