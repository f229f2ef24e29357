// Package evidence keeps what a failed test tier needs to be explained
// after the fact (issue #34): a tier's clean-up uninstalls releases, stops
// agents and deletes pods, and the kubelet removes a pod's log directory
// with the pod, so whatever is not copied before the clean-up is lost.
//
// A Collector writes into one directory per tier and test,
// _output/test-logs/<tier>/<test>/ (Dir), and every tier calls it on
// failure BEFORE its clean-up:
//
//   - test/helm: each test's Cleanup, and every helm uninstall that follows
//     a failure, collects crivk's DaemonSet pods (object, events, the logs
//     of every container and its previous instance), the kubelet's pod log
//     files of the release's namespace, the nodes and their Leases, the
//     CSRs, the namespace's events, `helm status`, the root dir's listing
//     and crivk's runtime log;
//   - test/e2e: a failed test's namespace (pods, their logs, events) with
//     the slices of crivk's and containerd's logs written during the test,
//     and, when the suite fails, the whole logs, the node and every event;
//   - hack/conformance.sh runs the dump command (./test/evidence/dump)
//     for the node, the events and the agent's and containerd's logs.
//
// What the loop looks like from a caller:
//
//	c := evidence.New(client, evidence.Dir(root, "helm", t.Name()))
//	c.Pods(ctx, "crivk-system", "app.kubernetes.io/name=crivk")
//	c.Node(ctx, node)
//	c.CopyFile("runtime/containerd.log", path, 4<<20)
//	files := c.Close() // writes index.txt (and errors.txt); lists the files
//
// A Collector never fails its caller: an object it cannot read, a log the
// API server refuses, a file that is missing are recorded in errors.txt and
// the collection goes on, because evidence is gathered when something is
// already wrong. It only reads the cluster and the host; it must never
// change either (no deletion, no restart), so that what it saw is what the
// failure left.
package evidence
