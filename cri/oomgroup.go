package cri

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// cgroup2OOMGroupFile is the cgroup v2 file that makes a cgroup an OOM
// group: on an OOM kill in it, the kernel kills every process of the
// cgroup (Documentation/admin-guide/cgroup-v2.rst, memory.oom.group).
const cgroup2OOMGroupFile = "memory.oom.group"

// configureOOMGroup asks for memory.oom.group 1 in l's Unified map when
// group is set, as the kubelet's calculateLinuxResources does on cgroup
// v2 unless singleProcessOOMKill
// (pkg/kubelet/kuberuntime/kuberuntime_container_linux.go); unset, it
// leaves l alone, and the container's processes are killed one at a time
// (the kernel's default, and cgroup v1's only behaviour). The other
// entries of the map (memory.swap.max, swap.go) stay.
func configureOOMGroup(l *runtimeapi.LinuxContainerResources, group bool) {
	if !group {
		return
	}
	if l.Unified == nil {
		l.Unified = map[string]string{}
	}
	l.Unified[cgroup2OOMGroupFile] = "1"
}
