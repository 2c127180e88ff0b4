// Package deploy tests the Kubernetes manifests: every overlay renders with
// kustomize's Go API, matches its golden file, and decodes strictly into the
// Kubernetes API types, so a misspelt or misplaced field fails here rather
// than on a cluster.
package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var overlays = []string{"direct-vllm", "direct-trtllm", "direct-sim", "dynamo", "example-custom-starters"}

// render builds an overlay as `kustomize build` would.
func render(t *testing.T, overlay string) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join("k8s", "overlays", overlay))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", overlay, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// object is the part of every manifest that says what type it is.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// decodeStrict decodes doc into v, failing on any field v does not have.
func decodeStrict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// typed returns an empty value of the API type for apiVersion and kind.
func typed(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, nil
	case "gateway.networking.k8s.io/v1/HTTPRoute":
		return &v1.HTTPRoute{}, nil
	case "nvidia.com/v1alpha1/DynamoGraphDeployment":
		return &DynamoGraphDeployment{}, nil
	}
	return nil, fmt.Errorf("no API type known for %s %s", apiVersion, kind)
}

func TestOverlaysRenderAndDecodeStrictly(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			out := render(t, overlay)
			golden := filepath.Join("testdata", overlay+".yaml")
			if *update {
				os.WriteFile(golden, out, 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("rendered %s differs from %s; rerun with -update if the change is intended", overlay, golden)
			}
			for _, doc := range bytes.Split(out, []byte("\n---\n")) {
				var o object
				if err := yaml.Unmarshal(doc, &o); err != nil {
					t.Fatal(err)
				}
				v, err := typed(o.APIVersion, o.Kind)
				if err != nil {
					t.Fatal(err)
				}
				if err := decodeStrict(doc, v); err != nil {
					t.Errorf("%s %s: %v", o.Kind, o.Metadata.Name, err)
				}
			}
		})
	}
}

func TestStrictDecodingCatchesAMisplacedField(t *testing.T) {
	// The check above is only worth something if a typo fails it.
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 1\n")
	if err := decodeStrict(doc, &appsv1.Deployment{}); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("err = %v, want an unknown field error naming replica", err)
	}
}

// objects renders overlay and returns its objects of kind, decoded.
func deployment(t *testing.T, overlay, name string) *appsv1.Deployment {
	t.Helper()
	for _, doc := range bytes.Split(render(t, overlay), []byte("\n---\n")) {
		var o object
		yaml.Unmarshal(doc, &o)
		if o.Kind == "Deployment" && o.Metadata.Name == name {
			var d appsv1.Deployment
			if err := decodeStrict(doc, &d); err != nil {
				t.Fatal(err)
			}
			return &d
		}
	}
	t.Fatalf("%s renders no Deployment %s", overlay, name)
	return nil
}

func TestKvlensPodIsLockedDown(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			d := deployment(t, overlay, "kvlens")
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			checks := []struct {
				name string
				ok   bool
			}{
				{"runs as non-root", pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot},
				{"has a read-only root filesystem", c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem},
				{"cannot escalate privileges", c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation},
				{"requests CPU and memory", !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero()},
				{"probes liveness on /healthz", c.LivenessProbe != nil && c.LivenessProbe.HTTPGet.Path == "/healthz"},
				{"probes readiness on /readyz", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz"},
				{"keeps its database on the PVC", hasMount(c, "/data")},
			}
			for _, ch := range checks {
				if !ch.ok {
					t.Errorf("kvlens pod %s: no", ch.name)
				}
			}
		})
	}
}

func hasMount(c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

func TestDirectShapesDifferOnlyInWorkerImageArgsAndResources(t *testing.T) {
	// The simulated shape must be the vLLM shape with the image and args
	// swapped, not a fork: compare the worker StatefulSets field by field.
	sts := func(overlay string) appsv1.StatefulSet {
		for _, doc := range bytes.Split(render(t, overlay), []byte("\n---\n")) {
			var o object
			yaml.Unmarshal(doc, &o)
			if o.Kind == "StatefulSet" {
				var s appsv1.StatefulSet
				if err := decodeStrict(doc, &s); err != nil {
					t.Fatal(err)
				}
				return s
			}
		}
		t.Fatalf("%s has no StatefulSet", overlay)
		return appsv1.StatefulSet{}
	}
	normalise := func(s appsv1.StatefulSet) appsv1.StatefulSet {
		c := &s.Spec.Template.Spec.Containers[0]
		c.Image, c.Args, c.Resources, c.VolumeMounts = "", nil, corev1.ResourceRequirements{}, nil
		s.Spec.Template.Spec.Volumes = nil
		return s
	}
	vllm, sim := normalise(sts("direct-vllm")), normalise(sts("direct-sim"))
	a, _ := json.Marshal(vllm)
	b, _ := json.Marshal(sim)
	if !bytes.Equal(a, b) {
		t.Fatalf("the simulated workers differ from vLLM's beyond image, args and resources:\n%s\n%s", a, b)
	}
}

func TestDynamoGraphDeploymentIsSeed003s(t *testing.T) {
	var dgd DynamoGraphDeployment
	for _, doc := range bytes.Split(render(t, "dynamo"), []byte("\n---\n")) {
		var o object
		yaml.Unmarshal(doc, &o)
		if o.Kind == "DynamoGraphDeployment" {
			if err := decodeStrict(doc, &dgd); err != nil {
				t.Fatal(err)
			}
		}
	}
	fe, w := dgd.Spec.Services["Frontend"], dgd.Spec.Services["TrtllmWorker"]
	env := map[string]string{}
	for _, e := range fe.Envs {
		env[e.Name] = e.Value
	}
	args := strings.Join(w.ExtraPodSpec.MainContainer.Args, " ")
	// Seed 003, "Frontend Configuration", "TRT-LLM Worker Configuration"
	// and "TRT-LLM Engine Overrides".
	checks := []struct {
		name string
		ok   bool
	}{
		{"the backend is TensorRT-LLM", dgd.Spec.BackendFramework == "trtllm"},
		{"the frontend routes with the KV router", env["DYN_ROUTER_MODE"] == "kv"},
		{"the frontend's block size matches the engine's 32", env["DYN_KV_CACHE_BLOCK_SIZE"] == "32"},
		{"the frontend is Dynamo 0.9", fe.ExtraPodSpec.MainContainer.Image == "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:0.9.0"},
		{"there are 3 workers", w.Replicas == 3},
		{"each worker has one GPU", w.Resources != nil && w.Resources.Limits["gpu"] == "1"},
		{"the workers run TensorRT-LLM 0.9's runtime", w.ExtraPodSpec.MainContainer.Image == "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.9.0"},
		{"the model is Llama 3.1 70B FP8", strings.Contains(args, "--model-path=/models/Llama-3.1-70B-Instruct-FP8")},
		{"no tensor parallelism", strings.Contains(args, "--tensor-parallel-size=1")},
		{"16384 tokens per step", strings.Contains(args, "--max-num-tokens=16384")},
		{"64 sequences per batch", strings.Contains(args, "--max-batch-size=64")},
		{"KV events are published", strings.Contains(args, "--publish-events-and-metrics")},
		{"chunked prefill is on", strings.Contains(args, `"enable_chunked_prefill":true`)},
		{"the overlap scheduler is on", strings.Contains(args, `"disable_overlap_scheduler":false`)},
		{"the KV cache is FP8 with 90% of free memory", strings.Contains(args, `"kv_cache_config":{"dtype":"fp8","free_gpu_memory_fraction":0.90}`)},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("DynamoGraphDeployment: not so that %s", c.name)
		}
	}
}
