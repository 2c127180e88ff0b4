package router

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/sim"
)

// sdkAnswer is what OpenAI's Node SDK returned or raised in one case of
// testdata/openai-sdk.mjs.
type sdkAnswer struct {
	Raised  string `json:"raised"`
	Status  int    `json:"status"`
	Message string `json:"message"`

	IDs    []string  `json:"ids"`
	First  sdkStream `json:"first"`
	Next   sdkStream `json:"next"`
	Text   string    `json:"text"`
	Chunks int       `json:"chunks"`
	Usage  *sdkUsage `json:"usage"`
	Finish string    `json:"finish"`
	Body   string    `json:"content"`
}

type sdkStream struct {
	Text   string    `json:"text"`
	Chunks int       `json:"chunks"`
	Usage  *sdkUsage `json:"usage"`
}

type sdkUsage struct {
	Prompt     int `json:"prompt_tokens"`
	Completion int `json:"completion_tokens"`
	Details    *struct {
		Cached int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// nodeSDK returns node's path, or skips the test when node or the SDK
// (installed by make test's npm ci) is missing; with KVLENS_REQUIRE_NODE_SDK
// set, as make test sets it, it fails instead.
func nodeSDK(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("..", "node_modules", "openai", "package.json"))
	}
	if err != nil {
		if os.Getenv("KVLENS_REQUIRE_NODE_SDK") != "" {
			t.Fatalf("OpenAI's Node SDK is required: %v (run npm ci at the repository's root)", err)
		}
		t.Skipf("OpenAI's Node SDK is not installed: %v", err)
	}
	return node
}

// TestOpenAIsNodeSDKReadsTheRouter drives the router, in front of simulated
// workers, with OpenAI's own Node SDK: the answers, usage and errors a
// client kvlens did not write reads from it.
func TestOpenAIsNodeSDKReadsTheRouter(t *testing.T) {
	node := nodeSDK(t)
	base := func(name string, f sim.Faults) string {
		w, err := sim.NewServer(sim.ServerOptions{Name: name, Profile: sim.MustProfile(sim.DefaultProfile), Faults: f})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		wk := httptest.NewServer(w)
		t.Cleanup(wk.Close)
		_, srv := newTestProxy(t, &RoundRobin{}, Config{}, name+"="+wk.URL)
		return srv.URL + "/v1"
	}
	cmd := exec.Command(node, filepath.Join("testdata", "openai-sdk.mjs"),
		base("ok", sim.Faults{}), base("cut", sim.Faults{StreamCut: 1}), base("busy", sim.Faults{Error503: 1}))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}
	t.Logf("the SDK read: %s", out)
	var got map[string]sdkAnswer
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the script's output: %v\n%s", err, out)
	}
	cached := func(u *sdkUsage) int {
		if u == nil || u.Details == nil {
			return -1
		}
		return u.Details.Cached
	}
	tests := []struct {
		name string
		c    string
		ok   func(a sdkAnswer) bool
	}{
		{"the models list names the served model", "models", func(a sdkAnswer) bool {
			return len(a.IDs) == 1 && a.IDs[0] == sim.DefaultModel
		}},
		{"a stream's text and its usage chunk reach the SDK", "stream", func(a sdkAnswer) bool {
			u := a.First.Usage
			return a.Raised == "" && a.First.Text != "" && u != nil && u.Completion == 24 && u.Prompt > 0 && cached(u) == 0
		}},
		{"a follow-up reads its cached prefix in usage", "stream", func(a sdkAnswer) bool {
			u := a.Next.Usage
			return u != nil && cached(u) >= 32 && cached(u) < u.Prompt
		}},
		{"a whole answer parses with its finish reason and usage", "whole", func(a sdkAnswer) bool {
			return a.Raised == "" && a.Body != "" && a.Finish == "length" && a.Usage != nil && a.Usage.Completion == 24
		}},
		{"a completion parses", "completion", func(a sdkAnswer) bool {
			return a.Raised == "" && a.Text != "" && a.Usage != nil && a.Usage.Completion == 8
		}},
		// Sad paths: each is the SDK's own error class, with the message.
		{"an unknown model is the SDK's NotFoundError", "unknownModel", func(a sdkAnswer) bool {
			return a.Raised == "NotFoundError" && a.Status == 404 && strings.Contains(a.Message, "The model `gpt-4` does not exist.")
		}},
		{"an image part is the SDK's BadRequestError naming the part", "imagePart", func(a sdkAnswer) bool {
			return a.Raised == "BadRequestError" && a.Status == 400 && strings.Contains(a.Message, "image_url")
		}},
		{"a stream cut mid-answer raises in the SDK with the router's reason, not a short answer", "cutStream", func(a sdkAnswer) bool {
			return a.Raised == "APIError" && strings.Contains(a.Message, "stream broke mid-answer")
		}},
		{"a worker's 503 is the SDK's InternalServerError with its status", "busyWorker", func(a sdkAnswer) bool {
			return a.Raised == "InternalServerError" && a.Status == 503
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, present := got[tt.c]
			if !present || !tt.ok(a) {
				t.Fatalf("%s: %+v", tt.c, a)
			}
		})
	}
}
