package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kvlens/kvlens/access"
	"github.com/kvlens/kvlens/demo"
)

func TestServeAccessLines(t *testing.T) {
	hosts, err := access.NewHosts("booth.example")
	if err != nil {
		t.Fatal(err)
	}
	answers := "dashboard answers to localhost, 127.0.0.1, [::1], booth.example (add names with --allow-host)"
	tests := []struct {
		name   string
		rule   access.Rule
		source string
		want   []string
	}{
		{"open controls say so and print no token", access.Rule{Open: true, Hosts: hosts}, "", []string{
			"controls are open: every browser that reaches the dashboard may change the demo (--open-controls)",
			answers,
		}},
		{"a generated token is printed, with where to set one", access.Rule{Token: "0123abcd", Hosts: hosts}, generated, []string{
			"browsers on this machine are operators; other browsers enter the operator token, scripts send Authorization: Bearer <token>",
			"operator token 0123abcd (generated at start; set one with --control-token-file or $KVLENS_CONTROL_TOKEN)",
			answers,
		}},
		{"a token from the environment is named, never printed", access.Rule{Token: "from-secret", Hosts: hosts}, "$KVLENS_CONTROL_TOKEN", []string{
			"browsers on this machine are operators; other browsers enter the operator token, scripts send Authorization: Bearer <token>",
			"operator token from $KVLENS_CONTROL_TOKEN",
			answers,
		}},
		{"a loopback viewer is told this machine needs the token too", access.Rule{Token: "kiosk-secret", LoopbackViewer: true, Hosts: hosts}, "--control-token-file /run/secrets/token", []string{
			"every browser needs the operator token, this machine's too (--loopback-viewer); scripts send Authorization: Bearer <token>",
			"operator token from --control-token-file /run/secrets/token",
			answers,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := serveAccessLines(tt.rule, tt.source)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tt.source != generated && tt.rule.Token != "" && strings.Contains(strings.Join(got, "\n"), tt.rule.Token) {
				t.Fatal("a token kvlens did not generate was printed")
			}
		})
	}
}

func TestServeRuleSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == access.TokenEnv {
			return "from-env"
		}
		return ""
	}
	noEnv := func(string) string { return "" }
	tests := []struct {
		name       string
		args       []string
		getenv     func(string) string
		wantToken  string // "?" means any generated token
		wantSource string
		wantOpen   bool
		wantErr    string
	}{
		{"the environment gives the token", nil, env, "from-env", "$KVLENS_CONTROL_TOKEN", false, ""},
		{"a token file wins over the environment", []string{"--control-token-file", file}, env, "from-file", "--control-token-file " + file, false, ""},
		{"with no source a token is generated", nil, noEnv, "?", generated, false, ""},
		{"open controls read no token", []string{"--open-controls"}, env, "", "", true, ""},
		{"a loopback viewer keeps the token", []string{"--loopback-viewer", "--control-token", "x"}, noEnv, "x", "--control-token", false, ""},

		// Sad path.
		{"the flag and the file together are refused", []string{"--control-token", "x", "--control-token-file", file}, noEnv, "", "", false, "not both"},
		{"a missing token file is refused", []string{"--control-token-file", file + ".missing"}, env, "", "", false, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := demo.DefaultConfig()
			var acc accessFlags
			if err := serveFlags(&cfg, &acc, io.Discard).Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			rule, source, err := acc.serveRule(tt.getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantToken == "?" {
				if len(rule.Token) != 16 {
					t.Fatalf("generated token %q, want 16 hex digits", rule.Token)
				}
			} else if rule.Token != tt.wantToken {
				t.Fatalf("token %q, want %q", rule.Token, tt.wantToken)
			}
			if source != tt.wantSource || rule.Open != tt.wantOpen {
				t.Fatalf("source %q open %v, want %q %v", source, rule.Open, tt.wantSource, tt.wantOpen)
			}
		})
	}
}

func TestAllowHostFlag(t *testing.T) {
	cfg := demo.DefaultConfig()
	var acc accessFlags
	fs := serveFlags(&cfg, &acc, io.Discard)
	if err := fs.Parse([]string{"--allow-host", "a.example,b.example:8080", "--allow-host=c.example"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(acc.allowHosts, " "); got != "a.example b.example:8080 c.example" {
		t.Fatalf("allow-host = %s", got)
	}
	// Sad path: a value that is no host name stops the start.
	fs = serveFlags(&cfg, &acc, io.Discard)
	if err := fs.Parse([]string{"--allow-host", "evil.example/x"}); err == nil || !strings.Contains(err.Error(), "want a name or address") {
		t.Fatalf("err = %v", err)
	}
}

func TestSimAccessLine(t *testing.T) {
	tests := []struct{ name, source, want string }{
		{"without a token faults change from this machine only", "", "fault changes (PUT /admin/faults) only from this machine: set $KVLENS_CONTROL_TOKEN or --control-token-file to allow them elsewhere with Authorization: Bearer <token>"},
		{"with a token the line names its source", "$KVLENS_CONTROL_TOKEN", "fault changes (PUT /admin/faults) from this machine, or with Authorization: Bearer <operator token from $KVLENS_CONTROL_TOKEN>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := simAccessLine(tt.source); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestServePrintsNoTokenItWasGiven runs kvlens with the token in its
// environment, as a Kubernetes Secret gives it, and reads its start.
func TestServePrintsNoTokenItWasGiven(t *testing.T) {
	cmd := kvlens("--addr", "127.0.0.1:0", "--no-start", "--record=false")
	cmd.Env = append(cmd.Env, access.TokenEnv+"=from-the-secret")
	var lines []string
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "press Ctrl-C") {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, stdout)
	cmd.Wait()
	out := strings.Join(lines, "\n")
	if strings.Contains(out, "from-the-secret") || !strings.Contains(out, "operator token from $KVLENS_CONTROL_TOKEN") {
		t.Fatalf("startup:\n%s\nwant the token's source named and the token itself never printed", out)
	}
	// With --no-start nothing runs until Start: the last line says so.
	if !strings.Contains(lines[len(lines)-1], "waiting for Start on the dashboard") {
		t.Errorf("with --no-start the start ends %q; want it to say the load waits for Start", lines[len(lines)-1])
	}

	// Sad path: two token flags stop the start with one line.
	bad, err := kvlens("--control-token", "a", "--control-token-file", "/dev/null").CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(string(bad), "not both") {
		t.Fatalf("exit %v, output %q", err, bad)
	}
}
