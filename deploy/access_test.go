package deploy

import (
	"bytes"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// renders keeps each overlay's rendering: kustomize takes seconds on a busy
// machine, and these tests read every overlay several times.
var renders sync.Map

// objects renders overlay and decodes every object of kind into a new T.
func objects[T any](t *testing.T, overlay, kind string) []T {
	t.Helper()
	out0, ok := renders.Load(overlay)
	if !ok {
		out0, _ = renders.LoadOrStore(overlay, render(t, overlay))
	}
	var out []T
	for _, doc := range bytes.Split(out0.([]byte), []byte("\n---\n")) {
		var o object
		yaml.Unmarshal(doc, &o)
		if o.Kind != kind {
			continue
		}
		var v T
		if err := decodeStrict(doc, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func kvlensDeployment(t *testing.T, overlay string) appsv1.Deployment {
	t.Helper()
	for _, d := range objects[appsv1.Deployment](t, overlay, "Deployment") {
		if d.Name == "kvlens" {
			return d
		}
	}
	t.Fatalf("%s renders no Deployment kvlens", overlay)
	return appsv1.Deployment{}
}

// tokenFromSecret reports how c gets the operator token from the Secret
// kvlens-operator: "env" ($KVLENS_CONTROL_TOKEN), "file" (a
// --control-token-file in a mounted Secret volume) or "" for neither.
func tokenFromSecret(c corev1.Container, pod corev1.PodSpec) string {
	for _, e := range c.Env {
		if e.Name == "KVLENS_CONTROL_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == "kvlens-operator" && e.ValueFrom.SecretKeyRef.Key == "token" {
			return "env"
		}
	}
	for _, a := range c.Args {
		file, ok := strings.CutPrefix(a, "--control-token-file=")
		if !ok || path.Base(file) != "token" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath != path.Dir(file) {
				continue
			}
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "kvlens-operator" {
					return "file"
				}
			}
		}
	}
	return ""
}

func TestOperatorTokenComesFromTheSecretNeverTheCommandLine(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			d := kvlensDeployment(t, overlay)
			pod := d.Spec.Template.Spec
			if how := tokenFromSecret(pod.Containers[0], pod); how == "" {
				t.Error("kvlens does not get the operator token from the Secret kvlens-operator")
			}
			var containers []corev1.Container
			containers = append(containers, pod.Containers...)
			for _, s := range objects[appsv1.StatefulSet](t, overlay, "StatefulSet") {
				containers = append(containers, s.Spec.Template.Spec.Containers...)
			}
			for _, c := range containers {
				for _, a := range c.Args {
					// A token in the arguments shows in every process list.
					if strings.HasPrefix(a, "--control-token=") || a == "--control-token" {
						t.Errorf("container %s passes the token as an argument: %s", c.Name, a)
					}
				}
			}
		})
	}
}

func TestSimulatedWorkersOnEveryInterfaceTakeTheToken(t *testing.T) {
	// The direct-sim workers listen on 0.0.0.0, so their fault API is open
	// to the cluster; without the token only the pod itself could change
	// faults, with it every change from elsewhere needs the Bearer token.
	sets := objects[appsv1.StatefulSet](t, "direct-sim", "StatefulSet")
	if len(sets) != 1 {
		t.Fatalf("direct-sim renders %d StatefulSets, want 1", len(sets))
	}
	pod := sets[0].Spec.Template.Spec
	c := pod.Containers[0]
	if !slices.Contains(c.Args, "--host=0.0.0.0") {
		t.Fatalf("args %v: the test assumes the workers listen everywhere", c.Args)
	}
	if how := tokenFromSecret(c, pod); how == "" {
		t.Fatal("the simulated workers do not get the operator token from the Secret")
	}
}

func TestDashboardAnswersToTheRoutesHostnames(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			d := kvlensDeployment(t, overlay)
			c := d.Spec.Template.Spec.Containers[0]
			if !slices.Contains(c.Args, "--allow-host=$(KVLENS_ALLOW_HOST)") {
				t.Fatalf("args %v: no --allow-host from the ConfigMap", c.Args)
			}
			key := ""
			for _, e := range c.Env {
				if e.Name == "KVLENS_ALLOW_HOST" && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					key = e.ValueFrom.ConfigMapKeyRef.Key
				}
			}
			var allowed []string
			for _, cm := range objects[corev1.ConfigMap](t, overlay, "ConfigMap") {
				if cm.Name == "kvlens-config" {
					allowed = strings.Split(cm.Data[key], ",")
				}
			}
			for _, r := range objects[v1.HTTPRoute](t, overlay, "HTTPRoute") {
				for _, h := range r.Spec.Hostnames {
					if !slices.Contains(allowed, string(h)) {
						t.Errorf("HTTPRoute %s serves %s, which kvlens-config's %q (%v) does not allow", r.Name, h, key, allowed)
					}
				}
			}
		})
	}
}
