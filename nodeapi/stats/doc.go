// Package stats is the node API's statistics, the kubelet's
// pkg/kubelet/server/stats: /stats/summary in the shape of
// k8s.io/kubelet/pkg/apis/stats/v1alpha1 (summary.go) and the resource
// metrics at /metrics/resource that metrics-server scrapes for `kubectl
// top` (resourcemetrics.go).
//
// Where each figure comes from:
//
//	node CPU, working set        the root cgroup (cgroup v1: cpuacct.usage, memory.usage_in_bytes
//	                             minus total_inactive_file, as cAdvisor)
//	node filesystem              statfs of crivk's root directory
//	image filesystem             CRI ImageFsInfo (ImageFs)
//	containers' CPU, memory,     CRI ListContainerStats of crivk's running containers
//	  writable layer             (ListContainers gives their start times); a pod's figure is
//	                             the sum of its containers'
//	pod network                  CRI ListPodSandboxStats (containerd answers it for sandboxes
//	                             with a cgroup parent: pod cgroups, package cm); left out
//	                             when the runtime cannot give it
//	pod volumes                  the volumes crivk keeps under <root-dir>/pods/<uid>/volumes,
//	                             measured as the kubelet's du-based metrics at most once a
//	                             minute (volumestats.go)
//	containers' logs             du of <pod-log-dir>/<ns>_<name>_<uid>/<container> (when
//	                             Config.PodLogDir is set)
//	pod ephemeral storage        writable layers + logs + local ephemeral volumes (emptyDir
//	                             on disk, configMap, downwardAPI), as the kubelet (ephemeral.go)
//	node processes (Rlimit)      min(kernel.pid_max, kernel.threads-max) and the task count
//	                             of /proc/loadavg, as the kubelet's pidlimit
//	"pods" system container      the memory of the node-allocatable cgroup, kubepods
//	                             (Config.PodsCgroup: package cm): usage, working set
//	                             (usage - inactive file) and available = its limit - working
//	                             set (only with a limit), as cAdvisor; none without pod cgroups
//	pod processes                the lines of cgroup.procs of each running container's cgroup
//	  (process_stats)            below the pod cgroup (Config.Processes: package cm), summed
//	                             for the pod, as cAdvisor's ProcessCount; none without pod
//	                             cgroups
//
// New returns both handlers, and Summarize, the summary as a value: package
// nodeapi mounts the handlers, the eviction manager observes Summarize.
// ImageFsStats is the summary's image filesystem on its own: the image
// garbage collector (package images) reads its capacity and available
// bytes. The only state
// is the volume measures' cache, pruned of the pods that no longer run at
// every summary.
//
// What it must never do: write anything (to the runtime, the API or the
// pods' files), or report containers that are not crivk's (every runtime
// call is filtered by crivk's managed-by label) or that do not run (the
// kubelet reports running containers only). It does not authenticate: the
// node API's filter (nodeapi.Auth) is in front of it.
package stats
