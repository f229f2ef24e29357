// Package stats is the node API's statistics, the kubelet's
// pkg/kubelet/server/stats: /stats/summary in the shape of
// k8s.io/kubelet/pkg/apis/stats/v1alpha1 (summary.go), the resource
// metrics at /metrics/resource that metrics-server scrapes for `kubectl
// top` (resourcemetrics.go), and the cAdvisor container metrics at
// /metrics/cadvisor (cadvisor.go, procstats.go).
//
// Where each figure comes from:
//
//	node CPU, memory             the root cgroup, as cAdvisor's root container, read by package
//	                             cm on cgroup v1 and v2 (Config.Node, cm.Host.NodeUsage): the
//	                             CPU time (v1 cpuacct.usage, v2 usage_usec of cpu.stat), and
//	                             UsageNanoCores its rate between two summaries at least a
//	                             second apart (0 on the first; cpurate.go); usage (v1
//	                             memory.usage_in_bytes; v2 anon + file of memory.stat, the root
//	                             having no memory.current), working set = usage minus the
//	                             inactive file pages, RSS (v1 total_rss, v2 anon), page faults
//	                             = pgfault and pgmajfault of memory.stat; available (the
//	                             node's memory.available) = MemTotal of /proc/meminfo
//	                             (Config.MemoryCapacity) minus the working set
//	node filesystem              statfs of crivk's root directory
//	node network                 init's /proc/1/net/dev (the interfaces cAdvisor keeps), eth0
//	                             the default interface, as the kubelet gives cAdvisor's root
//	image filesystem             CRI ImageFsInfo (ImageFs); the containers' filesystem is the
//	                             same (the runtime does not split them), as the kubelet's
//	containers' CPU, memory,     CRI ListContainerStats of crivk's running containers
//	  writable layer             (ListContainers gives their start times): CPU time and rate;
//	                             working set, usage, available, RSS, page faults as the runtime
//	                             gives them; a pod's CPU and memory figures are the sums of its
//	                             containers' (one a container lacks adds 0), as the kubelet's
//	                             CRI stats provider without cAdvisor's pod cgroup
//	pod network                  CRI ListPodSandboxStats (containerd answers it for sandboxes
//	                             with a cgroup parent: pod cgroups, package cm); when the list
//	                             fails (containerd fails it whole for one sandbox being torn
//	                             down), each running pod's sandbox by id; not asked without
//	                             pod cgroups, left out when the runtime cannot give it
//	pod volumes                  the volumes crivk keeps under <root-dir>/pods/<uid>/volumes,
//	                             measured as the kubelet's du-based metrics at most once a
//	                             minute (volumestats.go)
//	containers' writable layer   used bytes and inodes from the runtime; capacity, available
//	                             bytes and inodes from statfs of the mountpoint it names
//	containers' logs             du of <pod-log-dir>/<ns>_<name>_<uid>/<container> (when
//	                             Config.PodLogDir is set); capacity, available and inodes of
//	                             the node filesystem, as the kubelet's
//	pod ephemeral storage        writable layers + logs + local ephemeral volumes (emptyDir
//	                             on disk, configMap, downwardAPI), as the kubelet (ephemeral.go);
//	                             capacity, available and inodes of the node filesystem
//	node processes (Rlimit)      min(kernel.pid_max, kernel.threads-max) and the task count
//	                             of /proc/loadavg, as the kubelet's pidlimit
//	"pods" system container      the node-allocatable cgroup, kubepods (Config.PodsCgroup:
//	                             package cm), as cAdvisor: memory usage, working set (usage -
//	                             inactive file), available = its limit - working set (only with
//	                             a limit), RSS (total_rss), its own pgfault and pgmajfault;
//	                             CPU time and its rate (as the node's); none without pod cgroups
//	pod processes                the lines of cgroup.procs of each running container's cgroup
//	  (process_stats)            below the pod cgroup (Config.Processes: package cm), summed
//	                             for the pod, as cAdvisor's ProcessCount; none without pod
//	                             cgroups
//	swap (node, pods,            with Config.Cgroups only (swap.go): cAdvisor's swap figure of
//	  containers)                the root, pod and container cgroups (v1 total_swap of
//	                             memory.stat, v2 memory.swap.current), available = the swap
//	                             limit (v1 memory.memsw.limit_in_bytes, v2 memory.swap.max; the
//	                             machine's SwapTotal for the node) - usage, none when unlimited;
//	                             a container whose cgroup cannot be read has the runtime's swap
//	                             stats (0 and 0 without), a pod without a cgroup the sum of its
//	                             containers' runtime figures, as the kubelet's CRI stats provider;
//	                             /metrics/resource has the kubelet's node_, container_ and
//	                             pod_swap_usage_bytes and container_swap_limit_bytes from them
//
// # /metrics/cadvisor
//
// The kubelet serves cAdvisor's PrometheusCollector there, with its
// includedMetrics (CPU usage and load, memory, disk I/O and usage,
// network, processes, OOM events) and its containerPrometheusLabelsFunc
// labels: id (the cgroup's name), name (the container ID), image,
// container, pod, namespace. crivk has no cAdvisor: it computes the same
// families, names, help texts, types, labels and timestamps (cAdvisor
// v0.53) at each request, for the cgroups cAdvisor would report for the
// node's pods, as the kubelet on containerd (cgroupfs driver):
//
//	series              id                               name       image         container
//	the machine         /                                ""         ""            ""
//	pod cgroup          /kubepods[/<qos>]/pod<uid>       ""         ""            ""
//	ready sandbox       <pod cgroup>/<sandbox ID>        sandbox ID sandbox image ""
//	running container   <pod cgroup>/<container ID>      its ID     its image     its name
//
// (pod and namespace from the CRI labels; a sandbox has no container
// name with containerd, hence "", not dockershim's "POD"). Each
// family's source:
//
//	CPU, memory, pids, blkio   the cgroup, through cm.CgroupSample (the cgroup library's
//	                           GetStats, the library cAdvisor uses): cpuacct usage, user and
//	                           system time; memory usage, max usage, failcnt, the
//	                           hierarchical cache, rss, mapped_file, swap, (in)active file,
//	                           pgfault and pgmajfault of memory.stat, working set = usage -
//	                           total_inactive_file; pids.current and pids.max (threads);
//	                           the blkio lists per device (/dev/<name> from
//	                           /sys/dev/block/<major>:<minor>/uevent)
//	spec_*                     the cgroup's cpu.shares, cpu.cfs_period_us, cpu.cfs_quota_us,
//	                           memory.limit_in_bytes, memory.memsw.limit_in_bytes,
//	                           memory.soft_limit_in_bytes (a limit above 1<<62 is 0)
//	start_time_seconds         the cgroup's creation time, as cAdvisor (oldest modification
//	                           time of its directories and their cgroup.clone_children)
//	oom_events_total           the kernel's oom_kill counter of the cgroup (memory.oom_control;
//	                           cAdvisor counts the kernel log's OOM kills of the container)
//	processes, fds, sockets    cgroup.procs of the cpu hierarchy; /proc/<pid>/fd of each
//	ulimits_soft               "Max open files" of /proc/<pid>/limits of the lowest pid
//	network (sandboxes, "/")   /proc/<pid>/net/dev of the sandbox's pid or of init, without
//	                           lo, veth*, docker*, nerdctl*, as cAdvisor's
//	filesystems ("/" only)     the mounts of /proc/self/mountinfo cAdvisor measures (ext*,
//	                           nfs*, btrfs, overlay, tmpfs, xfs, zfs; one per source):
//	                           statfs (inodes, limit, usage) and /proc/diskstats of the
//	                           device (reads, writes, merged, sectors, I/O time; cAdvisor's
//	                           milliseconds / 1e9 kept for the *_seconds_total)
//	cpu_load, tasks_state      not exported, as the kubelet's since v1.37 (#139870)
//	container_scrape_error     1 when the runtime cannot list the sandboxes or containers
//
// A cgroup gone between the runtime's list and its read (the container
// exited) is left out of the answer. The root cgroup is read
// controller by controller (a v1 root has no pids files; cAdvisor leaves
// pids out there too). Not reported: the machine's other cgroups
// (kubepods, the QoS cgroups, system services: the kubelet's cAdvisor
// reports every cgroup), the containers' filesystem usage (cAdvisor has
// none for containerd's either), and the machine_* and
// cadvisor_version_info families.
//
// New returns the handlers, and Summarize, the summary as a value: package
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
// kubelet reports running containers only; /metrics/cadvisor adds their
// ready sandboxes and pod cgroups). It never writes a cgroup file, and
// never reads one itself: package cm, which knows cgroup v1 from v2, reads
// them. It does not authenticate: the node API's filter
// (nodeapi.Auth, nodes/metrics for /metrics/cadvisor as the kubelet's) is
// in front of it.
package stats
