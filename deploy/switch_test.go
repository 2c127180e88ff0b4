package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDynamoSwitchMode runs the documented mode switch against a fake
// kubectl that records its arguments.
func TestDynamoSwitchMode(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	fake := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + log + "\n"
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mode    string
		env     []string
		wantErr bool
		want    []string
	}{
		{"switching to kv patches DYN_ROUTER_MODE and waits for the rollout", "kv", nil, false, []string{
			`patch dynamographdeployment llama-70b --type=json -p [{"op":"test","path":"/spec/services/Frontend/envs/0/name","value":"DYN_ROUTER_MODE"},{"op":"replace","path":"/spec/services/Frontend/envs/0/value","value":"kv"}]`,
			`rollout status deployment/llama-70b-frontend --timeout=15m`,
		}},
		{"a namespace and another deployment name are passed through", "round_robin", []string{"NAMESPACE=demo", "DGD=gtc"}, false, []string{
			`-n demo patch dynamographdeployment gtc --type=json -p [{"op":"test","path":"/spec/services/Frontend/envs/0/name","value":"DYN_ROUTER_MODE"},{"op":"replace","path":"/spec/services/Frontend/envs/0/value","value":"round_robin"}]`,
			`-n demo rollout status deployment/gtc-frontend --timeout=15m`,
		}},
		{"a mode Dynamo lacks is refused before kubectl runs", "least_loaded", nil, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(log)
			cmd := exec.Command("bash", "k8s/overlays/dynamo/switch-mode.sh", tt.mode)
			cmd.Env = append(os.Environ(), append(tt.env, "PATH="+bin+":"+os.Getenv("PATH"))...)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v\n%s", err, out)
			}
			calls, _ := os.ReadFile(log)
			got := strings.Split(strings.TrimSpace(string(calls)), "\n")
			if len(tt.want) == 0 {
				if strings.TrimSpace(string(calls)) != "" {
					t.Fatalf("kubectl ran: %s", calls)
				}
				return
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("kubectl calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
