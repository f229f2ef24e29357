package cri

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/opencontainers/cgroups"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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

// DetectSwapController is the kubelet's checkSwapControllerAvailability,
// run once per process and cached as the kubelet's
// getSwapControllerAvailable: on cgroup v1,
// /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes; on v2,
// memory.swap.max of the cgroup /proc/self/cgroup names (the root has
// none). Anything it cannot read counts as no controller.
func DetectSwapController() SwapController { return detectedSwap() }

var detectedSwap = sync.OnceValue(func() SwapController {
	return detectSwapController("/sys/fs/cgroup", "/proc/self/cgroup", cgroups.IsCgroup2UnifiedMode())
})

// detectSwapController is DetectSwapController's check, with the cgroup
// mount and the process' cgroup file given.
func detectSwapController(cgroupRoot, selfCgroup string, v2 bool) SwapController {
	if !v2 {
		if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes")); err != nil {
			return NoSwapController
		}
		return SwapControllerV1
	}
	own, err := cgroups.ParseCgroupFile(selfCgroup)
	if err != nil {
		return NoSwapController
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, own[""], cgroup2MaxSwapFile)); err != nil {
		return NoSwapController
	}
	return SwapControllerV2
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
