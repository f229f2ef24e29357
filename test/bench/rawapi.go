package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// The rawapi lane: raw CRI calls driven through the API server. The
// harness creates and deletes pod objects as for the agent lanes
// (apiDriver: the same tracker and watch measure create -> Running and
// delete -> gone) and rawAPIAgent, a minimal node agent inside the harness,
// does the node's side with nothing an agent could leave out:
//
//	register  the Node (Ready, room for maxPods pods) and renew its Lease
//	          every 10 s, as a kubelet does, so that the node lifecycle
//	          controller neither marks it Unknown nor taints it
//	watch     the pods bound to the node (an informer, field selector
//	          spec.nodeName)
//	new pod   runPod (the raw lane's CRI sequence, the configs crivk
//	          builds), PodSandboxStatus for the pod's IP, then ONE status
//	          write (UpdateStatus: Running, ready, the container IDs)
//	deleted   stopPod (StopContainer with the pod's grace, StopPodSandbox,
//	          RemovePodSandbox), the terminal status (UpdateStatus), then
//	          the object's deletion with grace 0 and a UID precondition:
//	          the kubelet's order, containers stopped before the object goes
//
// One goroutine per pod, no bound, no retries, no relist of the runtime, no
// probes, no events: it is the floor any agent that goes through the API
// server can reach on this machine, which raw (no API server at all) is
// not.

// rawAPILane is the lane; setup starts the agent and the harness's watch.
type rawAPILane struct {
	rt     *cri.Runtime
	client kubernetes.Interface // the harness's
	// agentClient is the agent's: the agents' QPS and burst, through the
	// counting proxy.
	agentClient kubernetes.Interface
	ns, node    string
	nodeIP      string
	maxPods     int
	cdPID       int
	proxy       *countingProxy

	agent     *rawAPIAgent
	stop      context.CancelFunc
	stopWatch context.CancelFunc
}

func (l *rawAPILane) Name() string { return "rawapi" }

func (l *rawAPILane) setup(ctx context.Context) (driver, meters, error) {
	l.agent = &rawAPIAgent{client: l.agentClient, rt: l.rt, rs: l.rt.Services(), node: l.node, nodeIP: l.nodeIP,
		maxPods: l.maxPods, clock: clock.RealClock{}, leasePeriod: 10 * time.Second, logf: func(format string, args ...any) {
			log.Printf("lane rawapi: agent: "+format, args...)
		}}
	actx, cancel := context.WithCancel(ctx)
	l.stop = cancel
	if err := l.agent.start(actx); err != nil {
		return nil, meters{}, err
	}
	wctx, cancelWatch := context.WithCancel(ctx)
	l.stopWatch = cancelWatch
	tr := newTracker(clock.RealClock{})
	if err := tr.run(wctx, l.client, l.ns, benchLabel); err != nil {
		return nil, meters{}, err
	}
	d := &apiDriver{client: l.client, ns: l.ns, tr: tr, clock: clock.RealClock{}, cri: l.rt.Services(), node: l.node}
	// No agentPID: the agent is the harness itself (W5, which would measure
	// it, is skipped; the batches' CPU counts the harness as the agent).
	return d, meters{containerdPID: l.cdPID, requests: l.proxy.Count, requestsByKind: l.proxy.ByKind}, nil
}

// teardown stops the agent (its pods are for the isolation's clean) and
// deletes its Lease; the Node goes with the isolation.
func (l *rawAPILane) teardown(ctx context.Context) error {
	if l.stopWatch != nil {
		l.stopWatch()
	}
	if l.agent == nil {
		return nil
	}
	l.stop()
	l.agent.wait()
	err := l.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, l.node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the lease of node %s: %w", l.node, err)
	}
	return nil
}

// rawAPIAgent is the rawapi lane's node agent.
type rawAPIAgent struct {
	client      kubernetes.Interface
	rt          *cri.Runtime
	rs          cri.RuntimeService
	node        string
	nodeIP      string
	maxPods     int
	clock       clock.WithTicker
	leasePeriod time.Duration
	logf        func(format string, args ...any)

	// wg counts the agent's goroutines: the lease loop, the informer and
	// the pod workers.
	wg sync.WaitGroup
	mu sync.Mutex
	// workers are the pods seen, by UID; guarded by mu.
	workers map[types.UID]*rawAPIWorker
}

// rawAPIWorker is one pod's goroutine: it runs the pod, then waits for
// its deletion.
type rawAPIWorker struct {
	// deleting is closed at the pod's deletion (deletionTimestamp set, or
	// the object gone); pod is then the deleting object. Both guarded by
	// the agent's mu.
	deleting chan struct{}
	pod      *v1.Pod
	// gone is true when the object is already gone from the API (forced
	// deletion): nothing to write back.
	gone bool
}

// start registers the node, starts the lease loop and the pod informer,
// and returns once the informer has synced.
func (a *rawAPIAgent) start(ctx context.Context) error {
	a.workers = map[types.UID]*rawAPIWorker{}
	n, err := a.register(ctx)
	if err != nil {
		return err
	}
	if err := a.renewLease(ctx, n); err != nil {
		return err
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		t := a.clock.NewTicker(a.leasePeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if err := a.renewLease(ctx, n); err != nil && ctx.Err() == nil {
				a.logf("%v", err)
			}
		}
	}()
	f := informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.node).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.seen(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { a.seen(ctx, obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			a.seen(ctx, obj, true)
		},
	}); err != nil {
		return fmt.Errorf("pod informer of node %s: %w", a.node, err)
	}
	a.wg.Add(1)
	go func() { defer a.wg.Done(); inf.RunWithContext(ctx) }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("the pod informer of node %s never synced: %w", a.node, ctx.Err())
	}
	return nil
}

// wait returns once every goroutine of the agent ended (after its context).
func (a *rawAPIAgent) wait() { a.wg.Wait() }

// seen handles one informer event: a new pod gets a worker, a deleting
// (or deleted) pod's worker is told.
func (a *rawAPIAgent) seen(ctx context.Context, obj any, gone bool) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		a.logf("informer event with a %T, not a pod", obj)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.workers[p.UID]
	if gone {
		if w != nil {
			a.markDeleting(w, p, true)
			delete(a.workers, p.UID)
		}
		return
	}
	if w == nil {
		w = &rawAPIWorker{deleting: make(chan struct{})}
		a.workers[p.UID] = w
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.work(ctx, p, w) }()
	}
	if p.DeletionTimestamp != nil {
		a.markDeleting(w, p, false)
	}
}

// markDeleting tells w its pod is being deleted (once); the caller holds mu.
func (a *rawAPIAgent) markDeleting(w *rawAPIWorker, p *v1.Pod, gone bool) {
	select {
	case <-w.deleting:
		w.gone = w.gone || gone
		return
	default:
	}
	w.pod, w.gone = p, gone
	close(w.deleting)
}

// work is a pod's life on the node: run it (unless it is deleted first),
// write its status, wait for its deletion, then stop it, write the
// terminal status and delete the object.
func (a *rawAPIAgent) work(ctx context.Context, p *v1.Pod, w *rawAPIWorker) {
	rp := &rawPod{}
	var started time.Time
	select {
	case <-w.deleting:
	default:
		started = a.clock.Now()
		if err := runPod(ctx, a.rt, a.rs, p, rp); err != nil {
			a.logf("pod %s/%s uid %s: %v", p.Namespace, p.Name, p.UID, err)
		} else if err := a.writeRunning(ctx, p, rp, started); err != nil {
			a.logf("%v", err)
		}
	}
	select {
	case <-ctx.Done():
		return
	case <-w.deleting:
	}
	a.mu.Lock()
	dp, gone := w.pod, w.gone
	a.mu.Unlock()
	if err := a.remove(ctx, dp, rp, gone, started); err != nil {
		a.logf("%v", err)
	}
}

// writeRunning writes the running status of p, the pod's IP from the
// sandbox's status.
func (a *rawAPIAgent) writeRunning(ctx context.Context, p *v1.Pod, rp *rawPod, started time.Time) error {
	var podIP string
	if st, err := a.rs.PodSandboxStatus(ctx, rp.sandboxID, false); err == nil {
		podIP = st.GetStatus().GetNetwork().GetIp()
	}
	up := p.DeepCopy()
	up.Status = runningStatus(p, a.nodeIP, podIP, rp.containers, metav1.NewTime(started), metav1.NewTime(a.clock.Now()))
	// Unconditional (no resourceVersion): the agent is the status' only writer.
	up.ResourceVersion = ""
	if _, err := a.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the running status of pod %s/%s uid %s: %w", p.Namespace, p.Name, p.UID, err)
	}
	return nil
}

// remove is the deletion in the kubelet's order: containers and sandbox
// stopped and removed, the terminal status written, then the object
// deleted (grace 0, only if it is still the same pod: UID precondition).
// gone: the object is gone already (forced deletion), only the runtime is
// cleaned.
func (a *rawAPIAgent) remove(ctx context.Context, p *v1.Pod, rp *rawPod, gone bool, started time.Time) error {
	grace := int64(30)
	switch {
	case p.DeletionGracePeriodSeconds != nil:
		grace = *p.DeletionGracePeriodSeconds
	case p.Spec.TerminationGracePeriodSeconds != nil:
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	var errs []error
	if err := stopPod(ctx, a.rs, p.Namespace+"/"+p.Name, rp, grace); err != nil {
		errs = append(errs, err)
	}
	if rp.logDir != "" {
		if err := os.RemoveAll(rp.logDir); err != nil {
			errs = append(errs, err)
		}
	}
	if gone {
		return errors.Join(errs...)
	}
	down := p.DeepCopy()
	down.Status = terminatedStatus(p, a.nodeIP, rp.containers, metav1.NewTime(started), metav1.NewTime(a.clock.Now()))
	down.ResourceVersion = ""
	if _, err := a.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, down, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("writing the terminal status: %w", err))
	}
	uid := p.UID
	err := a.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting the object: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing pod %s/%s uid %s: %w", p.Namespace, p.Name, p.UID, err)
	}
	return nil
}

// containerID is how a pod status names a CRI container: <runtime>://<id>.
func containerID(id string) string {
	if id == "" {
		return ""
	}
	return "containerd://" + id
}

// podConditions are the four conditions a pod status carries, all set to
// ready (true) or not.
func podConditions(ready bool, at metav1.Time) []v1.PodCondition {
	st := v1.ConditionTrue
	if !ready {
		st = v1.ConditionFalse
	}
	return []v1.PodCondition{
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: at},
		{Type: v1.ContainersReady, Status: st, LastTransitionTime: at},
		{Type: v1.PodReady, Status: st, LastTransitionTime: at},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: at},
	}
}

// runningStatus is the one status the rawapi agent writes once p runs:
// phase Running, the four conditions true, every container running and
// ready with its CRI ID (ids, in spec order; a container without one is
// reported waiting). podIP may be empty.
func runningStatus(p *v1.Pod, hostIP, podIP string, ids []string, started, now metav1.Time) v1.PodStatus {
	st := v1.PodStatus{Phase: v1.PodRunning, Conditions: podConditions(true, now), HostIP: hostIP, StartTime: &started, QOSClass: p.Status.QOSClass}
	if hostIP != "" {
		st.HostIPs = []v1.HostIP{{IP: hostIP}}
	}
	if podIP != "" {
		st.PodIP, st.PodIPs = podIP, []v1.PodIP{{IP: podIP}}
	}
	allRunning := true
	for i, c := range p.Spec.Containers {
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
		if i < len(ids) && ids[i] != "" {
			cs.ContainerID = containerID(ids[i])
			cs.State.Running = &v1.ContainerStateRunning{StartedAt: now}
			cs.Ready, cs.Started = true, ptr.To(true)
		} else {
			allRunning = false
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
			cs.Started = ptr.To(false)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	if !allRunning {
		st.Phase = v1.PodPending
		st.Conditions = podConditions(false, now)
	}
	return st
}

// terminatedStatus is the status written once p's containers are stopped:
// every container terminated, not ready. The runtime is not asked for the
// exit codes (raw's sequence has no ContainerStatus call): the benchmark's
// containers exit 0 on TERM, so 0 is written and the phase is Succeeded.
func terminatedStatus(p *v1.Pod, hostIP string, ids []string, started, now metav1.Time) v1.PodStatus {
	st := v1.PodStatus{Phase: v1.PodSucceeded, Conditions: podConditions(false, now), HostIP: hostIP, StartTime: &started, QOSClass: p.Status.QOSClass}
	if started.IsZero() {
		st.StartTime = nil
	}
	if hostIP != "" {
		st.HostIPs = []v1.HostIP{{IP: hostIP}}
	}
	st.PodIP, st.PodIPs = p.Status.PodIP, p.Status.PodIPs
	for i, c := range p.Spec.Containers {
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false)}
		if i < len(ids) && ids[i] != "" {
			cs.ContainerID = containerID(ids[i])
		}
		cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now, ContainerID: cs.ContainerID}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

// register creates (or takes over) the Node and writes its status: Ready,
// room for maxPods pods, the machine's IP.
func (a *rawAPIAgent) register(ctx context.Context) (*v1.Node, error) {
	want := nodeObject(a.node, a.nodeIP, a.maxPods, metav1.NewTime(a.clock.Now()))
	nodes := a.client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		n, err = nodes.Get(ctx, a.node, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("registering node %s: %w", a.node, err)
	}
	// Create may drop or keep the status; write it in any case. The node
	// controllers write the new Node too (taints, annotations): a conflict
	// is retried against a fresh read.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if n == nil {
			if n, err = nodes.Get(ctx, a.node, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		n.Status = want.Status
		var werr error
		if n, werr = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); werr != nil {
			n = nil
			return werr
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing the status of node %s: %w", a.node, err)
	}
	return n, nil
}

// nodeObject is the Node the rawapi agent registers.
func nodeObject(name, ip string, maxPods int, now metav1.Time) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		v1.ResourceCPU:    resource.MustParse("2"),
		v1.ResourceMemory: resource.MustParse("16Gi"),
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: v1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				Message: "the benchmark's rawapi agent", LastHeartbeatTime: now, LastTransitionTime: now}},
		},
	}
	if ip != "" {
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: name}}
	}
	return n
}

// renewLease creates or renews the node's Lease (kube-node-lease/<node>,
// 40 s, owned by the Node so that it goes with it).
func (a *rawAPIAgent) renewLease(ctx context.Context, n *v1.Node) error {
	leases := a.client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	now := metav1.NewMicroTime(a.clock.Now())
	l, err := leases.Get(ctx, a.node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.node, Namespace: v1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(a.node), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
		}, metav1.CreateOptions{})
	case err == nil:
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = ptr.To(a.node), ptr.To[int32](40), &now
		// A lease left by the previous lane's agent belongs to this Node now.
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("renewing the lease of node %s: %w", a.node, err)
	}
	return nil
}
