package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// chaosCycles is how many times TestKill9DuringChurn kills crivk: 3 in
// `make test`, CRIVK_CHAOS_CYCLES (10 in `make chaos`) otherwise.
func chaosCycles() int {
	if n, err := strconv.Atoi(os.Getenv("CRIVK_CHAOS_CYCLES")); err == nil && n > 0 {
		return n
	}
	return 3
}

// churnInvariants is what the sampler of TestKill9DuringChurn found.
type churnInvariants struct {
	mu sync.Mutex
	// samples: the samples taken; failed: those dropped because a list
	// failed (lastErr the last such error). The invariants hold only
	// over the samples taken: the test requires enough of them.
	samples, failed int
	lastErr         error
	// early: pods whose object was gone while a container of theirs ran.
	early map[types.UID]string
	// twice: a container of a pod running twice at once, a second
	// instance of a container, or a second ready sandbox.
	twice map[types.UID]string
	// restarts: pods with a container restart (none crash here).
	restarts map[string]int32
	// seen: every pod UID that reached the runtime.
	seen map[types.UID]bool
}

// sample checks the invariants once: the API's objects are listed before
// the runtime, so a container seen running after its object is gone is a
// real violation.
func (c *churnInvariants) sample(ctx context.Context, ns string) {
	fail := func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.failed++
		c.lastErr = err
	}
	l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fail(err)
		return
	}
	present := map[types.UID]bool{}
	for _, p := range l.Items {
		present[p.UID] = true
	}
	cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
	if err != nil {
		fail(err)
		return
	}
	sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
	if err != nil {
		fail(err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples++
	instances := map[types.UID]int{}
	for _, ctr := range cs {
		uid := types.UID(ctr.Labels["io.kubernetes.pod.uid"])
		c.seen[uid] = true
		instances[uid]++
		if instances[uid] > 1 || ctr.Metadata.Attempt > 0 {
			c.twice[uid] = fmt.Sprintf("%d instances of container c, attempt %d", instances[uid], ctr.Metadata.Attempt)
		}
		if ctr.State == runtimeapi.ContainerState_CONTAINER_RUNNING && !present[uid] {
			if _, ok := c.early[uid]; !ok {
				c.early[uid] = "container " + ctr.Id[:12] + " running, object gone"
			}
		}
	}
	ready := map[types.UID]int{}
	for _, sb := range sbs {
		uid := types.UID(sb.Metadata.Uid)
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready[uid]++
			if ready[uid] > 1 {
				c.twice[uid] = fmt.Sprintf("%d ready sandboxes", ready[uid])
			}
		}
	}
	for _, p := range l.Items {
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount > 0 {
				c.restarts[p.Name] = st.RestartCount
			}
		}
	}
}

// TestKill9DuringChurn keeps about 30 pods churning (created every 300 ms,
// the oldest deleted, some with a preStop hook, all with a short grace
// period) while crivk is killed with SIGKILL and restarted, again and
// again. Sampled every second and at the end: no pod object gone while a
// container of it ran, no container or sandbox started twice, no restart;
// once the churn stops and everything is deleted, no container, sandbox
// or pod cgroup of any of those pods is left.
func TestKill9DuringChurn(t *testing.T) {
	ns := newNamespace(t)
	cycles := chaosCycles()
	inv := &churnInvariants{early: map[types.UID]string{}, twice: map[types.UID]string{}, restarts: map[string]int32{}, seen: map[types.UID]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var wg sync.WaitGroup
	// The sampler.
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			inv.sample(ctx, ns)
			return false, nil
		})
	}()
	// The churn: create one pod every 300 ms, keep 30.
	created := 0
	churnDone := make(chan struct{})
	go func() {
		defer close(churnDone)
		var live []string
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("churn-%03d", created)
			p := busyboxPod(name, v1.RestartPolicyAlways, "trap 'exit 0' TERM; while true; do sleep 1; done")
			grace := int64(3)
			p.Spec.TerminationGracePeriodSeconds = &grace
			if created%3 == 0 {
				p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sleep", "1"}}}}
			}
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := client.CoreV1().Pods(ns).Create(cctx, p, metav1.CreateOptions{}); err == nil {
				live = append(live, name)
				created++
			}
			ccancel()
			if len(live) > 30 {
				dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
				_ = client.CoreV1().Pods(ns).Delete(dctx, live[0], metav1.DeleteOptions{})
				dcancel()
				live = live[1:]
			}
		}
	}()

	// The faults: kill -9 every 5 s, restart 1 s later.
	for i := range cycles {
		time.Sleep(5 * time.Second)
		killCrivkFor(t)
		time.Sleep(time.Second)
		if err := startCrivkFor(t); err != nil {
			t.Fatalf("cycle %d: restarting crivk: %v", i+1, err)
		}
	}
	// Let the last restart settle, then stop the churn and delete all.
	time.Sleep(10 * time.Second)
	stop := time.Now()
	cancel()
	<-churnDone
	wg.Wait()
	if err := client.CoreV1().Pods(ns).DeleteCollection(testContext(t, 30*time.Second), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatalf("deleting the pods: %v", err)
	}
	var left string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		inv.sample(ctx, ns)
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		if len(l.Items) > 0 {
			left = fmt.Sprintf("%d pod objects", len(l.Items))
			return false, nil
		}
		inv.mu.Lock()
		defer inv.mu.Unlock()
		for uid := range inv.seen {
			if sb, c := runtimeObjects(t, uid); sb+c > 0 {
				left = fmt.Sprintf("pod %s: %d sandboxes, %d containers", uid, sb, c)
				return false, nil
			}
			for _, q := range []v1.PodQOSClass{v1.PodQOSBestEffort} {
				if d := anyDirLeft(podCgroupDirs(q, uid)); d != "" {
					left = "cgroup " + d
					return false, nil
				}
			}
		}
		return true, nil
	})
	inv.mu.Lock()
	defer inv.mu.Unlock()
	t.Logf("%d kill -9 cycles during a churn of %d pods (about 30 live): %d samples (%d dropped: a list failed), %d pods seen in the runtime; %d objects gone before their containers, %d pods with a container or sandbox twice, %d pods restarted; all cleaned %s after the churn stopped",
		cycles, created, inv.samples, inv.failed, len(inv.seen), len(inv.early), len(inv.twice), len(inv.restarts), time.Since(stop).Round(time.Second))
	// The invariants hold vacuously over no sample: the sampler ran
	// about once a second for 6 s a cycle and more; a few dropped
	// samples are the API server's or containerd's hiccups, most
	// dropped is a test that saw nothing.
	if minSamples := 3 * cycles; inv.samples < minSamples || inv.failed > inv.samples/4 {
		t.Errorf("%d samples taken and %d dropped (last error: %v): want at least %d, at most a quarter dropped", inv.samples, inv.failed, inv.lastErr, minSamples)
	}
	if len(inv.seen) < 10 {
		t.Errorf("only %d of the churn's pods seen in the runtime by the sampler", len(inv.seen))
	}
	if len(inv.early) > 0 {
		t.Errorf("pod objects gone while their containers ran: %v", inv.early)
	}
	if len(inv.twice) > 0 {
		t.Errorf("containers or sandboxes started twice: %v", inv.twice)
	}
	if len(inv.restarts) > 0 {
		t.Errorf("unexpected restarts: %v", inv.restarts)
	}
	if err != nil {
		t.Errorf("3 minutes after the churn stopped, left: %s", left)
	}
	if created < 30 {
		t.Errorf("only %d pods created during the churn", created)
	}
}
