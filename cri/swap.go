package cri

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// SwapController is the host's memory swap controller, which decides the
// swap limit every container gets. crivk has no swap behaviour setting
// (the kubelet's memorySwap.swapBehavior, whose default is NoSwap): a
// container never swaps beyond its memory limit, set as the kubelet's
// ConfigureNoSwap (pkg/kubelet/kuberuntime/kuberuntime_container_linux.go)
// both when the container is created and when it is resized in place
// (the kubelet's update path regenerates the same resources).
type SwapController int

const (
	// NoSwapController: no swap controller (or crivk was not told of
	// one): no swap limit is sent, the runtime's default stands.
	NoSwapController SwapController = iota
	// SwapControllerV1 is cgroup v1 with swap accounting
	// (memory.memsw.limit_in_bytes exists): the memory+swap limit is the
	// memory limit (MemorySwapLimitInBytes = MemoryLimitInBytes; with no
	// memory limit, 0, which the runtime ignores).
	SwapControllerV1
	// SwapControllerV2 is cgroup v2 with memory.swap.max in crivk's own
	// cgroup: memory.swap.max is 0 (through the resources' Unified map).
	SwapControllerV2
)

func (s SwapController) String() string {
	switch s {
	case SwapControllerV1:
		return "cgroup v1 memory.memsw"
	case SwapControllerV2:
		return "cgroup v2 memory.swap.max"
	}
	return "none"
}

// cgroup2MaxSwapFile is the kubelet's Cgroup2MaxSwapFilename.
const cgroup2MaxSwapFile = "memory.swap.max"

// SwapControllerOf is the host's swap controller from its cgroup version
// (1 or 2) and whether its memory controller accounts swap: the kubelet's
// checkSwapControllerAvailability, whose reading of the host's cgroups is
// package cm's (cm.Host.SwapAccounting; internal/nodeagent asks it once
// per process, as the kubelet caches its check).
func SwapControllerOf(cgroupVersion int, accounting bool) SwapController {
	switch {
	case !accounting:
		return NoSwapController
	case cgroupVersion == 2:
		return SwapControllerV2
	}
	return SwapControllerV1
}

// configureNoSwap sets l's swap limit as the kubelet's ConfigureNoSwap
// does with the controller sc; without one it leaves l alone.
func configureNoSwap(l *runtimeapi.LinuxContainerResources, sc SwapController) {
	switch sc {
	case SwapControllerV1:
		l.MemorySwapLimitInBytes = l.MemoryLimitInBytes
	case SwapControllerV2:
		if l.Unified == nil {
			l.Unified = map[string]string{}
		}
		l.Unified[cgroup2MaxSwapFile] = "0"
	}
}
