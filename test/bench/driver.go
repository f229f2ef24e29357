package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// span is one pod's measured interval: Start when the harness issued the
// call, End when the result was seen.
type span struct {
	Name       string
	Start, End time.Time
}

// driver is how the workloads act on one lane.
type driver interface {
	// create starts pods at once and returns, per pod, create call ->
	// Running with every container ready.
	create(ctx context.Context, pods []*v1.Pod) ([]span, error)
	// remove deletes pods at once and returns, per pod, delete call -> gone.
	remove(ctx context.Context, pods []*v1.Pod) ([]span, error)
	// waitExit returns when the exit of pod's container was seen.
	waitExit(ctx context.Context, pod *v1.Pod) (time.Time, error)
	// exitedAt returns the exit time of pod's container as containerd
	// recorded it (ContainerStatus FinishedAt); call it after waitExit and
	// before remove.
	exitedAt(ctx context.Context, pod *v1.Pod) (time.Time, error)
}

// containers is the part of the CRI that W4 reads exit times from.
type containers interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

// finishedAt is containerd's exit time of container id (FinishedAt, in
// nanoseconds since the epoch; 0 while it runs).
func finishedAt(ctx context.Context, rs containers, id string) (time.Time, error) {
	st, err := rs.ContainerStatus(ctx, id, false)
	if err != nil {
		return time.Time{}, fmt.Errorf("ContainerStatus %s: %w", id, err)
	}
	ns := st.GetStatus().GetFinishedAt()
	if ns <= 0 {
		return time.Time{}, fmt.Errorf("container %s (%s) has no exit time", id, st.GetStatus().GetState())
	}
	return time.Unix(0, ns), nil
}

// podExitedAt finds the exited container of the pod with that UID through
// the io.kubernetes.pod.uid label, which both the kubelet and crivk
// (cri.LabelPodUID) put on every container, and returns containerd's exit
// time of it (the latest, if several exited).
func podExitedAt(ctx context.Context, rs containers, uid types.UID) (time.Time, error) {
	cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(uid)}})
	if err != nil {
		return time.Time{}, fmt.Errorf("listing the containers of pod uid %s: %w", uid, err)
	}
	var last time.Time
	for _, c := range cs {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		at, err := finishedAt(ctx, rs, c.GetId())
		if err != nil {
			return time.Time{}, fmt.Errorf("pod uid %s: %w", uid, err)
		}
		if at.After(last) {
			last = at
		}
	}
	if last.IsZero() {
		return time.Time{}, fmt.Errorf("pod uid %s: no exited container among the %d the CRI lists", uid, len(cs))
	}
	return last, nil
}

// parallel runs f for every pod in its own goroutine and joins the errors.
func parallel(pods []*v1.Pod, f func(i int, p *v1.Pod) error) error {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i, p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func podNames(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// ------------------------------------------------------------------ agents

// apiDriver acts through the API server; an agent (kubelet or crivk) does
// the work; the tracker's watch says when.
type apiDriver struct {
	client kubernetes.Interface
	ns     string
	tr     *tracker
	clock  clock.PassiveClock
	// cri is where exitedAt finds the pod's container.
	cri containers

	mu sync.Mutex
	// uids are the UIDs the API server gave the pods created, by name;
	// guarded by mu.
	uids map[string]types.UID
	// early are the pods of the last remove whose object was gone from
	// the API while a container of theirs still ran; guarded by mu.
	early map[types.UID]bool
	// samplePeriod is how often remove compares the API with the runtime
	// and create samples the node's health (0: 1 s).
	samplePeriod time.Duration
	// node is the agent's node, whose Ready condition and Lease create
	// samples ("": not sampled); health is the last create's sampling.
	node   string
	health *nodeHealth
}

// nodeHealth returns the node health sampled during the last create.
func (d *apiDriver) lastNodeHealth() (samples, notReady int, maxLeaseAge time.Duration, ok bool) {
	d.mu.Lock()
	h := d.health
	d.mu.Unlock()
	if h == nil {
		return 0, 0, 0, false
	}
	samples, notReady, maxLeaseAge = h.result()
	return samples, notReady, maxLeaseAge, true
}

// earlyDeletions is the number of pods of the last remove whose object
// was gone from the API while the runtime still ran a container of them
// (the kubelet never lets that happen).
func (d *apiDriver) earlyDeletions() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.early)
}

// watchEarly samples, every period until stop, the pods of uids the API
// still has and then the runtime's running containers: a running container
// of a pod the API no longer had a moment before is an early deletion.
func (d *apiDriver) watchEarly(ctx context.Context, uids map[types.UID]bool, stop <-chan struct{}) {
	period := d.samplePeriod
	if period == 0 {
		period = time.Second
	}
	t := time.NewTicker(period)
	defer t.Stop()
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, err := d.client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			continue
		}
		present := map[types.UID]bool{}
		for i := range list.Items {
			present[list.Items[i].UID] = true
		}
		cs, err := d.cri.ListContainers(ctx, running)
		if err != nil {
			continue
		}
		d.mu.Lock()
		for _, c := range cs {
			uid := types.UID(c.GetLabels()[cri.LabelPodUID])
			if uids[uid] && !present[uid] {
				d.early[uid] = true
			}
		}
		d.mu.Unlock()
	}
}

func (d *apiDriver) create(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	names := podNames(pods)
	d.tr.forget(names)
	if d.node != "" {
		period := d.samplePeriod
		if period == 0 {
			period = time.Second
		}
		h := &nodeHealth{client: d.client, node: d.node, period: period, now: time.Now}
		d.mu.Lock()
		d.health = h
		d.mu.Unlock()
		hctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); h.run(hctx) }()
		defer func() { stop(); <-done }()
	}
	spans := make([]span, len(pods))
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i] = span{Name: p.Name, Start: d.clock.Now()}
		created, err := d.client.CoreV1().Pods(d.ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", d.ns, p.Name, err)
		}
		d.mu.Lock()
		if d.uids == nil {
			d.uids = map[string]types.UID{}
		}
		d.uids[p.Name] = created.UID
		d.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen, err := d.tr.wait(ctx, evRunning, names)
	if err != nil {
		return nil, err
	}
	for i := range spans {
		spans[i].End = seen[spans[i].Name]
	}
	return spans, nil
}

func (d *apiDriver) remove(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	spans := make([]span, len(pods))
	d.mu.Lock()
	d.early = map[types.UID]bool{}
	uids := map[types.UID]bool{}
	for _, p := range pods {
		if uid, ok := d.uids[p.Name]; ok {
			uids[uid] = true
		}
	}
	d.mu.Unlock()
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { defer close(sampled); d.watchEarly(ctx, uids, stop) }()
	defer func() { close(stop); <-sampled }()
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i] = span{Name: p.Name, Start: d.clock.Now()}
		// The pod's own terminationGracePeriodSeconds (30 s) applies.
		if err := d.client.CoreV1().Pods(d.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s: %w", d.ns, p.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen, err := d.tr.wait(ctx, evGone, podNames(pods))
	if err != nil {
		return nil, err
	}
	for i := range spans {
		spans[i].End = seen[spans[i].Name]
	}
	return spans, nil
}

func (d *apiDriver) waitExit(ctx context.Context, pod *v1.Pod) (time.Time, error) {
	seen, err := d.tr.wait(ctx, evExited, []string{pod.Name})
	if err != nil {
		return time.Time{}, err
	}
	return seen[pod.Name], nil
}

func (d *apiDriver) exitedAt(ctx context.Context, pod *v1.Pod) (time.Time, error) {
	d.mu.Lock()
	uid, ok := d.uids[pod.Name]
	d.mu.Unlock()
	if !ok {
		return time.Time{}, fmt.Errorf("pod %s/%s was not created by this lane", d.ns, pod.Name)
	}
	at, err := podExitedAt(ctx, d.cri, uid)
	if err != nil {
		return time.Time{}, fmt.Errorf("pod %s/%s: %w", d.ns, pod.Name, err)
	}
	return at, nil
}

// ------------------------------------------------------------------ raw CRI

// rawDriver sends the sandbox and container configs crivk builds for the
// pod straight to the CRI, one goroutine per pod: no agent in between.
type rawDriver struct {
	rt    *cri.Runtime
	rs    cri.RuntimeService
	clock clock.PassiveClock
	// poll is how often waitExit asks the runtime (the runtime has no
	// container events: containerd 1.6 lacks GetContainerEvents).
	poll time.Duration
	// parallelism bounds the sandbox calls in flight of a create or remove
	// (0: none; rawparallel.go); set between batches only.
	parallelism int

	mu   sync.Mutex
	pods map[string]*rawPod
}

type rawPod struct {
	sandboxID  string
	logDir     string
	containers []string
}

func newRawDriver(rt *cri.Runtime, c clock.PassiveClock) *rawDriver {
	return &rawDriver{rt: rt, rs: rt.Services(), clock: c, poll: 10 * time.Millisecond, pods: map[string]*rawPod{}}
}

var _ tunable = (*rawDriver)(nil)

func (d *rawDriver) setParallelism(n int) { d.parallelism = n }

func (d *rawDriver) start(ctx context.Context, rs cri.RuntimeService, p *v1.Pod) error {
	rp := &rawPod{}
	d.mu.Lock()
	d.pods[p.Name] = rp
	d.mu.Unlock()
	return runPod(ctx, d.rt, rs, p, rp)
}

// runPod is the raw lane's CRI sequence for pod p, which the rawapi lane's
// agent runs too: RunPodSandbox with the config crivk builds, then per
// container CreateContainer and StartContainer. It fills rp as it goes, so
// that on an error rp holds what was created and stopPod can remove it.
func runPod(ctx context.Context, rt *cri.Runtime, rs cri.RuntimeService, p *v1.Pod, rp *rawPod) error {
	sb, _, err := rt.SandboxConfig(p, 0)
	if err != nil {
		return fmt.Errorf("sandbox config of %s: %w", p.Name, err)
	}
	if err := os.MkdirAll(sb.LogDirectory, 0o755); err != nil {
		return err
	}
	rp.logDir = sb.LogDirectory
	id, err := rs.RunPodSandbox(ctx, sb, "")
	if err != nil {
		return fmt.Errorf("RunPodSandbox %s: %w", p.Name, err)
	}
	rp.sandboxID = id
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		cc, err := cri.ContainerConfig(p, c, cri.ContainerTypeRegular, 0, c.Image, nil)
		if err != nil {
			return fmt.Errorf("container config of %s/%s: %w", p.Name, c.Name, err)
		}
		cid, err := rs.CreateContainer(ctx, id, cc, sb)
		if err != nil {
			return fmt.Errorf("CreateContainer %s/%s: %w", p.Name, c.Name, err)
		}
		rp.containers = append(rp.containers, cid)
		if err := rs.StartContainer(ctx, cid); err != nil {
			return fmt.Errorf("StartContainer %s/%s: %w", p.Name, c.Name, err)
		}
	}
	return nil
}

// stopPod is the raw lane's removal of what runPod created: StopContainer
// with the grace period (seconds), StopPodSandbox, RemovePodSandbox. It
// goes on after an error and returns them all; the pod's log directory is
// for the caller.
func stopPod(ctx context.Context, rs cri.RuntimeService, name string, rp *rawPod, grace int64) error {
	var errs []error
	for _, cid := range rp.containers {
		if err := rs.StopContainer(ctx, cid, grace); err != nil {
			errs = append(errs, fmt.Errorf("StopContainer %s of %s: %w", cid, name, err))
		}
	}
	if rp.sandboxID != "" {
		if err := rs.StopPodSandbox(ctx, rp.sandboxID); err != nil {
			errs = append(errs, fmt.Errorf("StopPodSandbox %s: %w", name, err))
		}
		if err := rs.RemovePodSandbox(ctx, rp.sandboxID); err != nil {
			errs = append(errs, fmt.Errorf("RemovePodSandbox %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (d *rawDriver) create(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	spans := make([]span, len(pods))
	rs := withSandboxBound(d.rs, d.parallelism)
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i].Name, spans[i].Start = p.Name, d.clock.Now()
		err := d.start(ctx, rs, p)
		spans[i].End = d.clock.Now()
		return err
	})
	return spans, err
}

func (d *rawDriver) remove(ctx context.Context, pods []*v1.Pod) ([]span, error) {
	spans := make([]span, len(pods))
	rs := withSandboxBound(d.rs, d.parallelism)
	err := parallel(pods, func(i int, p *v1.Pod) error {
		spans[i].Name, spans[i].Start = p.Name, d.clock.Now()
		d.mu.Lock()
		rp := d.pods[p.Name]
		delete(d.pods, p.Name)
		d.mu.Unlock()
		if rp == nil {
			return fmt.Errorf("pod %s was not created by this lane", p.Name)
		}
		grace := int64(30)
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = *p.Spec.TerminationGracePeriodSeconds
		}
		var errs []error
		if err := stopPod(ctx, rs, p.Name, rp, grace); err != nil {
			errs = append(errs, err)
		}
		spans[i].End = d.clock.Now()
		if err := os.RemoveAll(rp.logDir); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	return spans, err
}

func (d *rawDriver) waitExit(ctx context.Context, pod *v1.Pod) (time.Time, error) {
	d.mu.Lock()
	rp := d.pods[pod.Name]
	d.mu.Unlock()
	if rp == nil || len(rp.containers) == 0 {
		return time.Time{}, fmt.Errorf("pod %s has no container of this lane", pod.Name)
	}
	var at time.Time
	err := wait.PollUntilContextCancel(ctx, d.poll, true, func(ctx context.Context) (bool, error) {
		st, err := d.rs.ContainerStatus(ctx, rp.containers[0], false)
		if err != nil {
			return false, fmt.Errorf("ContainerStatus of %s: %w", pod.Name, err)
		}
		if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			at = d.clock.Now()
			return true, nil
		}
		return false, nil
	})
	return at, err
}

func (d *rawDriver) exitedAt(ctx context.Context, pod *v1.Pod) (time.Time, error) {
	d.mu.Lock()
	rp := d.pods[pod.Name]
	d.mu.Unlock()
	if rp == nil || len(rp.containers) == 0 {
		return time.Time{}, fmt.Errorf("pod %s has no container of this lane", pod.Name)
	}
	at, err := finishedAt(ctx, d.rs, rp.containers[0])
	if err != nil {
		return time.Time{}, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	return at, nil
}
