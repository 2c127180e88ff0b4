package baselines

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kvlens/kvlens/clock"
)

// SwitchCommand runs command with sh -c to change an external router's mode,
// for example a kubectl patch of a DynamoGraphDeployment's DYN_ROUTER_MODE.
// Every {mode} in the command becomes mode, which is also in the environment
// as KVLENS_MODE. The command's output goes to out. It inherits the
// environment, so a command that switches another kvlens's router through
// its admin API can send "Authorization: Bearer $KVLENS_CONTROL_TOKEN", which
// that API requires from other machines.
func SwitchCommand(ctx context.Context, command, mode string, out io.Writer) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(command, "{mode}", mode))
	cmd.Env = append(os.Environ(), "KVLENS_MODE="+mode)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mode switch command for %s: %w", mode, err)
	}
	return nil
}

// WaitReady polls GET base/models (base is an OpenAI base URL ending in /v1)
// every poll until it answers 200, or fails after timeout.
func WaitReady(ctx context.Context, clk clock.Clock, base string, poll, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := strings.TrimSuffix(base, "/") + "/models"
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("readiness check: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else if ctx.Err() == nil || last == "" {
			// A poll cut short by the deadline says nothing about the
			// target; the answer before it does.
			last = err.Error()
		}
		if err := sleep(ctx, clk, poll); err != nil {
			return fmt.Errorf("%s not ready after %v (last answer: %s)", url, timeout, last)
		}
	}
}
