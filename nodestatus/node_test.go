package nodestatus

import (
	"slices"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
)

func TestBuildNode(t *testing.T) {
	n, err := BuildNode(NodeConfig{
		Name: "n1", InternalIP: "192.0.2.7", KubeletPort: 10250, MaxPods: 110, RootDir: t.TempDir(),
		AgentVersion: "v1.37.2-crivk.0", RuntimeVersion: cri.VersionInfo{RuntimeName: "containerd", RuntimeVersion: "1.6.20"},
	}, cri.Readiness{RuntimeReady: true, NetworkReady: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.Capacity.Pods().Value() != 110 || n.Status.Capacity.Memory().IsZero() || n.Status.Capacity.StorageEphemeral().IsZero() {
		t.Errorf("capacity %v", n.Status.Capacity)
	}
	// ephemeral-storage is DecimalSI in capacity and allocatable, as the
	// kubelet's since v1.37 (#137652).
	for name, l := range map[string]v1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
		if q := l[v1.ResourceEphemeralStorage]; q.Format != resource.DecimalSI {
			t.Errorf("%s ephemeral-storage %s in %s, want %s", name, q.String(), q.Format, resource.DecimalSI)
		}
	}
	if n.Status.NodeInfo.ContainerRuntimeVersion != "containerd://1.6.20" || n.Status.NodeInfo.KubeletVersion != "v1.37.2-crivk.0" {
		t.Errorf("nodeInfo %+v", n.Status.NodeInfo)
	}
	if n.Status.Addresses[0] != (v1.NodeAddress{Type: v1.NodeInternalIP, Address: "192.0.2.7"}) {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
	if n.Labels["kubernetes.io/hostname"] != "n1" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("labels %v endpoints %v", n.Labels, n.Status.DaemonEndpoints)
	}
	// Only what crivk implements, sorted; the API server's
	// NodeDeclaredFeatureValidator then lets a pod-level resize of a pod
	// on the node through.
	if want := []string{"InPlacePodLevelResourcesVerticalScaling", "RestartAllContainersOnContainerExits"}; !slices.Equal(n.Status.DeclaredFeatures, want) {
		t.Errorf("declaredFeatures %v, want %v", n.Status.DeclaredFeatures, want)
	}
	old := &v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}
	resized := &v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}
	reqs, err := ndf.DefaultFramework.InferForPodUpdate(&ndf.PodInfo{Spec: old, Status: &v1.PodStatus{}},
		&ndf.PodInfo{Spec: resized, Status: &v1.PodStatus{}}, version.MustParse("1.37.2"))
	if err != nil || reqs.IsEmpty() {
		t.Fatalf("a pod-level resize needs no declared feature (%v)? the test no longer tests anything", err)
	}
	if m, err := ndf.DefaultFramework.MatchNode(reqs, n); err != nil || !m.IsMatch {
		t.Errorf("a pod-level resize on the node: %+v %v, want it admitted", m, err)
	}
	if _, err := BuildNode(NodeConfig{Name: "n1", RootDir: "/does/not/exist"}, cri.Readiness{}, time.Now()); err == nil {
		t.Error("a missing root dir must be an error")
	}
}
