package eviction

import (
	"fmt"
	"strings"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's words (pkg/kubelet/eviction/helpers.go).
const (
	// Reason is the evicted pod's status reason and event reason, and the
	// reason of a pod refused under pressure.
	Reason = "Evicted"

	nodeLowMessageFmt                   = "The node was low on resource: %v. "
	nodeConditionMessageFmt             = "The node had condition: %v. "
	containerMessageFmt                 = "Container %s was using %s, request is %s, has larger consumption of %v. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	thresholdMetMessageFmt              = "Threshold quantity: %v, available: %v. "

	// The Evicted event's annotations.
	OffendingContainersKey      = "offending_containers"
	OffendingContainersUsageKey = "offending_containers_usage"
	StarvedResourceKey          = "starved_resource"
)

// evictionMessage is the kubelet's message for a pod evicted to reclaim r:
// the resource, the threshold met with what was available, and each
// container using more than it requested; with the Evicted event's
// annotations.
func evictionMessage(r v1.ResourceName, pod *v1.Pod, stats podStatsFunc, met []evictionapi.Threshold, obs observations) (string, map[string]string) {
	msg := fmt.Sprintf(nodeLowMessageFmt, r)
	for _, t := range met {
		if t.Signal.Resource() != r {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			o = o.cause(t)
			msg += fmt.Sprintf(thresholdMetMessageFmt, t.Value.Of(o.capacity), o.available)
			break
		}
	}
	ps, ok := stats(string(pod.UID))
	if !ok {
		return msg, map[string]string{}
	}
	containers := append(append([]v1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...)
	var names, usages []string
	for _, cs := range ps.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[r]
			if u := containerUsage(cs, r); u != nil && u.Cmp(req) > 0 {
				msg += fmt.Sprintf(containerMessageFmt, c.Name, u.String(), req.String(), r)
				names = append(names, c.Name)
				usages = append(usages, u.String())
			}
			break
		}
	}
	return msg, map[string]string{
		OffendingContainersKey:      strings.Join(names, ","),
		OffendingContainersUsageKey: strings.Join(usages, ","),
		StarvedResourceKey:          string(r),
	}
}

// containerUsage is the container's use of r for the message: its working
// set (memory), its writable layer and logs (ephemeral storage, when both
// are measured); nil otherwise.
func containerUsage(cs statsapi.ContainerStats, r v1.ResourceName) *resource.Quantity {
	switch r {
	case v1.ResourceMemory:
		if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
			return resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
		}
	case v1.ResourceEphemeralStorage:
		if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
			return resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
		}
	}
	return nil
}
