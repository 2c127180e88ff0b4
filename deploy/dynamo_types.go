package deploy

import corev1 "k8s.io/api/core/v1"

// DynamoGraphDeployment holds exactly the fields of Dynamo's CRD
// (nvidia.com/v1alpha1) that seed 003's deployment uses. Decoding the
// rendered manifest strictly into it checks that the overlay uses those
// fields and no others.
type DynamoGraphDeployment struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		BackendFramework string                   `json:"backendFramework"`
		Services         map[string]DynamoService `json:"services"`
	} `json:"spec"`
}

// DynamoService is one service of the graph: the frontend or a worker pool.
type DynamoService struct {
	ComponentType string          `json:"componentType"`
	Replicas      int             `json:"replicas"`
	Envs          []corev1.EnvVar `json:"envs,omitempty"`
	Resources     *struct {
		Limits map[string]string `json:"limits,omitempty"`
	} `json:"resources,omitempty"`
	ExtraPodSpec struct {
		Volumes       []corev1.Volume  `json:"volumes,omitempty"`
		MainContainer corev1.Container `json:"mainContainer"`
	} `json:"extraPodSpec"`
}
