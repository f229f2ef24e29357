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
//	         the physical limit for an agent on this runtime.
//	kubelet  hack/run-kubelet.sh (kubelet v1.35.4) as node NODE_NAME.
//	crivk    hack/run-crivk.sh as node NODE_NAME.
//
// Each agent lane starts its agent, waits for the Node to be Ready, warms
// the caches with one throw-away pod, runs the workloads, deletes its pods,
// stops the agent, removes whatever sandbox the CRI still holds and the Node
// object, and checks that the CRI and the namespace are empty before the next
// lane starts (isolation.go): a kubelet kills every sandbox it does not know,
// and one lane's left-overs would be the next lane's load.
//
// Workloads (workloads.go), the same for every lane through the driver
// interface (apidriver.go for the agents, rawdriver.go for the CRI):
//
//	W1 one pod, create -> Running with all containers ready, seen via watch, in sequence
//	W2 batches created at once: per-pod create -> Running, batch lag, pods/s
//	W3 deletion of those batches (container exits on TERM, grace 30 s): delete -> gone
//	W4 container exit (at a known wall-clock second) -> status change seen via watch
//	W5 steady state with N pods: agent and containerd CPU (/proc/<pid>/stat),
//	   agent RSS (/proc/<pid>/status), API requests/s the agent sends
//
// API requests are counted the same way for both agents: each agent gets a
// kubeconfig pointing at a counting reverse proxy inside the harness
// (proxy.go) that forwards to the API server with the admin credentials;
// every request (a watch counts once, when it starts) is one count.
//
// The benchmark reports figures and ratios; it never fails on a number. Its
// own logic (percentiles, /proc parsing, lane isolation, report) is unit
// tested without root or a cluster.
package main
