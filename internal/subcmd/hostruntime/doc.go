// Package hostruntime is `crivk runtime`: it starts and keeps crivk's own
// containerd on the host, for the chart's DaemonSet pod (a second container
// beside crivk's, privileged, hostPID and hostNetwork; docs/coexistence.md).
// cmd/crivk dispatches `crivk runtime ...` to Run and nothing else; the
// package shares no state with the node agent, which reaches this
// containerd only through its CRI socket. Its config.toml and CNI conflist
// come from one template (files.go, Files), which `crivk runtime render`
// also prints for the project's scripts (hack/lib/local.sh): the
// containerd the tests run is the one the chart installs.
//
//	start ──> the socket answers? ──yes──> adopt it (a previous pod started it)
//	              │ no
//	              v
//	          read the host containerd's --version (1.6, 1.7, 2.3+; else
//	          refused: ErrUnsupportedContainerd)
//	          write config.toml (version 2 for 1.x, 4 for 2.x), the CNI
//	          conflist and (2.x) the registry hosts on the host
//	          join <cgroup-root>/runtime (cm.Manager.Join)
//	          nsenter --target=<host pid> (the host's mount, UTS, IPC and
//	          network namespaces, chrooted to the host's root) containerd
//	              │
//	              v
//	          watch: containerd exits or stops answering ──> exit 1 (the
//	          kubelet restarts this container, which starts it again)
//	              │ SIGTERM (pod deleted, upgrade, uninstall)
//	              v
//	          a sandbox is ready? ──yes──> leave containerd running: crivk's
//	              │ no                     pods keep running, the next pod
//	              v                        adopts the runtime and crivk them
//	          remove the sandboxes left (not ready), stop containerd
//
// The process joins the runtime cgroup itself, before it starts containerd,
// so that containerd and its shims inherit that cgroup from the start and
// are never in the DaemonSet pod's: the kubelet kills what is left in a pod
// cgroup when the pod goes, and the pod's limits would apply to every crivk
// pod. containerd's output goes to a file on the host, never to this
// container's pipes, which end with the container.
//
// The containerd config it writes (containerdConfig for containerd 1,
// containerdConfigV4 and the hosts.toml files for containerd 2,
// cniConflist) is the same configuration hack/lib/local.sh writes for the
// project's own containerds; a change to one is a change to the other. The
// config's version follows the containerd's (version.go): the two
// templates say the same things in each version's keys, tested in
// files_test.go, and containerd 2.4 itself reads the version 4 one in
// hack/smoke-containerd2.sh.
//
// It must never stop a containerd that still runs a ready sandbox (crivk's
// pods outlive an upgrade of the DaemonSet), never share a socket, root or
// state directory with another containerd on the machine, and never leave
// containerd or its shims in the DaemonSet pod's cgroup.
package hostruntime
