// Command benchfleet (built as _output/bin/crivk-bench-fleet by
// hack/bench-fleet.sh, `make bench-fleet`) compares what a fleet of crivk
// nodes and a fleet of the kubelet's hollow nodes (k8s.io/kubernetes
// cmd/kubemark, --morph=kubelet) cost the control plane, on the local
// cluster of hack/local-up.sh, at several node counts (issue #33).
//
// Both sides run the same fake runtime, the kubelet's own
// (k8s.io/cri-client/pkg/fake): the hollow nodes in-process, crivk through
// hack/tools/cmd/fakecri on a unix socket. No container runs: the figures
// are the control plane's and the agents' own, not a runtime's. Both
// sides join with the bootstrap token and get one client certificate per
// node (TLS bootstrap, CSRs auto-approved), both with the API client
// QPS/burst 50/100.
//
// The loop, for each node count N and each agent (one after another on
// the same control plane, the order alternating per N so that neither
// always runs on a warmer API server):
//
//  1. a baseline window with no bench node (control plane alone);
//  2. start the agent's N nodes (crivk: one process --node-count=N plus
//     one fakecri; kubelet: N kubemark processes), wait until all are Ready;
//  3. create -pods-per-node pods on every node (pinned by nodeName), wait
//     until all are Running (create -> Running at the API, p50/p90);
//  4. steady window: the fleet with its pods, nothing changing;
//  5. churn window: pods created round-robin over the nodes at N/10 per
//     second (one per node every 10 s), each deleted as soon as it is
//     Running;
//  6. cleanup: the pods deleted and gone, the processes stopped, the Node
//     and Lease objects deleted.
//
// In each window it reads the API server's /metrics before and after
// (apiserver_request_total by verb, the watch gauges, the size
// histograms' sums) and /proc of the API server, etcd and the agents'
// processes (CPU seconds, VmRSS). Per-node figures are the window's
// increase over the baseline window divided by N. It writes results.json
// and report.md into -out and, with -docs, docs/benchmarks-fleet.md with
// its SVG plots (docs/benchmarks-fleet/*.svg, with two node counts or
// more). -render FILE rewrites those reports from an earlier results.json
// without running anything. With -deadline, a node count whose estimated
// run would end later is skipped (and the report says so), and the run in
// progress at the deadline is stopped and cleaned up.
//
// It must never touch anything but its own namespace (bench-fleet), its
// own nodes (label bench.crivk.io/fleet) and the processes it started.
package main
