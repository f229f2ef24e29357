package cri

import (
	"github.com/crivk/crivk/internal/testutil"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHashContainerIsTheKubelets: the values are the kubelet v1.35.4's
// kubecontainer.HashContainer for the same containers (computed with it),
// and only the name and the image change the hash.
func TestHashContainerIsTheKubelets(t *testing.T) {
	for _, tc := range []struct {
		c    v1.Container
		want string
	}{
		{v1.Container{Name: "a", Image: "busybox:1"}, "383123a6"},
		{v1.Container{Name: "app", Image: "registry.k8s.io/e2e-test-images/agnhost:2.59"}, "3d3d6236"},
		{v1.Container{Name: "app", Image: "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"}, "2f35d113"},
		{v1.Container{Name: "a", Image: "busybox:1", Args: []string{"sleep", "1"}, Env: []v1.EnvVar{{Name: "X", Value: "y"}}}, "383123a6"},
	} {
		if got := strconv.FormatUint(HashContainer(&tc.c), 16); got != tc.want {
			t.Errorf("HashContainer(%s, %s) = %s, want %s", tc.c.Name, tc.c.Image, got, tc.want)
		}
	}
}

// TestContainerHashAnnotationRoundTrip: the hash written on a container
// is read back into its status.
func TestContainerHashAnnotationRoundTrip(t *testing.T) {
	pod := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Image = "busybox:1"
	cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerTypeRegular, 0, "sha256:abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Annotations[AnnotationContainerHash]; got != "383123a6" {
		t.Fatalf("hash annotation %q", got)
	}
	cs := toContainerStatus(nil, cfg.Labels, cfg.Annotations)
	if !cs.HasHash || cs.Hash != HashContainer(&pod.Spec.Containers[0]) {
		t.Fatalf("status hash %x (known %v)", cs.Hash, cs.HasHash)
	}
	if cs := toContainerStatus(nil, cfg.Labels, nil); cs.HasHash {
		t.Fatalf("a container without the annotation has a hash: %x", cs.Hash)
	}
}
