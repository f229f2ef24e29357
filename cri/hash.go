package cri

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/dump"
)

// HashContainer is the kubelet's hash of a container's spec
// (pkg/kubelet/container.HashContainer), the value of the
// io.kubernetes.container.hash annotation in hexadecimal: FNV-32a over the
// dump of the JSON of the fields a running container cannot follow
// without a restart. In v1.35 those are the name and the image, the only
// such field the API lets a user change on a running pod. A running
// container whose hash differs from its spec's is killed and started
// again (ComputePodActions). The value is the kubelet's for the same spec,
// bit for bit (TestHashContainerIsTheKubelets), so that crictl shows the
// same annotation for crivk's containers as for the kubelet's.
func HashContainer(c *v1.Container) uint64 {
	b, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(b))
	return uint64(h.Sum32())
}
