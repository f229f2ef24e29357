// Command bench measures crivk against the kubelet and against raw CRI calls
// on one control plane and one containerd (hack/local-up.sh), lane after
// lane in the same run, and writes results.json, a markdown report and PNG
// plots under its output directory (hack/bench.sh: _output/bench/<UTC
// timestamp>/).
//
// Lanes, run one after another, never two at once:
//
//	raw      the harness itself sends the sandbox and container configs crivk
//	         would build for the same pod spec (cri.Runtime.SandboxConfig,
//	         cri.ContainerConfig) straight to the CRI, one goroutine per pod:
//	         the physical limit for an agent on this runtime. Each W2/W3
//	         batch runs once per parallelism setting (Plan.RawParallelism:
//	         sandbox calls in flight, none or 8, crivk's own bound) and the
//	         best run per phase is raw's figure (rawparallel.go), so that
//	         no agent beats raw by sending its calls in a better order.
//	rawapi   raw CRI calls driven through the API server (rawapi.go): the
//	         harness creates and deletes the pod objects as for the agents
//	         and a minimal agent inside it, registered as node NODE_NAME
//	         (Node Ready, Lease renewed every 10 s), watches the node's
//	         pods and runs the raw lane's CRI sequence for each, writes the
//	         status once (UpdateStatus), and on a deletion stops the pod,
//	         writes the terminal status and deletes the object (grace 0,
//	         UID precondition); its API client has the agents' QPS and
//	         burst and goes through the counting proxy. The floor of any
//	         agent that goes through the API server. W4 and W5 are not run
//	         in it (no exit handling; its agent is the harness itself).
//	kubelet  hack/run-kubelet.sh (kubelet v1.37.2) as node NODE_NAME.
//	crivk    hack/run-crivk.sh as node NODE_NAME.
//
// Each agent lane (rawapi included) starts its agent, waits for the Node to
// be Ready, warms the caches with one throw-away pod, runs the workloads,
// deletes its pods, stops the agent. Before every lane the harness removes the namespace's
// pods, every sandbox the CRI holds and the Node object, again and again
// until five listings in a row find them gone (isolation.go): a kubelet
// kills every sandbox it does not know, one lane's left-overs would be the
// next lane's load, and a containerd with a backlog can still finish
// sandboxes whose calls had timed out. A lane whose node cannot be made
// empty is not run; the next lane tries again.
//
// Workloads (workloads.go), the same for every lane through the driver
// interface (driver.go: apiDriver for the agents, rawDriver for the CRI):
//
//	W1 one pod, create -> Running with all containers ready, seen via watch, in sequence
//	W2 batches created at once: per-pod create -> Running, batch lag, pods/s;
//	   for the API lanes the node's Ready condition and Lease age are sampled
//	   every second meanwhile (the density goal: Ready throughout, lease
//	   never older than its 40 s duration, for both agents); the full plan's
//	   batch of 500 is a density point (Plan.DensityFrom: health goals only)
//	W3 deletion of those batches (container exits on TERM, grace 30 s): delete -> gone;
//	   during each W2 and W3 batch the core-seconds of the agent (raw,
//	   rawapi: the harness), containerd, its shims with the pods'
//	   processes, kube-apiserver and etcd, against the machine's busy
//	   time and wall x CPUs (cpuwatch.go)
//	W4 container exit -> status change seen via watch, from containerd's exit
//	   time (ContainerStatus FinishedAt) and from the scheduled exit
//	W5 steady state with N pods: agent and containerd CPU (/proc/<pid>/stat),
//	   agent RSS (/proc/<pid>/status), API requests/s the agent sends
//
// API requests are counted the same way for both agents: each agent gets a
// kubeconfig pointing at a counting reverse proxy inside the harness
// (proxy.go) that forwards to the API server with the admin credentials;
// every request (a watch counts once, when it starts) is one count, also
// counted by kind (verb and resource) for W5.
//
// The benchmark reports figures and ratios; it never fails on a number. Its
// own logic (percentiles, /proc parsing in test/procfs, lane isolation,
// report) is unit tested without root or a cluster.
package main
