package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fleetLabel marks the nodes of the multi-node crivk (--node-labels): the
// test's pods select them, so the single node, NotReady while the fleet
// runs, is no topology domain.
const fleetLabel = "e2e.crivk.io/fleet"

// TestFleetThreeNodes runs crivk with --node-count=3 (docs/scale.md): the
// nodes <node>-0..2 register Ready with their leases, each with a third of
// the machine; a Deployment of 6 pods spread by a topology spread
// constraint runs 2 per node, each node's API serving its pods' logs; a
// pod too big for one node's share is unschedulable, and refused by the
// node it is bound to (OutOfmemory against the share); a hostPort one node's pod holds is refused on
// another node (NodePorts, naming the node); one node drained through the
// eviction API ends with its pods elsewhere and none of its sandboxes or
// pod cgroups left; after kill -9 of the process and a restart every node
// renews its lease again, no pod is duplicated or restarted, and the
// runtime's sandboxes and the pod cgroups of each node are exactly its API
// pods. It logs the process' RSS with one and with three idle nodes. The
// single node is back, Ready, at the end, the fleet's nodes deleted.
func TestFleetThreeNodes(t *testing.T) {
	const count = 3
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", nodeName, i)
	}
	ctx := testContext(t, 15*time.Minute)

	single, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rss1 := processRSS(t, crivkPID(t))

	// Cleanups run last first: the fleet's pods go while it runs, then the
	// single node is back (withCrivkFlags), then the fleet's Nodes go.
	cleanupFleetNodes(t, names)
	waitSingleNodeEmpty(t, 2*time.Minute)
	lists1 := listsPerRelist(t, nodeName)
	args := []string{"--node-count=" + strconv.Itoa(count), "--pod-manifest-path=", "--node-labels=" + fleetLabel + "=true"}
	withCrivkFlags(t, func() { removeDeadUnlabelledSandboxes(t) }, nil, args...)
	started := time.Now()
	waitFleetRenewed(t, names, started, 2*time.Minute)
	rss3 := processRSS(t, crivkPID(t))
	t.Logf("RSS of crivk: %.1f MiB with 1 idle node, %.1f MiB with %d idle nodes: %.1f MiB per extra node",
		mib(rss1), mib(rss3), count, mib(rss3-rss1)/float64(count-1))
	// The runtime is walked once per relist period for every node
	// (pleg.Shared): the list calls of the process per relist of node 0
	// are the single node's plus the other nodes' housekeeping, about
	// 3*lists1-4 for three idle nodes (two calls a walk), not 3*lists1
	// as three relists would make. The CRI call metrics are the
	// process' (node 0's /metrics).
	lists3 := listsPerRelist(t, names[0])
	t.Logf("runtime list calls (list_podsandbox + list_containers) per relist period: %.2f with 1 idle node, %.2f with %d idle nodes (%d separate relists: about %.2f)",
		lists1, lists3, count, count, count*lists1)
	if saved := count*lists1 - lists3; saved < 1.5*(count-1) {
		t.Errorf("list calls per relist period: %.2f with %d nodes, %.2f with one: %.2f saved against %d separate relists, want about %d (one walk of two calls for all)",
			lists3, count, lists1, saved, count, 2*(count-1))
	}

	// Each node's allocatable is its share of the machine's; its kubepods
	// cgroup is bounded by its share too.
	want := v1.ResourceList{}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		q := single.Status.Allocatable[r]
		if r == v1.ResourceCPU {
			want[r] = *resource.NewMilliQuantity(q.MilliValue()/count, q.Format)
		} else {
			want[r] = *resource.NewQuantity(shareMemoryAllocatable(q.Value(), 1, count), q.Format)
		}
	}
	share := map[string]*v1.Node{}
	for i, n := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		share[n] = node
		for r, w := range want {
			if got := node.Status.Allocatable[r]; got.Cmp(w) != 0 {
				t.Errorf("node %s: allocatable %s %s, want a third of the single node's %s (memory: of its pods' bound, less the whole threshold): %s", n, r, got.String(), single.Status.Allocatable.Name(r, resource.DecimalSI).String(), w.String())
			}
		}
		if p := node.Status.DaemonEndpoints.KubeletEndpoint.Port; p != int32(10250+i) {
			t.Errorf("node %s advertises node API port %d", n, p)
		}
		limit := readInt(t, filepath.Join("/sys/fs/cgroup/memory", cgroupRoot(), n, "kubepods", "memory.limit_in_bytes"))
		alloc, capa := node.Status.Allocatable[v1.ResourceMemory], node.Status.Capacity[v1.ResourceMemory]
		if limit < alloc.Value() || limit > capa.Value() {
			t.Errorf("node %s: kubepods memory.limit_in_bytes %d, want between its allocatable %d and its capacity %d", n, limit, alloc.Value(), capa.Value())
		}
	}

	// A node registers with the node lifecycle controller's not-ready
	// taint until it saw the node Ready; a tainted node is no domain of
	// the spread below (NodeTaintsPolicy Honor) and would get no pod.
	untainted := wait.PollUntilContextTimeout(ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || len(node.Spec.Taints) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if untainted != nil {
		t.Fatalf("the fleet's nodes still tainted a minute after Ready: %s", nodeDigest(ctx))
	}

	ns := newNamespace(t)
	t.Cleanup(func() { clearFleet(t, ns, names) })

	// Topology spread: 6 pods, 2 per node.
	replicas := int32(6)
	honor := v1.NodeInclusionPolicyHonor
	sel := map[string]string{"app": "fleet-spread"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "spread"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: fleetPodSpec(func(s *v1.PodSpec) {
					s.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
						// A cordoned node (its unschedulable taint) is no
						// domain, so its pods go to the others.
						NodeTaintsPolicy: &honor,
					}}
				}),
			},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSpread(t, ns, "app=fleet-spread", map[string]int{names[0]: 2, names[1]: 2, names[2]: 2}, 3*time.Minute)
	// Each node's API (port 10250+i) serves its own pods' logs to the API
	// server.
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=fleet-spread"})
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for _, p := range pods.Items {
		if logged[p.Spec.NodeName] {
			continue
		}
		logged[p.Spec.NodeName] = true
		// The log is written before the pod turns Ready, but the API may
		// read it a moment after.
		var got string
		var lerr error
		werr := wait.PollUntilContextTimeout(ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, lerr = podLogs(ctx, ns, p.Name, &v1.PodLogOptions{})
			return lerr == nil && got == "started\n", nil
		})
		if werr != nil {
			t.Errorf("logs of %s on node %s through its node API: %q, %v", p.Name, p.Spec.NodeName, got, lerr)
		}
	}

	// A pod too big for one node's share: unschedulable, and refused by
	// the node it is bound to, against the share.
	mem := share[names[0]].Status.Allocatable[v1.ResourceMemory]
	tooBig := resource.NewQuantity(mem.Value()+64<<20, resource.BinarySI)
	if total := single.Status.Allocatable[v1.ResourceMemory]; tooBig.Cmp(total) >= 0 {
		t.Fatalf("the machine's allocatable memory %s is too small for the test", total.String())
	}
	big := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fleetPodSpec(func(s *v1.PodSpec) {
			s.Containers[0].Resources.Requests[v1.ResourceMemory] = *tooBig
		})}
	}
	createPod(t, ns, big("too-big"))
	waitPod(t, ns, "too-big", time.Minute, "Unschedulable", func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				t.Logf("too-big: %s", c.Message)
				return strings.Contains(c.Message, "Insufficient memory")
			}
		}
		return false
	})
	bound := big("too-big-bound")
	bound.Spec.NodeName = names[0]
	createPod(t, ns, bound)
	p := waitPod(t, ns, bound.Name, time.Minute, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if wantMsg := fmt.Sprintf("Pod was rejected: Node didn't have enough resource: memory, requested: %d, used: ", tooBig.Value()); p.Status.Reason != "OutOfmemory" ||
		!strings.HasPrefix(p.Status.Message, wantMsg) || !strings.HasSuffix(p.Status.Message, fmt.Sprintf(", capacity: %d", mem.Value())) {
		t.Errorf("too-big-bound on %s: reason %q message %q; want OutOfmemory against its share %d", names[0], p.Status.Reason, p.Status.Message, mem.Value())
	}

	// A host port a pod of node 0 holds is refused on node 1.
	hp := func(name, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fleetPodSpec(func(s *v1.PodSpec) {
			s.NodeName = node
			s.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: 18081, Protocol: v1.ProtocolTCP}}
		})}
	}
	createPod(t, ns, hp("port-a", names[0]))
	waitPod(t, ns, "port-a", time.Minute, "Running", isRunningReady)
	createPod(t, ns, hp("port-b", names[1]))
	p = waitPod(t, ns, "port-b", time.Minute, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantMsg := "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: host port TCP/18081 (0.0.0.0) is used on this machine by pod " + ns + "/port-a of node " + names[0]
	if p.Status.Reason != "NodePorts" || p.Status.Message != wantMsg {
		t.Errorf("port-b on %s: reason %q message %q; want NodePorts, %q", names[1], p.Status.Reason, p.Status.Message, wantMsg)
	}
	// A hostNetwork pod asking for node 1's API port (10251) is refused on
	// node 0: the process itself listens there (docs/scale.md).
	own := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "port-own"}, Spec: fleetPodSpec(func(s *v1.PodSpec) {
		s.NodeName = names[0]
		s.HostNetwork = true
		s.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 10251, HostPort: 10251, Protocol: v1.ProtocolTCP}}
	})}
	createPod(t, ns, own)
	p = waitPod(t, ns, "port-own", time.Minute, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantMsg = "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: host port TCP/10251 (0.0.0.0) is used on this machine by crivk's own listener: the node API of node " + names[1]
	if p.Status.Reason != "NodePorts" || p.Status.Message != wantMsg {
		t.Errorf("port-own on %s: reason %q message %q; want NodePorts, %q", names[0], p.Status.Reason, p.Status.Message, wantMsg)
	}
	for _, name := range []string{"too-big", "too-big-bound", "port-a", "port-b", "port-own"} {
		if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"too-big", "too-big-bound", "port-a", "port-b", "port-own"} {
		waitGone(t, ns, name, time.Minute)
	}

	// Drain the last node: cordon, then evict its pods.
	victim := names[count-1]
	if _, err := client.CoreV1().Nodes().Patch(ctx, victim, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node lifecycle controller taints a cordoned node; before it,
	// the scheduler still counts the node as a domain.
	tainted := wait.PollUntilContextTimeout(ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == v1.TaintNodeUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if tainted != nil {
		t.Logf("node %s not tainted %s 30s after the cordon; evicting anyway", victim, v1.TaintNodeUnschedulable)
	}
	onVictim, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + victim})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range onVictim.Items {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}}
		if err := client.PolicyV1().Evictions(ns).Evict(ctx, ev); err != nil {
			t.Fatalf("evicting %s from %s: %v", p.Name, victim, err)
		}
	}
	waitSpread(t, ns, "app=fleet-spread", map[string]int{names[0]: 3, names[1]: 3}, 3*time.Minute)
	waitRuntimeMatches(t, names, time.Minute)
	if sbs := nodeSandboxes(t, victim, false); len(sbs) > 0 {
		t.Errorf("drained node %s still has sandboxes of pods %v", victim, keys(sbs))
	}

	// kill -9 and restart: every node renews its lease again, the same
	// pods run with the same containers, nothing is duplicated or leaked.
	before := podContainers(t, ns, "app=fleet-spread")
	killed := time.Now()
	killCrivkFor(t)
	if err := startCrivkFor(t, args...); err != nil {
		t.Fatalf("restarting crivk after kill -9: %v", err)
	}
	waitFleetRenewed(t, names, killed, 2*time.Minute)
	waitRuntimeMatches(t, names, time.Minute)
	after := podContainers(t, ns, "app=fleet-spread")
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("pods and containers after kill -9 and restart:\n%v\nbefore:\n%v", after, before)
	}
	waitSpread(t, ns, "app=fleet-spread", map[string]int{names[0]: 3, names[1]: 3}, time.Minute)
}

// fleetPodSpec is a small busybox pod for the fleet's nodes (it ends at
// once on SIGTERM), changed by mutate.
func fleetPodSpec(mutate func(*v1.PodSpec)) v1.PodSpec {
	grace := int64(1)
	s := v1.PodSpec{
		NodeSelector:                  map[string]string{fleetLabel: "true"},
		TerminationGracePeriodSeconds: &grace,
		Containers: []v1.Container{{
			Name: "c", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", "echo started; trap 'exit 0' TERM; sleep 3600 & wait"},
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("16Mi"),
			}},
		}},
	}
	if mutate != nil {
		mutate(&s)
	}
	return s
}

// waitSingleNodeEmpty waits until the single node has no pod left in the
// API, no running sandbox and no stopped one of a pod the API no longer
// has (crivk, still running, collects those just after the object goes):
// the multi-node crivk refuses to start beside its sandboxes, and
// removeDeadUnlabelledSandboxes, once crivk is stopped, must find only
// those of pods that still exist.
func waitSingleNodeEmpty(t *testing.T, timeout time.Duration) {
	t.Helper()
	ctx := testContext(t, timeout)
	var last string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		api, err := apiPodsOn(ctx, nodeName)
		if err != nil {
			return false, nil
		}
		uncollected, running, err := singleNodeSandboxes(ctx)
		if err != nil {
			return false, nil
		}
		last = fmt.Sprintf("pods %v, running sandboxes %v, stopped sandboxes of deleted pods (not collected) %v", api, running, uncollected)
		return len(api) == 0 && len(running) == 0 && len(uncollected) == 0, nil
	})
	if err != nil {
		t.Fatalf("node %s still runs pods after %s: %s", nodeName, timeout, last)
	}
}

// singleNodeSandboxes lists the single node's sandboxes (crivk-owned,
// with no node label) that are running, and the stopped ones of pods the
// API no longer has (which crivk should have collected), as
// "ns/name id".
func singleNodeSandboxes(ctx context.Context) (uncollected, running []string, err error) {
	api, err := apiPodUIDs(ctx) // before the runtime: a pod created in between is listed
	if err != nil {
		return nil, nil, err
	}
	sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: cri.OwnedSelector("")})
	if err != nil {
		return nil, nil, err
	}
	for _, sb := range sbs {
		if _, ok := sb.Labels[cri.LabelNode]; ok {
			continue
		}
		what := sb.Metadata.Namespace + "/" + sb.Metadata.Name + " " + sb.Id[:12]
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			running = append(running, what)
		} else if _, ok := api[types.UID(sb.Metadata.Uid)]; !ok {
			uncollected = append(uncollected, what)
		}
	}
	return uncollected, running, nil
}

// removeDeadUnlabelledSandboxes removes the stopped sandboxes the single
// node left (a multi-node crivk refuses to start beside them,
// docs/scale.md) and reports how many. Those of pods still in the API
// are the kubelet's to keep (the latest sandbox of a finished pod); one
// of a pod the API no longer has is one crivk should have collected
// (waitSingleNodeEmpty waited for that): it fails the test, a sandbox GC
// leak, and is removed all the same. A running one fails the test: a pod
// of the single node still runs.
func removeDeadUnlabelledSandboxes(t *testing.T) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	api, err := apiPodUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: cri.OwnedSelector("")})
	if err != nil {
		t.Fatal(err)
	}
	var kept, uncollected []string
	for _, sb := range sbs {
		if _, ok := sb.Labels[cri.LabelNode]; ok {
			continue
		}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Fatalf("sandbox %s of pod %s/%s of the single node still runs", sb.Id, sb.Metadata.Namespace, sb.Metadata.Name)
		}
		what := fmt.Sprintf("%s of pod %s/%s uid %s", sb.Id[:12], sb.Metadata.Namespace, sb.Metadata.Name, sb.Metadata.Uid)
		if _, ok := api[types.UID(sb.Metadata.Uid)]; ok {
			kept = append(kept, what)
		} else {
			uncollected = append(uncollected, what)
		}
		if err := runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Fatalf("removing the single node's stopped sandbox %s: %v", sb.Id, err)
		}
	}
	t.Logf("removed %d stopped sandboxes of the single node before the fleet: %d of pods still in the API %v, %d of deleted pods %v",
		len(kept)+len(uncollected), len(kept), kept, len(uncollected), uncollected)
	if len(uncollected) > 0 {
		t.Errorf("%d stopped sandboxes of pods the API no longer has, which crivk should have collected: %v", len(uncollected), uncollected)
	}
}

// waitFleetRenewed waits until every node is Ready and its Lease was
// renewed after since by its holder.
func waitFleetRenewed(t *testing.T, names []string, since time.Time, timeout time.Duration) {
	t.Helper()
	ctx := testContext(t, timeout)
	var last string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				last = fmt.Sprintf("node %s: %v", n, err)
				return false, nil
			}
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || (c.Type == v1.NodeReady && c.Status == v1.ConditionTrue)
			}
			if !ready {
				last = fmt.Sprintf("node %s not Ready: %v", n, node.Status.Conditions)
				return false, nil
			}
			l, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				last = fmt.Sprintf("lease %s: %v", n, err)
				return false, nil
			}
			if !renewedBy(l, n, since) {
				last = fmt.Sprintf("lease %s held by %v, renewed %v", n, l.Spec.HolderIdentity, l.Spec.RenewTime)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the %d nodes not Ready with their leases renewed since %s after %s: %s", len(names), since.Format(time.RFC3339), timeout, last)
	}
}

// renewedBy: RenewTime has microseconds, written by crivk on this
// machine's clock.
func renewedBy(l *coordinationv1.Lease, holder string, since time.Time) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == holder && l.Spec.RenewTime != nil &&
		!l.Spec.RenewTime.Time.Before(since)
}

// waitSpread waits until the pods of selector in ns are Running and Ready,
// none being deleted, with want[node] of them on each node and none
// elsewhere.
func waitSpread(t *testing.T, ns, selector string, want map[string]int, timeout time.Duration) {
	t.Helper()
	ctx := testContext(t, timeout)
	var got map[string]int
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		got = map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !isRunningReady(&p) {
				got["<not running: "+p.Name+" "+string(p.Status.Phase)+" on "+p.Spec.NodeName+">"]++
				continue
			}
			got[p.Spec.NodeName]++
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Fatalf("pods %s: want %v per node, got %v after %s", selector, want, got, timeout)
	}
}

// apiPodsOn are the UIDs of the pods bound to node in the API, of every
// namespace, finished ones left out.
func apiPodsOn(ctx context.Context, node string) (map[types.UID]string, error) {
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]string{}
	for _, p := range pods.Items {
		if p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded {
			out[p.UID] = p.Namespace + "/" + p.Name
		}
	}
	return out, nil
}

// nodeSandboxes counts the sandboxes labelled for node per pod UID (the
// ready ones only with ready).
func nodeSandboxes(t *testing.T, node string, ready bool) map[types.UID]int {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	f := &runtimeapi.PodSandboxFilter{LabelSelector: cri.OwnedSelector(node)}
	if ready {
		f.State = &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	}
	sbs, err := runtime.ListPodSandbox(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]int{}
	for _, sb := range sbs {
		out[types.UID(sb.Metadata.Uid)]++
	}
	return out
}

// podCgroupsOf are the pod cgroups under node's kubepods (memory
// hierarchy), by pod UID.
func podCgroupsOf(node string) map[types.UID]bool {
	out := map[types.UID]bool{}
	base := filepath.Join("/sys/fs/cgroup/memory", cgroupRoot(), node, "kubepods")
	for _, class := range []string{"", "burstable", "besteffort"} {
		entries, _ := os.ReadDir(filepath.Join(base, class))
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "pod") {
				out[types.UID(strings.TrimPrefix(e.Name(), "pod"))] = true
			}
		}
	}
	return out
}

// waitRuntimeMatches waits until, for every node, its ready sandboxes are
// exactly one per API pod bound to it, it has no other sandbox, and its
// pod cgroups are exactly its API pods'.
func waitRuntimeMatches(t *testing.T, names []string, timeout time.Duration) {
	t.Helper()
	ctx := testContext(t, timeout)
	var last string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			api, err := apiPodsOn(ctx, n)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			ready, all, cgroups := nodeSandboxes(t, n, true), nodeSandboxes(t, n, false), podCgroupsOf(n)
			for uid, name := range api {
				if ready[uid] != 1 {
					last = fmt.Sprintf("node %s: pod %s has %d ready sandboxes", n, name, ready[uid])
					return false, nil
				}
				if !cgroups[uid] {
					last = fmt.Sprintf("node %s: pod %s has no pod cgroup", n, name)
					return false, nil
				}
			}
			for uid, c := range all {
				if _, ok := api[uid]; !ok || c != 1 {
					last = fmt.Sprintf("node %s: %d sandboxes of pod UID %s, which the API has %v on it", n, c, uid, ok)
					return false, nil
				}
			}
			for uid := range cgroups {
				if _, ok := api[uid]; !ok {
					last = fmt.Sprintf("node %s: pod cgroup of %s, which the API has not on it", n, uid)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the runtime and the pod cgroups of nodes %v do not match the API's pods after %s: %s", names, timeout, last)
	}
}

// podContainers describes the pods of selector: name, node, UID and each
// container's ID and restart count, sorted.
func podContainers(t *testing.T, ns, selector string) []string {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(testContext(t, 10*time.Second), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		s := fmt.Sprintf("%s on %s (%s):", p.Name, p.Spec.NodeName, p.UID)
		for _, c := range p.Status.ContainerStatuses {
			s += fmt.Sprintf(" %s=%s restarts %d", c.Name, c.ContainerID, c.RestartCount)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// clearFleet deletes the test's pods while the fleet runs and waits until
// no node of it holds a sandbox or pod cgroup, so that the single node
// started next finds nothing of the fleet.
func clearFleet(t *testing.T, ns string, names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = client.AppsV1().Deployments(ns).Delete(ctx, "spread", metav1.DeleteOptions{})
	_ = client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	var last string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			api, err := apiPodsOn(ctx, n)
			if err != nil {
				return false, nil
			}
			if len(api) > 0 {
				last = fmt.Sprintf("node %s still has pods %v", n, api)
				return false, nil
			}
			sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: cri.OwnedSelector(n)})
			if err != nil || len(sbs) > 0 {
				last = fmt.Sprintf("node %s still has %d sandboxes (%v)", n, len(sbs), err)
				return false, nil
			}
			if cg := podCgroupsOf(n); len(cg) > 0 {
				last = fmt.Sprintf("node %s still has pod cgroups %v", n, keys(cg))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("the fleet's pods not cleared before the single node's restart: %s", last)
	}
}

// processRSS is the resident set of process pid, in bytes.
func processRSS(t *testing.T, pid int) int64 {
	t.Helper()
	rss, err := readRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return rss
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func keys[V any](m map[types.UID]V) []types.UID {
	out := make([]types.UID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// listsPerRelist is the CRI list calls (list_podsandbox and
// list_containers, kubelet_runtime_operations_total on the process'
// /metrics, which node serves) per relist of node (its
// kubelet_pleg_relist_duration_seconds_count) over 20 relists.
func listsPerRelist(t *testing.T, node string) float64 {
	t.Helper()
	ctx := testContext(t, time.Minute)
	read := func() (lists, relists float64) {
		raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatalf("reading /metrics of %s: %v", node, err)
		}
		body := string(raw)
		for _, op := range []string{"list_podsandbox", "list_containers"} {
			if v := metricValue(body, `kubelet_runtime_operations_total{operation_type="`+op+`"}`); v > 0 {
				lists += v
			}
		}
		return lists, metricValue(body, "kubelet_pleg_relist_duration_seconds_count")
	}
	lists0, relists0 := read()
	var lists, relists float64
	err := wait.PollUntilContextCancel(ctx, poll, false, func(context.Context) (bool, error) {
		lists, relists = read()
		return relists-relists0 >= 20, nil
	})
	if err != nil || relists0 < 0 {
		t.Fatalf("node %s: relists %v -> %v within a minute: %v", node, relists0, relists, err)
	}
	return (lists - lists0) / (relists - relists0)
}

// evictionHardMemory is hack/run-crivk.sh's memory.available hard
// threshold.
const evictionHardMemory = 100 << 20

// shareMemoryAllocatable is the allocatable memory of a node with weight w
// of total, from the single node's allocatable memory single: its part of
// the pods' bound (single + the threshold), less the whole threshold, which
// the node measures on its own share (nodestatus.Reservations.AllocatableOf).
func shareMemoryAllocatable(single, w, total int64) int64 {
	return (single+evictionHardMemory)*w/total - evictionHardMemory
}

// cleanupFleetNodes registers the fleet tests' last cleanup: once the
// single node is back (withCrivkFlags' cleanup, registered after this one,
// runs first), wait for the restarted crivk's own lease renewal (its Ready
// may still be the True of before the fleet ran, so it must be past its
// start, its SIGTERM handler, before the next stop comes), then delete the
// fleet's Node objects.
func cleanupFleetNodes(t *testing.T, names []string) {
	t.Helper()
	t.Cleanup(func() {
		waitFleetRenewed(t, []string{nodeName}, time.Now(), 2*time.Minute)
		for _, n := range names {
			if err := client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting node %s: %v", n, err)
			}
		}
	})
}
