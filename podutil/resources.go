package podutil

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ContainerResourceValue is the value of a downward API resourceFieldRef,
// for environment variables and downwardAPI volumes alike: the kubelet's
// ExtractContainerResourceValue on the container whose limits were merged
// with the node's allocatable (defaultPodLimitsForDownwardAPI and
// MergeContainerResourceLimits: a cpu, memory or ephemeral-storage limit
// that is not set, or zero, is the pod-level limit of that resource when
// the pod sets one (cpu and memory, pod-level resources), else the
// allocatable; hugepages are never defaulted). The target is the container
// fs names, or c when it names none; the value is divided by the divisor
// (default 1) and rounded up, cpu in millicores of the divisor.
func ContainerResourceValue(fs *v1.ResourceFieldSelector, pod *v1.Pod, c *v1.Container, allocatable v1.ResourceList) (string, error) {
	target := c
	if fs.ContainerName != "" {
		target = nil
		for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				if list[i].Name == fs.ContainerName {
					target = &list[i]
				}
			}
		}
	}
	if target == nil {
		return "", fmt.Errorf("container %q not found in pod %s/%s", fs.ContainerName, pod.Namespace, pod.Name)
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(fs.Resource, ".")
	rn := v1.ResourceName(name)
	supported := rn == v1.ResourceCPU || rn == v1.ResourceMemory || rn == v1.ResourceEphemeralStorage ||
		strings.HasPrefix(name, v1.ResourceHugePagesPrefix)
	if !ok || (kind != "limits" && kind != "requests") || !supported {
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	var q resource.Quantity
	if kind == "limits" {
		var set bool
		q, set = target.Resources.Limits[rn]
		if (!set || q.IsZero()) && (rn == v1.ResourceCPU || rn == v1.ResourceMemory || rn == v1.ResourceEphemeralStorage) {
			q = defaultLimit(pod, rn, allocatable)
		}
	} else {
		q = target.Resources.Requests[rn]
	}
	if rn == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// defaultLimit is the limit of rn a container without one gets in the
// downward API: the pod-level limit (cpu and memory only, the resources
// pod-level resources support), else the node's allocatable.
func defaultLimit(pod *v1.Pod, rn v1.ResourceName, allocatable v1.ResourceList) resource.Quantity {
	if pod.Spec.Resources != nil && (rn == v1.ResourceCPU || rn == v1.ResourceMemory) {
		if q, ok := pod.Spec.Resources.Limits[rn]; ok && !q.IsZero() {
			return q
		}
	}
	return allocatable[rn]
}
