package lifecycle

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Objects is the engine's read access to the API objects that the node's
// pods reference (environment, volumes, service links, tokens). The engine
// never talks to the API itself; the provider implements this, reading only
// what pods bound to the node reference.
//
// Errors that mean "not found" satisfy apierrors.IsNotFound.
type Objects interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// ListServices returns the services of namespace (for the service-link
	// environment variables of pods with enableServiceLinks).
	ListServices(ctx context.Context, namespace string) ([]*v1.Service, error)
	// RequestToken asks for a service account token bound to a pod.
	RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// Volumes is what the engine needs of the volume manager: prepare a pod's
// volumes before its containers start, the mounts of each container, and
// tear everything down once the pod is terminated.
type Volumes interface {
	// MountPod makes every volume of pod ready (idempotent, called before
	// each sync that may start a container). An error keeps the pod's
	// containers from starting; its text is shown in a FailedMount event.
	MountPod(ctx context.Context, pod *v1.Pod) error
	// Mounts returns the CRI mounts of container c of pod (volumeMounts,
	// subPath resolved; subPathExpr expanded with env, the container's
	// resolved environment); a mount of an image volume carries its image
	// spec from images (by volume name, what the runtime manager pulled:
	// cri.ImageVolumes).
	Mounts(pod *v1.Pod, c *v1.Container, env map[string]string, images map[string]*runtimeapi.ImageSpec) ([]*runtimeapi.Mount, error)
	// UnmountPod removes everything of the pod's volumes from the node once
	// no container of it can run any more.
	UnmountPod(ctx context.Context, pod *v1.Pod) error
}
