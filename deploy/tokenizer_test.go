package deploy

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// args returns the first container's args of the Deployment or StatefulSet
// named name in an overlay's rendering.
func args(t *testing.T, overlay, kind, name string) []string {
	t.Helper()
	for _, doc := range bytes.Split(render(t, overlay), []byte("\n---\n")) {
		var o object
		yaml.Unmarshal(doc, &o)
		if o.Kind != kind || o.Metadata.Name != name {
			continue
		}
		switch kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := decodeStrict(doc, &d); err != nil {
				t.Fatal(err)
			}
			return d.Spec.Template.Spec.Containers[0].Args
		case "StatefulSet":
			var s appsv1.StatefulSet
			if err := decodeStrict(doc, &s); err != nil {
				t.Fatal(err)
			}
			return s.Spec.Template.Spec.Containers[0].Args
		}
	}
	t.Fatalf("%s has no %s %s", overlay, kind, name)
	return nil
}

// TestEveryOverlayChoosesATokenizerThatWorksForIt checks the router hashes
// tokens that can match what it indexes: the engine's own for a real
// engine that publishes KV events, the embedded ones where kvlens's own
// decisions or simulated workers are all it compares with.
func TestEveryOverlayChoosesATokenizerThatWorksForIt(t *testing.T) {
	tests := []struct {
		name, overlay, want string
	}{
		{"vLLM publishes events over its own token ids: auto checks the model's files against its /tokenize", "direct-vllm", "--tokenizer=auto,--tokenizer-dir=/models/Llama-3.1-70B-Instruct-FP8"},
		{"TensorRT-LLM has no /tokenize: the model's own files", "direct-trtllm", "--tokenizer=/models/Llama-3.1-70B-Instruct-FP8"},
		{"the simulated workers share the embedded tokenizer", "direct-sim", "--tokenizer=embedded"},
		{"with Dynamo routing, kvlens's router is out of the path", "dynamo", "--tokenizer=embedded"},
		{"an overlay built on the simulated one keeps its choice", "example-custom-starters", "--tokenizer=embedded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, a := range args(t, tt.overlay, "Deployment", "kvlens") {
				if strings.HasPrefix(a, "--tokenizer") {
					got = append(got, a)
				}
			}
			if strings.Join(got, ",") != tt.want {
				t.Fatalf("kvlens's tokenizer flags %q, want exactly %s", got, tt.want)
			}
		})
	}
}

// TestRouterMountsTheModelReadOnly checks that the overlays whose router
// reads the model's tokenizer files mount the workers' model volume into
// it, read-only, where the flags say.
func TestRouterMountsTheModelReadOnly(t *testing.T) {
	for _, overlay := range []string{"direct-vllm", "direct-trtllm"} {
		t.Run(overlay, func(t *testing.T) {
			for _, doc := range bytes.Split(render(t, overlay), []byte("\n---\n")) {
				var o object
				yaml.Unmarshal(doc, &o)
				if o.Kind != "Deployment" || o.Metadata.Name != "kvlens" {
					continue
				}
				var d appsv1.Deployment
				if err := decodeStrict(doc, &d); err != nil {
					t.Fatal(err)
				}
				spec := d.Spec.Template.Spec
				mounted := false
				for _, m := range spec.Containers[0].VolumeMounts {
					mounted = mounted || (m.Name == "models" && m.MountPath == "/models" && m.ReadOnly)
				}
				claimed := false
				for _, v := range spec.Volumes {
					claimed = claimed || (v.Name == "models" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "model-nfs-pvc" && v.PersistentVolumeClaim.ReadOnly)
				}
				if !mounted || !claimed {
					t.Errorf("kvlens mounts the models volume read-only at /models: %v; from the workers' claim, read-only: %v", mounted, claimed)
				}
				return
			}
			t.Fatal("no kvlens Deployment")
		})
	}
}

// TestVLLMReportsCachedTokens checks the vLLM workers report
// prompt_tokens_details.cached_tokens, which the hit rate is computed from.
func TestVLLMReportsCachedTokens(t *testing.T) {
	a := args(t, "direct-vllm", "StatefulSet", "inference-worker")
	for _, want := range []string{"--enable-prompt-tokens-details", "--enable-prefix-caching"} {
		if !slices.Contains(a, want) {
			t.Errorf("vLLM's args %q lack %s", a, want)
		}
	}
}
